-- Agents take turns in the analysis queue: one agent's thousands of finished runs must not hold
-- back another agent's autopsy. Runs unchanged on PGlite and PostgreSQL.

-- One row per agent that has queued an analysis: when a worker last took one of its jobs. A
-- claim picks the agent with runnable jobs served least recently (never served: '-infinity'),
-- then that agent's oldest runnable job, so a claim costs a look per agent, not per job.
CREATE TABLE analysis_agents (
  agent_id  text PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
  served_at timestamptz NOT NULL DEFAULT '-infinity'
);
CREATE INDEX analysis_agents_served_idx ON analysis_agents (served_at, agent_id);

-- An agent's oldest runnable job, and whether it has one at all.
CREATE INDEX analysis_jobs_agent_runnable_idx ON analysis_jobs (agent_id, run_after, id)
  WHERE state = 'pending';

INSERT INTO analysis_agents (agent_id)
SELECT DISTINCT j.agent_id FROM analysis_jobs j
WHERE j.state = 'pending' AND EXISTS (SELECT 1 FROM agents a WHERE a.id = j.agent_id);
