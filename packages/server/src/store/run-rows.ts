import { recordAudit } from './audit-store.js';
import type { SqlClient } from './sql-client.js';

/**
 * Deleting runs in bounded statements. A run may hold a million events, and an agent a million
 * runs: one DELETE of them all (the foreign keys' cascade) would hold its locks, and on PGlite the
 * one engine every request shares, for as long as they take. Here each statement deletes at most
 * `rows` rows and commits on its own, with a turn of the event loop between two, so ingest goes
 * on beside a deletion of any size.
 */

const yieldTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * What runs between two statements of a deletion, told how long the last one took: a turn of
 * the event loop by default; the sweeper paces itself with it (see lifecycle/pacer.ts).
 */
export type BetweenStatements = (statementMs: number) => Promise<void>;

/** Runs whose ids one statement lists at most (their events are still deleted `rows` at a time). */
export const RUNS_PER_STEP = 100;

/**
 * Deletes the agent's runs `traceIds`: their share links, their events `rows` at a time, then the runs with their
 * analysis jobs (events a batch wrote meanwhile go with them, by the cascade: few). Returns how
 * many of each went.
 */
export async function deleteRunsInSteps(
  sql: SqlClient,
  agentId: string,
  traceIds: readonly string[],
  rows: number,
  between: BetweenStatements = yieldTurn,
): Promise<{ runs: number; events: number }> {
  // their public links end first: a shared page never shows a run half deleted
  await sql.query(
    `DELETE FROM trace_shares s USING traces t
     WHERE s.trace_id = ANY($1::text[]) AND t.id = s.trace_id AND t.agent_id = $2`,
    [traceIds, agentId],
  );
  let events = 0;
  for (;;) {
    const started = performance.now();
    const [gone] = await sql.query<{ n: number }>(
      `WITH gone AS (
         DELETE FROM events WHERE id IN (
           SELECT e.id FROM events e WHERE e.trace_id = ANY($1::text[]) AND e.agent_id = $2
           LIMIT $3)
         RETURNING 1)
       SELECT count(*)::int AS n FROM gone`,
      [traceIds, agentId, rows],
    );
    const n = gone?.n ?? 0;
    events += n;
    await between(performance.now() - started);
    if (n < rows) break;
  }
  const started = performance.now();
  const [runs] = await sql.query<{ n: number }>(
    `WITH gone AS (
       DELETE FROM traces WHERE id = ANY($1::text[]) AND agent_id = $2 RETURNING 1)
     SELECT count(*)::int AS n FROM gone`,
    [traceIds, agentId],
  );
  await between(performance.now() - started);
  return { runs: runs?.n ?? 0, events };
}

/**
 * Deletes everything an agent holds, in bounded statements, the agent's row last: first its keys
 * are revoked and its members removed (one short transaction: its batches are refused and its
 * live streams end within the revocation bound, while the rest goes), then its runs
 * RUNS_PER_STEP at a time, then its accepted batch ids `rows` at a time, then the row with what
 * little is left (tombstones, the analysis queue's entry). False when there was no such agent.
 */
export async function deleteAgentInSteps(
  sql: SqlClient,
  agentId: string,
  rows: number,
  /** Who asks, for the audit log (recorded with the keys' revocation). */
  actor: string,
): Promise<boolean> {
  const found = await sql.transaction(async (tx) => {
    const [agent] = await tx.query('SELECT id FROM agents WHERE id = $1 FOR UPDATE', [agentId]);
    if (!agent) return false;
    await tx.query(
      'UPDATE api_keys SET revoked_at = now() WHERE agent_id = $1 AND revoked_at IS NULL',
      [agentId],
    );
    await tx.query('DELETE FROM members WHERE agent_id = $1', [agentId]);
    await recordAudit(tx, { actor, action: 'agent.deleted', agentId });
    return true;
  });
  if (!found) return false;
  for (;;) {
    const traces = await sql.query<{ id: string }>(
      'SELECT id FROM traces WHERE agent_id = $1 LIMIT $2',
      [agentId, RUNS_PER_STEP],
    );
    if (traces.length === 0) break;
    await deleteRunsInSteps(
      sql,
      agentId,
      traces.map((t) => t.id),
      rows,
    );
    await yieldTurn();
  }
  for (;;) {
    const [gone] = await sql.query<{ n: number }>(
      `WITH gone AS (
         DELETE FROM accepted_batches WHERE agent_id = $1 AND batch_id IN (
           SELECT b.batch_id FROM accepted_batches b WHERE b.agent_id = $1 LIMIT $2)
         RETURNING 1)
       SELECT count(*)::int AS n FROM gone`,
      [agentId, rows],
    );
    if ((gone?.n ?? 0) < rows) break;
    await yieldTurn();
  }
  const deleted = await sql.query('DELETE FROM agents WHERE id = $1 RETURNING id', [agentId]);
  return deleted.length > 0;
}
