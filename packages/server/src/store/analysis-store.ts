import type { AnalysisResult, StoredRun } from '../analysis/analyzer.js';
import { eventKeys, eventsOf, withinBytes } from './event-pages.js';
import type { SqlClient } from './sql-client.js';
import { TRACE_COLUMNS, traceFromRow, type TraceRow } from './trace-rows.js';

/*
 * The analysis queue: one row per finalisation in `analysis_jobs`.
 *
 *   pending ──claim──▶ running ──complete──▶ done
 *      ▲                  │
 *      └──── fail / lease expired (attempts left, no newer job) ◀┘
 *                         ├─▶ failed      (no attempts left; last_error kept)
 *                         └─▶ superseded  (a newer finalisation of the trace has a job)
 *
 * Agents take turns (see CLAIM): one agent's flood of finished runs delays another agent's
 * analysis by about one job, not by the flood.
 *
 * Claims take `FOR UPDATE SKIP LOCKED`, so any number of workers share the queue. A claim adds
 * one to `attempts` and sets a lease (`locked_until`); every later write of the worker matches
 * id + `running` + that attempt number, so a worker whose lease ran out (and whose job another
 * worker re-claimed) changes nothing. At most one job per trace is pending (a partial unique
 * index): a re-finalisation refreshes a pending job that has not been tried yet, and replaces
 * one waiting for a retry.
 */

/** A job a worker holds until its lease runs out. */
export interface ClaimedJob {
  id: number;
  traceId: string;
  agentId: string;
  /** This attempt's number (1 for the first); fences every write of the attempt. */
  attempt: number;
}

export interface ClaimOutcome {
  job: ClaimedJob | undefined;
  /** Milliseconds until the next pending job becomes runnable; null when none waits. */
  nextRunInMs: number | null;
}

/** What became of a job a worker gave back. */
export type ReleaseOutcome = 'done' | 'retried' | 'failed' | 'superseded' | 'lost-lease';

/** Timings of a job that ended done. */
export interface DoneTimings {
  /** From the claim of this attempt to done. */
  durationMs: number;
  /** From the moment the job became runnable (run_after) to done. */
  delayMs: number;
}

/** The latest job of a trace, for its analysis endpoint. */
export interface LatestAnalysisRow {
  state: 'pending' | 'running' | 'done' | 'failed' | 'superseded';
  autopsy: string | null;
  analyzer: string | null;
  fallbackReason: string | null;
  lastError: string | null;
  attempts: number;
  createdAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
  durationMs: number | null;
}

export type LatestAnalysisLookup =
  | { kind: 'invisible' }
  | { kind: 'never-queued'; traceStatus: string }
  | { kind: 'found'; job: LatestAnalysisRow };

/** PostgreSQL's unique_violation: a job sent back to pending met a newer pending job. */
const UNIQUE_VIOLATION = '23505';

/**
 * A job that is not done may go back to pending only when it is still the newest job of its
 * trace (an older finalisation's analysis is worthless next to the newer one) and has attempts
 * left. The same decision for a failed attempt and for a lease that ran out.
 */
const NEXT_STATE = `
  CASE WHEN EXISTS (SELECT 1 FROM analysis_jobs n WHERE n.trace_id = j.trace_id AND n.id > j.id)
         THEN 'superseded'
       WHEN j.attempts >= $MAX::int THEN 'failed'
       ELSE 'pending' END`;

/**
 * Queues the analysis of the traces in the CTE `finished` (columns `id` and `agent_id`) that just
 * reached completed or errored, as more CTEs of the statement that finalised them (batches, or
 * the complete endpoint), runnable after `$<graceParam>` ms; `queued` returns the traces queued.
 *
 * A re-finalisation replaces a job waiting for a retry (`superseded`: the new job gets its full
 * attempts), and refreshes a job not tried yet (one analysis, after the grace, of the latest
 * state). `queued` reads `superseded` first, so the replaced job has left the one-pending index
 * when the insert looks for a conflict there. `in_line` gives each agent its place in the
 * queue's turns (see CLAIM), once.
 */
