-- Deletion on request (issue 24, item 2): a deleted run leaves a tombstone for a bounded time
-- (DELETED_RUN_TOMBSTONE_MS), so that a batch of it arriving later (a client still retrying)
-- does not write it back. Runs unchanged on PGlite and PostgreSQL.
CREATE TABLE trace_tombstones (
  trace_id     text NOT NULL,
  agent_id     text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  deleted_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL,
  -- the run's rows are all gone (a deletion cut short is finished by the sweeper)
  rows_deleted boolean NOT NULL DEFAULT false,
  -- the live buffer no longer shows it (Redis may have been unreachable: the sweeper retries)
  live_cleared boolean NOT NULL DEFAULT false,
  -- trace ids are global, but a tombstone refuses the run to its own agent only
  PRIMARY KEY (trace_id, agent_id)
);
CREATE INDEX trace_tombstones_expires_idx ON trace_tombstones (expires_at);
CREATE INDEX trace_tombstones_deleted_idx ON trace_tombstones (deleted_at);
-- What the sweeper still has to finish: few rows, found without reading the others.
CREATE INDEX trace_tombstones_unfinished_idx ON trace_tombstones (deleted_at)
  WHERE NOT (rows_deleted AND live_cleared);
