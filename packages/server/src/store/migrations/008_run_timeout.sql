-- Abandoned runs end (issue 24, item 5): a run with no batch for its agent's run timeout becomes
-- `timeout`, set by the lifecycle sweeper. Runs unchanged on PGlite and PostgreSQL.

-- Per agent: null takes RUN_TIMEOUT_MS, 0 never times its runs out, else milliseconds.
ALTER TABLE agents ADD COLUMN run_timeout_ms bigint CHECK (run_timeout_ms >= 0);

-- When the sweeper timed the run out; null for every other status, and for a `timeout` the client
-- sent itself. A late `running` snapshot brings back only a run the sweeper ended (see
-- docs/decisions.md), and clears this.
ALTER TABLE traces ADD COLUMN timed_out_at timestamptz;

-- The sweeper walks running runs by their last batch, oldest first: a range of this index.
CREATE INDEX traces_running_updated_idx ON traces (updated_at, id) WHERE status = 'running';