export function enqueueAnalysisSql(graceParam: string): string {
  return `
superseded AS (
  UPDATE analysis_jobs
  SET state = 'superseded', finished_at = now(), updated_at = now()
  WHERE trace_id IN (SELECT id FROM finished) AND state = 'pending' AND attempts > 0
  RETURNING id
),
queued AS (
  INSERT INTO analysis_jobs (trace_id, agent_id, run_after)
  SELECT f.id, f.agent_id, now() + make_interval(secs => ${graceParam}::float8 / 1000)
  FROM finished f
  WHERE (SELECT count(*) FROM superseded) >= 0
  ON CONFLICT (trace_id) WHERE state = 'pending'
  DO UPDATE SET run_after = EXCLUDED.run_after, updated_at = now()
  RETURNING trace_id, agent_id
),
in_line AS (
  INSERT INTO analysis_agents (agent_id)
  SELECT DISTINCT q.agent_id FROM queued q
  ON CONFLICT (agent_id) DO NOTHING
)`;
}

/*
 * Agents take turns: `agent` is the agent with a runnable job that was served least recently
 * (its row locked, so concurrent claims spread over agents), `fair` that agent's oldest runnable
 * job. `anyone` is the oldest runnable job of any agent, looked for only when `fair` found none:
 * every agent with work is being claimed for by another worker right now, or the job is not in
 * `analysis_agents` (queued by hand); no worker idles while a job is runnable. Whoever's job is
 * claimed, its agent goes to the back of the line (`served`). The cost is a look per agent,
 * whatever the number of jobs pending.
 */
const CLAIM = `
WITH agent AS (
  SELECT a.agent_id FROM analysis_agents a
  WHERE EXISTS (
    SELECT 1 FROM analysis_jobs p
    WHERE p.state = 'pending' AND p.agent_id = a.agent_id AND p.run_after <= now())
  ORDER BY a.served_at, a.agent_id
  LIMIT 1
  FOR UPDATE OF a SKIP LOCKED
),
fair AS (
  SELECT j.id FROM analysis_jobs j
  WHERE j.state = 'pending' AND j.run_after <= now()
    AND j.agent_id = (SELECT agent_id FROM agent)
  ORDER BY j.run_after, j.id
  LIMIT 1
  FOR UPDATE OF j SKIP LOCKED
),
anyone AS (
  SELECT j.id FROM analysis_jobs j
  WHERE j.state = 'pending' AND j.run_after <= now() AND NOT EXISTS (SELECT 1 FROM fair)
  ORDER BY j.run_after, j.id
  LIMIT 1
  FOR UPDATE OF j SKIP LOCKED
),
next AS (
  SELECT u.id FROM (SELECT id, 0 AS k FROM fair UNION ALL SELECT id, 1 AS k FROM anyone) u
  ORDER BY u.k
  LIMIT 1
),
claimed AS (
  UPDATE analysis_jobs j
  SET state = 'running', attempts = j.attempts + 1,
      locked_until = now() + make_interval(secs => $2::float8 / 1000),
      started_at = now(), worker_id = $1, updated_at = now()
  FROM next
  WHERE j.id = next.id AND j.state = 'pending'
  RETURNING j.id, j.trace_id AS "traceId", j.agent_id AS "agentId", j.attempts AS attempt
),
served AS (
  UPDATE analysis_agents a SET served_at = clock_timestamp()
  FROM claimed c
  WHERE a.agent_id = c."agentId"
)
SELECT c.id, c."traceId", c."agentId", c.attempt,
       (SELECT EXTRACT(EPOCH FROM min(p.run_after) - now())::float8 * 1000
        FROM analysis_jobs p
        WHERE p.state = 'pending' AND p.run_after > now()) AS "nextRunInMs"
FROM (SELECT 1) AS one
LEFT JOIN claimed c ON true`;

const COMPLETE = `
UPDATE analysis_jobs
SET state = 'done', autopsy = $3, analyzer = $4, fallback_reason = $5, finished_at = now(),
    locked_until = NULL, updated_at = now()
WHERE id = $1 AND state = 'running' AND attempts = $2
RETURNING EXTRACT(EPOCH FROM finished_at - started_at)::float8 * 1000 AS "durationMs",
          EXTRACT(EPOCH FROM finished_at - run_after)::float8 * 1000 AS "delayMs"`;

