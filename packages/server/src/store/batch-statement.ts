import type { BufferBatchItem } from '@flightlog/protocol';
import { ANALYSED_STATUSES } from '@flightlog/protocol';
import { enqueueAnalysisSql } from './analysis-store.js';
import type { ItemJson } from './batch-json.js';
import { ID_CONFLICT_PREFIX } from './id-conflict.js';

const ANALYSED = ANALYSED_STATUSES.map((status) => `'${status}'`).join(', ');

/**
 * One or more batches (or, see roundsOf, one round of one batch) in one statement, so in one
 * round trip and atomic without BEGIN/COMMIT. A group of batches of any agents is written the
 * same way as one batch: group commit (see batch-groups.ts) is this statement given several.
 *
 * 1. `claim` records each batch id whose `claim` flag is set: a batch id seen before claims
 *    nothing, and `go` marks that batch not ok, so nothing of it is written. A concurrent copy
 *    of a batch waits here for the first one. Claims go in (agent, batch id) order, so two
 *    statements claiming the same ids wait for each other in one order.
 * 2. `written` upserts the trace snapshots in the order given ($7 is sorted by trace id, so
 *    two statements lock shared traces in the same order; a trace id appears at most once). A
 *    snapshot older than the stored one (fewer events, or running after the run ended) is
 *    skipped. A trace of another agent is "updated" too, only so that RETURNING reports its
 *    owner even when it was created after this statement's snapshot: the statement then fails
 *    (step 5), which undoes that update.
 *    A batch flagged `new_traces` ($15: an OTLP export written without reading first, see
 *    ingest-otlp.ts) only creates traces: its traces are locked first (`locked`, the per-trace
 *    advisory locks TraceStore.withTraceLocks takes, in the same order), an existing one is never
 *    updated, and step 5 then fails the statement, so the caller reads what is stored and writes
 *    again under those locks.
 * 3. `stored` upserts the events (after the traces: it reads `written`); a re-sent event of the
 *    same trace and agent is updated in place, an id used elsewhere is not returned.
 * 4. `finished`/`superseded`/`queued` queue the analysis of each trace this statement moved to
 *    a finished status (see enqueueAnalysisSql); `refinished` marks a run that had finished and
 *    that this statement changed again, to be fingerprinted again (see fingerprint-store.ts).
 * 5. The final SELECT casts 'flightlog-id-conflict:<pointer>' to an integer when a trace or an
 *    event id belongs to someone else, or a `new_traces` batch's trace exists already (first by
 *    trace order, trace before its events): the error aborts the statement, so nothing at all
 *    is written (see id-conflict.ts). The cast
 *    depends on a row of `conflict`, so the planner cannot fold it into an error up front. The
 *    pointer is relative to that trace's batch: a group that fails so is written again one
 *    batch at a time, where each pointer is the batch's own.
 *
 * Batches travel as parallel arrays ($1–$6, one element per batch). Traces and events (all but
 * their payloads) travel as JSON arrays ($7, $10: every text field of theirs is storable text,
 * see the protocol's STORABLE_TEXT), each trace with its batch's number (1-based, $8) and its
 * index in that batch ($9), each event with its trace's position in $7 (1-based, $12) and its
 * index in its item ($13), which names it in a conflict's pointer. Payloads go as one JSON array
 * ($11) that only json_array_elements reads, which keeps each payload's text as sent, with
 * escapes (\u0000, lone surrogates) PostgreSQL's other JSON functions would refuse. See
 * batch-json.ts.
 */
