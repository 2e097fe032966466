import type { Trace } from '@flightlog/protocol';
import type { MemberRole } from './agent-store.js';
import { recordAudit } from './audit-store.js';
import { deleteRunsInSteps, type BetweenStatements } from './run-rows.js';
import type { SqlClient } from './sql-client.js';
import { TRACE_COLUMNS, traceFromRow, type TraceRow } from './trace-rows.js';

/** An agent's own lifecycle settings: null takes the server's default, 0 turns it off. */
export interface AgentLifecycleRow {
  agentId: string;
  runTimeoutMs: number | null;
  retentionDays: number | null;
}

/** An agent whose runs expire, and after how many days. */
export interface AgentRetention {
  agentId: string;
  days: number;
}

/** Where a walk of an agent's expired runs stopped: the last run's start (microseconds) and id. */
export type StartPosition = [startedAt: string, id: string];

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
  -- updated_at stays the time of the run's last batch: retention counts from it
  timed_out_at = now()
FROM ended n
WHERE t.id = n.id
RETURNING ${TRACE_COLUMNS}`;

/** Who holds a run (or held it, within its tombstone) and the asking user's role there. */
export interface RunHolder {
  agentId: string;
  /** The user's role on the agent; null without one (or when no user asked). */
  role: MemberRole | null;
  /** Only a tombstone is left: the run was deleted (its deletion may still be finishing). */
  deleted: boolean;
}

/** A deleted run whose deletion is not finished: rows left, or the live buffer not cleared. */
export interface UnfinishedDeletion {
  agentId: string;
  traceId: string;
  rowsDeleted: boolean;
  liveCleared: boolean;
}

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

  /**
   * The agents that hold the run `traceId` now, or held it within their tombstone (at most one
   * of each: trace ids are global), the live run first, with `userId`'s role on each.
   */
  async runHolders(traceId: string, userId: string | null): Promise<RunHolder[]> {
    return this.sql.query<RunHolder>(
      `SELECT h.agent_id AS "agentId", h.deleted, m.role
       FROM (
         SELECT t.agent_id, false AS deleted FROM traces t WHERE t.id = $1
         UNION ALL
         SELECT d.agent_id, true FROM trace_tombstones d
         WHERE d.trace_id = $1 AND d.expires_at > now()
       ) h
       LEFT JOIN members m ON m.agent_id = h.agent_id AND m.user_id = $2
       ORDER BY h.deleted, h.agent_id`,
      [traceId, userId],
    );
  }

  /**
   * Refuses the run to its agent's batches for `ttlMs` from now, before any of its rows goes:
   * from the commit on, a batch of it writes nothing (see WRITE_BATCH in trace-store.ts).
   */
  async tombstone(agentId: string, traceId: string, ttlMs: number, actor: string): Promise<void> {
    await this.sql.transaction(async (tx) => {
      await tx.query(
        `INSERT INTO trace_tombstones (trace_id, agent_id, expires_at)
         VALUES ($1, $2, now() + $3::bigint * interval '1 millisecond')
         ON CONFLICT (trace_id, agent_id) DO UPDATE SET
           deleted_at = now(), expires_at = EXCLUDED.expires_at,
           rows_deleted = false, live_cleared = false`,
        [traceId, agentId, ttlMs],
      );
      // its public link ends now, not once its events are gone: a shared page never shows a
      // run half deleted
      await tx.query(
        `DELETE FROM trace_shares s USING traces t
         WHERE s.trace_id = $1 AND t.id = s.trace_id AND t.agent_id = $2`,
        [traceId, agentId],
      );
      // the request and its record commit together
      await recordAudit(tx, { actor, action: 'run.deleted', agentId, traceId });
    });
  }

  /**
   * Deletes the run's rows: its events `rows` at a time, each statement its own short
   * transaction with a turn of the event loop between (a run may hold a million events), then
   * the run itself with its analysis jobs, then marks its tombstone done. Returns the events
   * deleted. Safe to repeat, and to run beside a batch of the run (what that writes goes with
   * the run's row).
   */
  async deleteRunRows(
    agentId: string,
    traceId: string,
    rows: number,
    between?: BetweenStatements,
  ): Promise<number> {
    const { events } = await deleteRunsInSteps(this.sql, agentId, [traceId], rows, between);
    await this.sql.query(
      'UPDATE trace_tombstones SET rows_deleted = true WHERE trace_id = $1 AND agent_id = $2',
      [traceId, agentId],
    );
    return events;
  }

  /** The live buffer no longer shows the run. */
  async markLiveCleared(agentId: string, traceId: string): Promise<void> {
    await this.sql.query(
      'UPDATE trace_tombstones SET live_cleared = true WHERE trace_id = $1 AND agent_id = $2',
      [traceId, agentId],
    );
  }

  /**
   * Deletions to finish, oldest first: a deletion cut short (the process stopped, the store
   * failed), a live buffer that could not be cleared, or, among those of the last `recentMs`, a
   * run a batch wrote back (on PostgreSQL a batch whose statement began before the tombstone's
   * commit does not see it).
   */
  async unfinishedDeletions(limit: number, recentMs: number): Promise<UnfinishedDeletion[]> {
    return this.sql.query<UnfinishedDeletion>(
      `SELECT d.agent_id AS "agentId", d.trace_id AS "traceId",
              d.rows_deleted AS "rowsDeleted", d.live_cleared AS "liveCleared"
       FROM trace_tombstones d
       WHERE NOT (d.rows_deleted AND d.live_cleared) AND d.expires_at > now()
       UNION
       SELECT d.agent_id, d.trace_id, false, d.live_cleared
       FROM trace_tombstones d
       JOIN traces t ON t.id = d.trace_id AND t.agent_id = d.agent_id
       WHERE d.deleted_at > now() - $2::bigint * interval '1 millisecond'
       LIMIT $1`,
      [limit, recentMs],
    );
  }

  /** Forgets up to `limit` tombstones past their time whose rows are gone; returns how many. */
  async expireTombstones(limit: number): Promise<number> {
    const [row] = await this.sql.query<{ n: number }>(
      `WITH gone AS (
         DELETE FROM trace_tombstones WHERE (trace_id, agent_id) IN (
           SELECT d.trace_id, d.agent_id FROM trace_tombstones d
           WHERE d.expires_at <= now() AND d.rows_deleted
           LIMIT $1)
         RETURNING 1)
       SELECT count(*)::int AS n FROM gone`,
      [limit],
    );
    return row?.n ?? 0;
  }

  /** The agent's own settings; undefined when there is no such agent. */
  async settings(agentId: string): Promise<AgentLifecycleRow | undefined> {
    const [row] = await this.sql.query<SettingsRow>(
      `SELECT ${SETTINGS_COLUMNS} FROM agents WHERE id = $1`,
      [agentId],
    );
    return row && settingsFromRow(row);
  }

  /**
   * A page of the agents whose runs expire (their own retention, or `defaultDays` when they have
   * none; 0 is forever), in id order after `after`.
   */
  async retentionPage(
    defaultDays: number,
    after: string,
    limit: number,
  ): Promise<AgentRetention[]> {
    return this.sql.query<AgentRetention>(
      `SELECT a.id AS "agentId", COALESCE(a.retention_days, $1::int) AS days
       FROM agents a
       WHERE COALESCE(a.retention_days, $1::int) > 0 AND a.id > $2
       ORDER BY a.id
       LIMIT $3`,
      [defaultDays, after, limit],
    );
  }

  /**
   * One step of the walk of an agent's expired runs, oldest start first from `after` on: runs
   * that both started and last changed more than `days` days ago (a run started long ago that
   * is still sending batches is kept). A range of traces_agent_started_idx.
   */
  async expiredRuns(
    agentId: string,
    days: number,
    after: StartPosition,
    limit: number,
  ): Promise<{ id: string; at: string; expired: boolean; lastBatchMs: number }[]> {
    return this.sql.query(
      `SELECT t.id,
         to_char(t.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS "at",
         t.updated_at < now() - $2::int * interval '1 day' AS expired,
         -- the last live message of the run: its last batch, or the sweeper's timeout
         (extract(epoch FROM GREATEST(t.updated_at, t.timed_out_at)) * 1000)::float8
           AS "lastBatchMs"
       FROM traces t
       WHERE t.agent_id = $1 AND t.started_at < now() - $2::int * interval '1 day'
         AND (t.started_at, t.id) > ($3::timestamptz, $4::text)
       ORDER BY t.started_at, t.id
       LIMIT $5`,
      [agentId, days, after[0], after[1], limit],
    );
  }

  /** Deletes the agent's runs `traceIds` in bounded statements (see run-rows.ts). */
  deleteRuns(
    agentId: string,
    traceIds: readonly string[],
    rows: number,
    between?: BetweenStatements,
  ): Promise<{ runs: number; events: number }> {
    return deleteRunsInSteps(this.sql, agentId, traceIds, rows, between);
  }

  /** Changes the settings given (undefined leaves one as it is); undefined when no such agent. */
  async changeSettings(
    agentId: string,
    change: { runTimeoutMs?: number | null; retentionDays?: number | null },
    actor: string,
  ): Promise<AgentLifecycleRow | undefined> {
    return this.sql.transaction(async (tx) => {
      const [before] = await tx.query<SettingsRow>(
        `SELECT ${SETTINGS_COLUMNS} FROM agents WHERE id = $1 FOR UPDATE`,
        [agentId],
      );
      if (!before) return undefined;
      const [row] = await tx.query<SettingsRow>(
        `UPDATE agents SET
           run_timeout_ms = CASE WHEN $2 THEN $3::bigint ELSE run_timeout_ms END,
           retention_days = CASE WHEN $4 THEN $5::int ELSE retention_days END
         WHERE id = $1
         RETURNING ${SETTINGS_COLUMNS}`,
        [
          agentId,
          change.runTimeoutMs !== undefined,
          change.runTimeoutMs ?? null,
          change.retentionDays !== undefined,
          change.retentionDays ?? null,
        ],
      );
      if (!row) return undefined;
      const was = settingsFromRow(before);
      const now = settingsFromRow(row);
      // each setting the request named: what it was and what it is (null: the default)
      const details: Record<string, { from: number | null; to: number | null }> = {};
      for (const key of ['runTimeoutMs', 'retentionDays'] as const)
        if (change[key] !== undefined) details[key] = { from: was[key], to: now[key] };
      if (Object.keys(details).length > 0)
        await recordAudit(tx, { actor, action: 'lifecycle.changed', agentId, details });
      return now;
    });
  }
}

const SETTINGS_COLUMNS = `id AS "agentId", run_timeout_ms AS "runTimeoutMs",
  retention_days AS "retentionDays"`;

interface SettingsRow {
  agentId: string;
  runTimeoutMs: string | number | null;
  retentionDays: number | null;
}

function settingsFromRow(row: SettingsRow): AgentLifecycleRow {
  return {
    agentId: row.agentId,
    runTimeoutMs: row.runTimeoutMs === null ? null : Number(row.runTimeoutMs),
    retentionDays: row.retentionDays,
  };
}