const FAIL = `
WITH decided AS (
  SELECT j.id, ${NEXT_STATE.replace('$MAX', '$3')} AS next_state
  FROM analysis_jobs j
  WHERE j.id = $1 AND j.state = 'running' AND j.attempts = $2
)
UPDATE analysis_jobs j
SET state = d.next_state,
    run_after = now() + make_interval(secs => $4::float8 / 1000),
    locked_until = NULL, last_error = $5,
    finished_at = CASE WHEN d.next_state = 'pending' THEN NULL ELSE now() END,
    updated_at = now()
FROM decided d
WHERE j.id = d.id AND j.state = 'running' AND j.attempts = $2
RETURNING j.state`;

const REQUEUE_EXPIRED = `
WITH expired AS (
  SELECT j.id, j.attempts, ${NEXT_STATE.replace('$MAX', '$1')} AS next_state
  FROM analysis_jobs j
  WHERE j.state = 'running' AND j.locked_until <= now()
  ORDER BY j.id
  LIMIT 100
  FOR UPDATE OF j SKIP LOCKED
)
UPDATE analysis_jobs j
SET state = e.next_state, run_after = now(), locked_until = NULL,
    last_error = 'lease expired: the worker stopped, or took longer than ANALYSIS_LEASE_MS',
    finished_at = CASE WHEN e.next_state = 'pending' THEN NULL ELSE now() END,
    updated_at = now()
FROM expired e
WHERE j.id = e.id AND j.state = 'running' AND j.attempts = e.attempts
RETURNING j.id, j.state`;

/** The latest analysis job of trace $1, for those `access` lets in (a join on `t`). */
const latestAnalysis = (access: string) => `
SELECT t.status AS "traceStatus", j.id AS "jobId", j.state, j.autopsy, j.analyzer,
       j.fallback_reason AS "fallbackReason", j.last_error AS "lastError", j.attempts,
       j.created_at AS "createdAt", j.started_at AS "startedAt", j.finished_at AS "finishedAt",
       EXTRACT(EPOCH FROM j.finished_at - j.started_at)::float8 * 1000 AS "durationMs"
FROM traces t
${access}
LEFT JOIN LATERAL (
  SELECT * FROM analysis_jobs j WHERE j.trace_id = t.id ORDER BY j.id DESC LIMIT 1
) j ON true
WHERE t.id = $1`;
/** For a member of the trace's agent: $2 is the user. */
const LATEST_FOR_MEMBER = latestAnalysis(
  'JOIN members m ON m.agent_id = t.agent_id AND m.user_id = $2',
);
/** For the holder of the trace's share link: $2 is the token's hash. */
const LATEST_FOR_SHARE = latestAnalysis(
  'JOIN trace_shares s ON s.trace_id = t.id AND s.token_hash = $2',
);

/** Runs a statement that may meet a newer pending job on the one-pending index; see FAIL. */
async function retryOnUniqueViolation<T>(work: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      // The statement's snapshot missed a job queued concurrently; run again, it now sees it.
      if ((error as { code?: unknown }).code !== UNIQUE_VIOLATION || attempt >= 3) throw error;
    }
  }
}

/** The queue as workers and the read API use it. */
export class AnalysisStore {
  constructor(private readonly sql: SqlClient) {}

  /** Takes a runnable job, if any, for `leaseMs`: the agents' turn, then its oldest one. */
  async claimNext(workerId: string, leaseMs: number): Promise<ClaimOutcome> {
    const [row] = await this.sql.query<{
      id: number | null;
      traceId: string | null;
      agentId: string | null;
      attempt: number | null;
      nextRunInMs: number | null;
    }>(CLAIM, [workerId, leaseMs]);
    const job =
      row && row.id !== null
        ? {
            id: row.id,
            traceId: row.traceId as string,
            agentId: row.agentId as string,
            attempt: row.attempt as number,
          }
        : undefined;
    return { job, nextRunInMs: row?.nextRunInMs ?? null };
  }

  /** Stores the autopsy; undefined when the lease was lost (another worker has the job). */
  async complete(job: ClaimedJob, result: AnalysisResult): Promise<DoneTimings | undefined> {
    const [row] = await this.sql.query<DoneTimings>(COMPLETE, [
      job.id,
      job.attempt,
      result.autopsy,
      result.analyzer,
      result.fallbackReason,
    ]);
    return row;
  }