export const WRITE_BATCHES = `
WITH batch AS (
  SELECT * FROM ROWS FROM (
    unnest($1::text[]), unnest($2::text[]), unnest($3::text[]), unnest($4::int[]),
    unnest($5::int[]), unnest($6::boolean[]), unnest($15::boolean[])
  ) WITH ORDINALITY AS b(agent_id, batch_id, trace_id, item_count, event_count, claim,
                         new_traces, n)
),
claim AS (
  INSERT INTO accepted_batches (agent_id, batch_id, trace_id, item_count, event_count)
  SELECT b.agent_id, b.batch_id, b.trace_id, b.item_count, b.event_count
  FROM batch b
  WHERE b.claim
  ORDER BY b.agent_id, b.batch_id
  ON CONFLICT (agent_id, batch_id) DO NOTHING
  RETURNING agent_id, batch_id
),
go AS (
  SELECT b.n, b.agent_id, b.new_traces,
         NOT b.claim OR EXISTS (
           SELECT 1 FROM claim c WHERE c.agent_id = b.agent_id AND c.batch_id = b.batch_id) AS ok
  FROM batch b
),
incoming AS (
  SELECT t.*, g.agent_id AS agent, g.ok, g.new_traces,
         -- the agent deleted this run: a client still retrying must not write it back
         EXISTS (SELECT 1 FROM trace_tombstones d
                 WHERE d.trace_id = t.id AND d.agent_id = g.agent_id) AS dropped
  FROM ROWS FROM (
    json_to_recordset($7::json) AS (
      id text, status text, "startedAt" timestamptz, "endedAt" timestamptz, "durationMs" float8,
      "inputSummary" text, "outputSummary" text, "errorMessage" text, tags text[],
      "eventCount" bigint, "totalTokens" bigint, "totalCostUsd" numeric, "totalLamports" numeric,
      "chainTxCount" bigint, "toolsCalled" text[], "anchorSignature" text, "anchorSlot" numeric,
      "merkleProof" text, "traceHash" text, "shareToken" text),
    unnest($8::int[]),
    unnest($9::int[])) WITH ORDINALITY AS t(
      id, status, "startedAt", "endedAt", "durationMs", "inputSummary", "outputSummary",
      "errorMessage", tags, "eventCount", "totalTokens", "totalCostUsd", "totalLamports",
      "chainTxCount", "toolsCalled", "anchorSignature", "anchorSlot", "merkleProof", "traceHash",
      "shareToken", batch_n, item, pos)
  JOIN go g ON g.n = t.batch_n
),
incoming_events AS (
  SELECT e.*
  FROM ROWS FROM (
    json_to_recordset($10::json) AS (
      id text, "traceId" text, sequence bigint, type text, "startedAt" timestamptz,
      "endedAt" timestamptz, "durationMs" float8, status text, "payloadEncrypted" boolean,
      "parentEventId" text, "errorMessage" text),
    json_array_elements($11::json),
    unnest($12::int[]),
    unnest($13::int[])) WITH ORDINALITY AS e(
      id, "traceId", sequence, type, "startedAt", "endedAt", "durationMs", status,
      "payloadEncrypted", "parentEventId", "errorMessage", payload, trace_pos, "indexInItem",
      ordinality)
),
locked AS (
  SELECT pg_advisory_xact_lock(hashtextextended('flightlog-trace:' || t.id, 0))
  FROM incoming t
  WHERE t.new_traces
  ORDER BY t.pos
),
written AS (
  INSERT INTO traces (
    id, agent_id, status, started_at, ended_at, duration_ms, input_summary, output_summary,
    error_message, tags, event_count, total_tokens, total_cost_usd, total_lamports,
    chain_tx_count, tools_called, anchor_signature, anchor_slot, merkle_proof, trace_hash,
    share_token)
  SELECT t.id, t.agent, t.status, t."startedAt", t."endedAt", t."durationMs", t."inputSummary",
         t."outputSummary", t."errorMessage", t.tags, t."eventCount", t."totalTokens",
         t."totalCostUsd", t."totalLamports", t."chainTxCount", t."toolsCalled",
         -- the proof and the share link are the server's (a client's values are ignored: a
         -- fingerprint or a public link a client could set would prove or share nothing)
         NULL, NULL, NULL, NULL, NULL
  FROM incoming t
  -- (the count makes the locks be taken before the first row is written)
  WHERE t.ok AND NOT t.dropped AND (SELECT count(*) FROM locked) >= 0
  ORDER BY t.pos
  ON CONFLICT (id) DO UPDATE SET
    status = EXCLUDED.status, started_at = EXCLUDED.started_at, ended_at = EXCLUDED.ended_at,
    duration_ms = EXCLUDED.duration_ms, input_summary = EXCLUDED.input_summary,
    output_summary = EXCLUDED.output_summary, error_message = EXCLUDED.error_message,
    tags = EXCLUDED.tags, event_count = EXCLUDED.event_count,
    total_tokens = EXCLUDED.total_tokens, total_cost_usd = EXCLUDED.total_cost_usd,
    total_lamports = EXCLUDED.total_lamports, chain_tx_count = EXCLUDED.chain_tx_count,
    tools_called = EXCLUDED.tools_called,
    -- a run no longer completed or errored (a client may report it timed out) has no current
    -- fingerprint: the last one would not match it; its history stays in trace_hashes
    trace_hash = CASE WHEN EXCLUDED.status IN (${ANALYSED}) THEN traces.trace_hash END,
    timed_out_at = NULL,
    updated_at = now()
  -- another agent's trace: reported below, and the statement fails; never an older snapshot
  -- (fewer events, or running again after the run ended, unless the sweeper ended it: the
  -- client's word that it is alive wins over the sweeper's guess that it was abandoned)
  -- (a new_traces batch never updates: it fails below, as for another agent's trace)
  WHERE NOT EXISTS (SELECT 1 FROM incoming n WHERE n.id = EXCLUDED.id AND n.new_traces)
    AND (traces.agent_id <> EXCLUDED.agent_id
         OR (EXCLUDED.event_count >= traces.event_count
             AND NOT (EXCLUDED.status = 'running' AND traces.status <> 'running'
                      AND traces.timed_out_at IS NULL)))
  -- the subquery reads the statement's snapshot: the row before this write (null when new)
  RETURNING traces.id, traces.agent_id, traces.status,
            (SELECT t0.status FROM traces t0 WHERE t0.id = traces.id) AS previous_status
),
stored AS (
  INSERT INTO events (
    id, trace_id, agent_id, sequence, type, started_at, ended_at, duration_ms, status, payload,
    payload_encrypted, parent_event_id, error_message)
  SELECT e.id, e."traceId", t.agent, e.sequence, e.type, e."startedAt", e."endedAt",
         e."durationMs", e.status, e.payload, e."payloadEncrypted", e."parentEventId",
         e."errorMessage"
  FROM incoming_events e JOIN incoming t ON t.pos = e.trace_pos
  WHERE t.ok AND NOT t.dropped AND (SELECT count(*) FROM written) >= 0
  ON CONFLICT (id) DO UPDATE SET
    sequence = EXCLUDED.sequence, type = EXCLUDED.type, started_at = EXCLUDED.started_at,
    ended_at = EXCLUDED.ended_at, duration_ms = EXCLUDED.duration_ms, status = EXCLUDED.status,
    payload = EXCLUDED.payload, payload_encrypted = EXCLUDED.payload_encrypted,
    parent_event_id = EXCLUDED.parent_event_id, error_message = EXCLUDED.error_message
  -- a re-sent event of the same trace is updated in place; an id used elsewhere is refused
  WHERE events.agent_id = EXCLUDED.agent_id AND events.trace_id = EXCLUDED.trace_id
  RETURNING id
),
refinished AS (
  -- a run that had finished before this statement and that it changed again (a later snapshot,
  -- or events under an older one): fingerprinted again after the grace (fingerprint-store.ts)
  INSERT INTO fingerprint_due (trace_id, due_at)
  SELECT t.id, now() + make_interval(secs => $14::float8 / 1000)
  FROM incoming t
  WHERE t.ok AND NOT t.dropped
    -- by the primary key alone: with the agent in the WHERE, the planner may walk the agent's
    -- index over all its runs instead (PGlite, which runs no autovacuum and so plans with the
    -- statistics of empty tables, did: it halved small-batch ingest, slower with every run)
    AND (SELECT CASE WHEN t0.agent_id = t.agent THEN t0.status END
         FROM traces t0 WHERE t0.id = t.id) IN (${ANALYSED})
    AND (t.id IN (SELECT w.id FROM written w WHERE w.status IN (${ANALYSED}))
         OR t.pos IN (SELECT e.trace_pos FROM incoming_events e))
    AND (SELECT count(*) FROM stored) >= 0
  ORDER BY t.id
  ON CONFLICT (trace_id) DO UPDATE SET due_at = EXCLUDED.due_at
),
finished AS (
  SELECT w.id, w.agent_id FROM written w JOIN incoming t ON t.id = w.id
  WHERE w.agent_id = t.agent AND w.status IN (${ANALYSED})
    AND (w.previous_status IS NULL OR w.previous_status NOT IN (${ANALYSED}))
),
${enqueueAnalysisSql('$14')},
conflict AS (
  SELECT c.pointer FROM (
    SELECT t.pos, 0 AS k, '/items/' || t.item || '/trace/id' AS pointer
    FROM written w JOIN incoming t ON t.id = w.id
    WHERE w.agent_id <> t.agent
    UNION ALL
    SELECT t.pos, 0, '/items/' || t.item || '/trace/id'
    FROM incoming t
    WHERE t.new_traces AND t.ok AND NOT t.dropped
      AND NOT EXISTS (SELECT 1 FROM written w WHERE w.id = t.id)
    UNION ALL
    -- each event's index in its item travels with it ($13): counting what precedes it here
    -- would cost the square of the batch, and a batch of re-sent ids is all conflicts
    SELECT t.pos, e.ordinality, '/items/' || t.item || '/events/' || e."indexInItem" || '/id'
    FROM incoming_events e JOIN incoming t ON t.pos = e.trace_pos
    WHERE t.ok AND NOT t.dropped
      AND NOT EXISTS (SELECT 1 FROM stored s WHERE s.id = e.id)
  ) c
  ORDER BY c.pos, c.k
  LIMIT 1
)
SELECT (SELECT array_agg(g.ok ORDER BY g.n) FROM go g) AS claimed,
       (SELECT array_agg(DISTINCT t.batch_n) FROM queued q JOIN incoming t ON t.id = q.trace_id)
         AS queued,
       (SELECT json_agg(json_build_array(t.batch_n, t.id)) FROM incoming t WHERE t.dropped)
         AS dropped,
       (SELECT ('${ID_CONFLICT_PREFIX}' || c.pointer)::int FROM conflict c) AS refused`;

