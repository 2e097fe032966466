// The per-batch database write of the ingest benchmark's baselines: the rows of one batch
// written with ONE statement (data-modifying CTEs recording the batch id in accepted_batches,
// upserting the trace and inserting the events from unnest arrays), against the server's real
// schema. Used by the database baselines (ingest.mjs) and by the naive server
// (naive-ingest-server.mjs).

const TRACE_COLUMNS = `id, agent_id, status, started_at, ended_at, duration_ms, input_summary,
    output_summary, error_message, tags, event_count, total_tokens, total_cost_usd,
    total_lamports, chain_tx_count, tools_called, anchor_signature, anchor_slot, merkle_proof,
    trace_hash, share_token`;

export const WRITE_BATCH = `
WITH claim AS (
  INSERT INTO accepted_batches (agent_id, batch_id, trace_id, item_count, event_count)
  VALUES ($1, $2, $3, 1, $4)
  ON CONFLICT (agent_id, batch_id) DO NOTHING
  RETURNING batch_id
), trace AS (
  INSERT INTO traces (${TRACE_COLUMNS})
  SELECT $3, $1, $5::text, $6::timestamptz, $7::timestamptz, $8::float8, $9::text, $10::text,
         $11::text, $12::text[], $13::bigint, $14::bigint, $15::numeric, $16::numeric, $17::bigint,
         $18::text[], NULL, NULL, NULL, NULL, NULL
  FROM claim
  ON CONFLICT (id) DO UPDATE SET
    status = EXCLUDED.status, started_at = EXCLUDED.started_at, ended_at = EXCLUDED.ended_at,
    duration_ms = EXCLUDED.duration_ms, input_summary = EXCLUDED.input_summary,
    output_summary = EXCLUDED.output_summary, error_message = EXCLUDED.error_message,
    tags = EXCLUDED.tags, event_count = EXCLUDED.event_count, total_tokens = EXCLUDED.total_tokens,
    total_cost_usd = EXCLUDED.total_cost_usd, total_lamports = EXCLUDED.total_lamports,
    chain_tx_count = EXCLUDED.chain_tx_count, tools_called = EXCLUDED.tools_called,
    updated_at = now()
  WHERE traces.agent_id = EXCLUDED.agent_id
    AND EXCLUDED.event_count >= traces.event_count
    AND NOT (EXCLUDED.status = 'running' AND traces.status <> 'running')
  RETURNING id
), written AS (
  INSERT INTO events (
    id, trace_id, agent_id, sequence, type, started_at, ended_at, duration_ms, status, payload,
    payload_encrypted, parent_event_id, error_message)
  SELECT e.id, $3, $1, e.sequence, e.type, e.started_at, e.ended_at, e.duration_ms, e.status,
         e.payload, e.payload_encrypted, e.parent_event_id, e.error_message
  FROM claim, unnest($19::text[], $20::bigint[], $21::text[], $22::timestamptz[],
                     $23::timestamptz[], $24::float8[], $25::text[], $26::json[], $27::boolean[],
                     $28::text[], $29::text[])
    AS e(id, sequence, type, started_at, ended_at, duration_ms, status, payload,
         payload_encrypted, parent_event_id, error_message)
  ON CONFLICT (id) DO UPDATE SET
    sequence = EXCLUDED.sequence, type = EXCLUDED.type, started_at = EXCLUDED.started_at,
    ended_at = EXCLUDED.ended_at, duration_ms = EXCLUDED.duration_ms, status = EXCLUDED.status,
    payload = EXCLUDED.payload, payload_encrypted = EXCLUDED.payload_encrypted,
    parent_event_id = EXCLUDED.parent_event_id, error_message = EXCLUDED.error_message
  WHERE events.agent_id = EXCLUDED.agent_id AND events.trace_id = EXCLUDED.trace_id
  RETURNING 1
)
SELECT (SELECT count(*) FROM claim)::int AS claimed, (SELECT count(*) FROM trace)::int AS traces,
       (SELECT count(*) FROM written)::int AS events`;

/** @typedef {import('@flightlog/protocol').BufferBatchItem} BufferBatchItem */

/**
 * One batch as the baselines write it: what a request body carries, with one item.
 * @typedef {{ batchId: string, item: BufferBatchItem }} Batch
 */

/**
 * WRITE_BATCH's parameters for `batch`, owned by `agentId`: the trace's columns, then one array
 * per event column.
 * @param {string} agentId
 * @param {Batch} batch
 * @returns {unknown[]}
 */
export function writeBatchParams(agentId, { batchId, item: { trace: t, events } }) {
  /** @type {unknown[][]} one array per event column, in unnest's order */
  const columns = Array.from({ length: 11 }, () => new Array(events.length));
  events.forEach((e, i) => {
    const values = [
      e.id,
      e.sequence,
      e.type,
      e.startedAt,
      e.endedAt,
      e.durationMs,
      e.status,
      JSON.stringify(e.payload),
      e.payloadEncrypted,
      e.parentEventId,
      e.errorMessage,
    ];
    values.forEach((v, c) => {
      /** @type {unknown[]} */ (columns[c])[i] = v;
    });
  });
  return [
    agentId,
    batchId,
    t.id,
    events.length,
    t.status,
    t.startedAt,
    t.endedAt,
    t.durationMs,
    t.inputSummary,
    t.outputSummary,
    t.errorMessage,
    t.tags,
    t.eventCount,
    t.totalTokens,
    t.totalCostUsd,
    t.totalLamports,
    t.chainTxCount,
    t.toolsCalled,
    ...columns,
  ];
}

/**
 * The row WRITE_BATCH answers: what it claimed and wrote (0 of each for a batch id seen before).
 * @typedef {{ claimed: number, traces: number, events: number }} WrittenCounts
 */

/**
 * Throws unless WRITE_BATCH wrote `batch` whole (a new batch id, its trace and every event).
 * @param {readonly WrittenCounts[]} rows
 * @param {Batch} batch
 */
export function checkWritten(rows, batch) {
  const [r] = rows;
  if (r?.claimed !== 1 || r.traces !== 1 || r.events !== batch.item.events.length)
    throw new Error(`batch ${batch.batchId} was not written whole: ${JSON.stringify(r)}`);
}
