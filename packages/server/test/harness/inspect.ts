import type { Store } from '../../src/store/open-store.js';

/** What is stored, read straight from the tables (not through the API under test). */
export async function tableCounts(store: Store): Promise<Record<string, number>> {
  const tables = ['traces', 'events', 'accepted_batches', 'analysis_jobs', 'agents', 'api_keys'];
  const counts: Record<string, number> = {};
  for (const table of tables) {
    const [row] = await store.sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
    counts[table] = row?.n ?? 0;
  }
  return counts;
}

export async function storedTrace(store: Store, id: string) {
  const [row] = await store.sql.query<Record<string, unknown>>(
    `SELECT id, agent_id, status, event_count, total_cost_usd::text AS total_cost_usd,
            total_lamports::text AS total_lamports, anchor_slot::text AS anchor_slot,
            output_summary, error_message, ended_at, duration_ms, started_at, input_summary
     FROM traces WHERE id = $1`,
    [id],
  );
  return row;
}

export async function storedEvents(store: Store, traceId: string) {
  return store.sql.query<{ id: string; sequence: number; agent_id: string; payload: unknown }>(
    'SELECT id, sequence, agent_id, payload FROM events WHERE trace_id = $1 ORDER BY sequence',
    [traceId],
  );
}

export async function analysisJobs(store: Store, traceId: string) {
  return store.sql.query<{ state: string }>(
    'SELECT state FROM analysis_jobs WHERE trace_id = $1 ORDER BY id',
    [traceId],
  );
}
