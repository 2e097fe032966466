-- The audit log (issue 24, item 4): every deletion and every change of an agent's lifecycle
-- settings, who did it and when; read through the admin API. Runs unchanged on PGlite and
-- PostgreSQL. No foreign key to agents: the record of a deletion outlives what it deleted.
CREATE TABLE audit_log (
  id       bigserial PRIMARY KEY,
  at       timestamptz NOT NULL DEFAULT now(),
  -- `admin` (the admin token), `user:<sub>` (an identity token), `cli` (the CLI on the store),
  -- `system` (the lifecycle sweeper)
  actor    text NOT NULL,
  -- run.deleted, agent.deleted, lifecycle.changed, runs.expired
  action   text NOT NULL,
  agent_id text,
  trace_id text,
  details  json NOT NULL DEFAULT '{}'
);
-- An agent's entries, newest first, a page at a time.
CREATE INDEX audit_log_agent_idx ON audit_log (agent_id, id);
