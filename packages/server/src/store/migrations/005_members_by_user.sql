-- `GET /v1/agents` pages a user's memberships in agent id order: a user may have a role on
-- 10,000 agents, and with this index a page is one range of it (and the per-agent counts run
-- for that page's rows only) instead of a sort of all of them. It replaces the index on
-- user_id alone, which it covers. Runs unchanged on PGlite and PostgreSQL.
CREATE INDEX members_user_agent_idx ON members (user_id, agent_id);
DROP INDEX members_user_idx;
