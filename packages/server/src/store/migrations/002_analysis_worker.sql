-- The analysis worker: leases, results and a state for jobs replaced by a newer finalisation.
-- Runs unchanged on PGlite and PostgreSQL.

-- `superseded`: a job that would have gone back to pending (a retry, or a lease that expired)
-- while a newer pending job of the same trace was queued; the newer one analyses the trace.
ALTER TABLE analysis_jobs DROP CONSTRAINT analysis_jobs_state_check;
ALTER TABLE analysis_jobs ADD CONSTRAINT analysis_jobs_state_check
  CHECK (state IN ('pending', 'running', 'done', 'failed', 'superseded'));

ALTER TABLE analysis_jobs
  -- start of the latest attempt, and when the job ended (done, failed or superseded)
  ADD COLUMN started_at timestamptz,
  ADD COLUMN finished_at timestamptz,
  -- the worker holding (or that last held) the job: host:pid:random
  ADD COLUMN worker_id text,
  -- the result: Markdown, and the analyzer that wrote it (`heuristic`, `llm:<model>`)
  ADD COLUMN autopsy text,
  ADD COLUMN analyzer text,
  -- why the configured LLM analyzer did not write the autopsy (the heuristic one did)
  ADD COLUMN fallback_reason text;

-- Running jobs whose lease ran out are found through this (their worker stopped or hung).
CREATE INDEX analysis_jobs_lease_idx ON analysis_jobs (locked_until) WHERE state = 'running';
-- The latest job of a trace (the analysis endpoint, superseding).
CREATE INDEX analysis_jobs_trace_idx ON analysis_jobs (trace_id, id);
