import type { Trace } from '@flightlog/protocol';
import type { SqlClient } from './sql-client.js';
import { TRACE_COLUMNS, traceFromRow, type TraceRow } from './trace-rows.js';

/** An agent's own lifecycle settings: null takes the server's default, 0 turns it off. */
export interface AgentLifecycleRow {
  agentId: string;
  runTimeoutMs: number | null;
}

/** Where a walk of the running runs stopped: the last row's last batch (microseconds) and id. */
export type RunningPosition = [updatedAt: string, id: string];

export const WALK_START: RunningPosition = ['-infinity', ''];

/** The exact time of a row's last batch, for a walk's position. */
const UPDATED_AT = `to_char(t.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/** A run's time-out, in milliseconds, as SQL over `a` (its agent); $n is the default. */
const timeoutOf = (defaultParam: string) => `COALESCE(a.run_timeout_ms, ${defaultParam})`;

/**
 * One step of the walk of running runs, oldest last batch first, from `after` on: at most $4
 * rows idle for at least $1 ms (the shortest time-out of any agent), each marked `due` when its
 * own agent's time-out has passed. The walk is a range of traces_running_updated_idx, so a step
 * costs its rows whatever the number of runs; runs of agents with longer time-outs are walked
 * over, not read again by the next step.
 */
const WALK_RUNNING = `
SELECT t.id, ${UPDATED_AT} AS "at",
       (${timeoutOf('$5')} > 0
        AND t.updated_at < now() - ${timeoutOf('$5')} * interval '1 millisecond') AS due
FROM traces t
JOIN agents a ON a.id = t.agent_id
WHERE t.status = 'running'
  AND t.updated_at < now() - $1::bigint * interval '1 millisecond'
  AND (t.updated_at, t.id) > ($2::timestamptz, $3::text)
ORDER BY t.updated_at, t.id
LIMIT $4`;

/**
 * Ends the given runs as `timeout` if they are still running and still idle past their agent's
 * time-out (a batch may have arrived since the walk), skipping any a batch holds locked now.
 * `endedAt` is the run's last activity: the latest start or end among its last 100 events (by
 * sequence), or its start; the duration is computed from it. Not queued for analysis (the spec's
 * rule for `timeout`). $1 the ids, $2 the default time-out.
 */
const TIME_OUT = `
WITH due AS (
  SELECT t.id, t.started_at
  FROM traces t
  JOIN agents a ON a.id = t.agent_id
  WHERE t.id = ANY($1::text[]) AND t.status = 'running'
    AND ${timeoutOf('$2')} > 0
    AND t.updated_at < now() - ${timeoutOf('$2')} * interval '1 millisecond'
  FOR UPDATE OF t SKIP LOCKED
),
ended AS (
  SELECT d.id, GREATEST(d.started_at, (
    SELECT max(GREATEST(e.started_at, e.ended_at))
    FROM (SELECT e.started_at, e.ended_at FROM events e
          WHERE e.trace_id = d.id
          ORDER BY e.sequence DESC, e.id DESC
          LIMIT 100) e)) AS ended_at
  FROM due d
)
UPDATE traces t SET
  status = 'timeout',
  ended_at = n.ended_at,
  duration_ms = EXTRACT(EPOCH FROM (n.ended_at - t.started_at)) * 1000,
  timed_out_at = now(),
  updated_at = now()
FROM ended n
WHERE t.id = n.id
RETURNING ${TRACE_COLUMNS}`;

/** Runs ended per statement of timeOut (each reads up to 100 events of each run). */
const TIME_OUT_SLICE = 100;

/** The SQL of the data lifecycle: run time-outs (and, later, deletion, retention, audit). */
export class LifecycleStore {
  constructor(private readonly sql: SqlClient) {}

  /** The shortest run time-out in force anywhere (ms), or undefined when no run can time out. */
  async shortestRunTimeout(defaultMs: number): Promise<number | undefined> {
    const [row] = await this.sql.query<{ ms: string | number | null }>(
      'SELECT min(run_timeout_ms) AS ms FROM agents WHERE run_timeout_ms > 0',
    );
    const override = row?.ms === null || row?.ms === undefined ? undefined : Number(row.ms);
    const candidates = [override, defaultMs > 0 ? defaultMs : undefined].filter(
      (ms): ms is number => ms !== undefined,
    );
    // an agent left on the default while the default is 0 never times out: no bound from it
    return candidates.length === 0 ? undefined : Math.min(...candidates);
  }

  /** One step of the walk of idle running runs (see WALK_RUNNING). */
  async walkRunning(options: {
    idleForMs: number;
    after: RunningPosition;
    limit: number;
    defaultTimeoutMs: number;
  }): Promise<{ id: string; at: string; due: boolean }[]> {
    return this.sql.query(WALK_RUNNING, [
      options.idleForMs,
      options.after[0],
      options.after[1],
      options.limit,
      options.defaultTimeoutMs,
    ]);
  }

  /** Ends the runs that are still due as `timeout`; returns their new snapshots. */
  async timeOut(ids: readonly string[], defaultTimeoutMs: number): Promise<Trace[]> {
    const ended: Trace[] = [];
    for (let at = 0; at < ids.length; at += TIME_OUT_SLICE) {
      const rows = await this.sql.query<TraceRow>(TIME_OUT, [
        ids.slice(at, at + TIME_OUT_SLICE),
        defaultTimeoutMs,
      ]);
      ended.push(...rows.map(traceFromRow));
    }
    return ended;
  }

  /** The agent's own settings; undefined when there is no such agent. */
  async settings(agentId: string): Promise<AgentLifecycleRow | undefined> {
    const [row] = await this.sql.query<{ agentId: string; runTimeoutMs: string | number | null }>(
      'SELECT id AS "agentId", run_timeout_ms AS "runTimeoutMs" FROM agents WHERE id = $1',
      [agentId],
    );
    return row && settingsFromRow(row);
  }

  /** Changes the settings given (undefined leaves one as it is); undefined when no such agent. */
  async changeSettings(
    agentId: string,
    change: { runTimeoutMs?: number | null },
  ): Promise<AgentLifecycleRow | undefined> {
    const [row] = await this.sql.query<{ agentId: string; runTimeoutMs: string | number | null }>(
      `UPDATE agents SET
         run_timeout_ms = CASE WHEN $2 THEN $3::bigint ELSE run_timeout_ms END
       WHERE id = $1
       RETURNING id AS "agentId", run_timeout_ms AS "runTimeoutMs"`,
      [agentId, change.runTimeoutMs !== undefined, change.runTimeoutMs ?? null],
    );
    return row && settingsFromRow(row);
  }
}

function settingsFromRow(row: {
  agentId: string;
  runTimeoutMs: string | number | null;
}): AgentLifecycleRow {
  return {
    agentId: row.agentId,
    runTimeoutMs: row.runTimeoutMs === null ? null : Number(row.runTimeoutMs),
  };
}