/** One batch's part of a WRITE_BATCHES statement. */
export interface BatchPart {
  agentId: string;
  batchId: string;
  /** Every item of the batch (its counts and first trace go to accepted_batches). */
  items: readonly BufferBatchItem[];
  json: readonly ItemJson[];
  /** The items written by this statement (indexes into `items`): the batch, or one round of it. */
  round: readonly number[];
  /** Whether this statement claims the batch id (the first round of a batch does). */
  claim: boolean;
  /** Only creates traces: one that exists fails the statement (see WRITE_BATCHES, step 2). */
  newTraces?: boolean;
}

/** What WRITE_BATCHES answered, per batch part in the order given. */
export interface BatchPartResult {
  /** False when the batch id was accepted before: nothing of it was written. */
  claimed: boolean;
  /** It finished a run, which queued the run's analysis. */
  analysisQueued: boolean;
  /** Its traces that were deleted (tombstoned): their items were not written. */
  droppedTraceIds: string[];
}

interface WriteBatchesRow {
  claimed: boolean[];
  queued: number[] | null;
  dropped: [number, string][] | null;
}

/**
 * The parameters of WRITE_BATCHES for `parts`, whose trace ids are distinct. Traces go in
 * trace id order whatever their batch, so every statement locks shared traces in one order.
 */
