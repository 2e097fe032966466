-- The admin API pages an agent's keys by key id (`key_` + a ULID: the order they were issued),
-- so a page is an index range however many keys the agent has. It replaces the index on
-- agent_id alone, which it covers. Members are paged by their primary key (agent_id, user_id).
-- Runs unchanged on PGlite and PostgreSQL.
CREATE INDEX api_keys_agent_key_idx ON api_keys (agent_id, id);
DROP INDEX api_keys_agent_idx;