  /**
   * Gives a failed attempt back: pending again after `backoffMs` while attempts remain, failed
   * with `error` kept once `maxAttempts` were used, superseded when a newer job of the trace
   * exists.
   */
  async fail(
    job: ClaimedJob,
    error: string,
    options: { maxAttempts: number; backoffMs: number },
  ): Promise<ReleaseOutcome> {
    const rows = await retryOnUniqueViolation(() =>
      this.sql.query<{ state: string }>(FAIL, [
        job.id,
        job.attempt,
        options.maxAttempts,
        options.backoffMs,
        error,
      ]),
    );
    const state = rows[0]?.state;
    if (state === undefined) return 'lost-lease';
    return state === 'pending' ? 'retried' : (state as ReleaseOutcome);
  }

  /**
   * Running jobs whose lease ran out (their worker died or hung): pending again at once, or
   * failed / superseded by the same rules as a failed attempt. Returns how many of each.
   */
  async requeueExpired(maxAttempts: number): Promise<Record<string, number>> {
    const rows = await retryOnUniqueViolation(() =>
      this.sql.query<{ id: number; state: string }>(REQUEUE_EXPIRED, [maxAttempts]),
    );
    const counts: Record<string, number> = {};
    for (const { state } of rows) counts[state] = (counts[state] ?? 0) + 1;
    return counts;
  }

  /**
   * A trace with its events: all of them when they fit `maxEvents` and `maxBytes` (payload and
   * error message bytes), else the first and the last of them, each half of either budget, and
   * how many were left out in the middle. Only the kept events are ever loaded, so a job's memory
   * stays bounded whatever the trace holds (a whole 100 MB trace once crashed PGlite, and again
   * each time the job's lease came back).
   */
  async loadRun(
    traceId: string,
    maxEvents: number,
    maxBytes: number,
  ): Promise<StoredRun | undefined> {
    const [trace] = await this.sql.query<TraceRow>(
      `SELECT ${TRACE_COLUMNS} FROM traces t WHERE t.id = $1`,
      [traceId],
    );
    if (!trace) return undefined;
    const all = await eventKeys(this.sql, traceId, { limit: maxEvents + 1 });
    const fits = withinBytes(all, maxBytes);
    if (all.length <= maxEvents && fits.length === all.length)
      return {
        trace: traceFromRow(trace),
        events: await eventsOf(this.sql, traceId, all),
        omittedEvents: 0,
      };

    // A long run: keep how it started and how it ended, where failures usually are.
    const half = Math.floor(maxEvents / 2);
    const head = withinBytes(all.slice(0, half), Math.floor(maxBytes / 2));
    const headBytes = head.reduce((sum, k) => sum + k.bytes, 0);
    const headIds = new Set(head.map((k) => k.id));
    const newest = await eventKeys(this.sql, traceId, {
      limit: maxEvents - head.length,
      newestFirst: true,
    });
    const firstShared = newest.findIndex((k) => headIds.has(k.id));
    const tail = withinBytes(
      firstShared < 0 ? newest : newest.slice(0, firstShared),
      Math.max(1, maxBytes - headBytes),
    );
    const [{ n } = { n: 0 }] = await this.sql.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM events WHERE trace_id = $1',
      [traceId],
    );
    return {
      trace: traceFromRow(trace),
      events: await eventsOf(this.sql, traceId, [...head, ...tail]),
      omittedEvents: Math.max(0, n - head.length - tail.length),
    };
  }

  /** The latest analysis job of a trace `userId` may see (any role on its agent). */
  latestForMember(userId: string, traceId: string): Promise<LatestAnalysisLookup> {
    return this.latest(LATEST_FOR_MEMBER, traceId, userId);
  }

  /** The latest analysis job of the trace shared under the token whose hash is `tokenHash`. */
  latestForShare(traceId: string, tokenHash: string): Promise<LatestAnalysisLookup> {
    return this.latest(LATEST_FOR_SHARE, traceId, tokenHash);
  }

  private async latest(
    statement: string,
    traceId: string,
    access: string,
  ): Promise<LatestAnalysisLookup> {
    const [row] = await this.sql.query<
      Omit<LatestAnalysisRow, 'state'> & {
        traceStatus: string;
        jobId: number | null;
        state: LatestAnalysisRow['state'] | null;
      }
    >(statement, [traceId, access]);
    if (!row) return { kind: 'invisible' };
    if (row.jobId === null || row.state === null)
      return { kind: 'never-queued', traceStatus: row.traceStatus };
    const { traceStatus: _status, jobId: _id, state, ...job } = row;
    return { kind: 'found', job: { ...job, state } };
  }
}