export function batchesParams(parts: readonly BatchPart[], analysisGraceMs: number): unknown[] {
  const traceOrder: { part: number; item: number; id: string }[] = [];
  parts.forEach((part, p) => {
    for (const item of part.round)
      traceOrder.push({ part: p, item, id: (part.items[item] as BufferBatchItem).trace.id });
  });
  if (parts.length > 1 || (parts[0]?.round.length ?? 0) > 1)
    traceOrder.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const traces: string[] = [];
  const traceBatches: number[] = [];
  const traceItems: number[] = [];
  const events: string[] = [];
  const payloads: string[] = [];
  const eventTraces: number[] = [];
  const indexesInItem: number[] = [];
  for (const [position, { part, item }] of traceOrder.entries()) {
    const json = (parts[part] as BatchPart).json[item] as ItemJson;
    traces.push(json.trace);
    traceBatches.push(part + 1);
    traceItems.push(item);
    for (let j = 0; j < json.events.length; j++) {
      events.push(json.events[j] as string);
      payloads.push(json.payloads[j] as string);
      eventTraces.push(position + 1);
      indexesInItem.push(j);
    }
  }
  return [
    parts.map((p) => p.agentId),
    parts.map((p) => p.batchId),
    parts.map((p) => (p.items[0] as BufferBatchItem).trace.id),
    parts.map((p) => p.items.length),
    parts.map((p) => p.items.reduce((n, i) => n + i.events.length, 0)),
    parts.map((p) => p.claim),
    `[${traces.join(',')}]`,
    traceBatches,
    traceItems,
    `[${events.join(',')}]`,
    `[${payloads.join(',')}]`,
    eventTraces,
    indexesInItem,
    analysisGraceMs,
    parts.map((p) => p.newTraces === true),
  ];
}

/** The row of WRITE_BATCHES read per part. */
export function batchPartResults(row: WriteBatchesRow, parts: number): BatchPartResult[] {
  const queued = new Set(row.queued ?? []);
  return Array.from({ length: parts }, (_, p) => ({
    claimed: row.claimed[p] === true,
    analysisQueued: queued.has(p + 1),
    droppedTraceIds: (row.dropped ?? []).filter(([n]) => n === p + 1).map(([, id]) => id),
  }));
}

export type { WriteBatchesRow };
