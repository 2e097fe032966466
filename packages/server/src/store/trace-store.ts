import type {
  BufferBatchItem,
  CompleteTraceBody,
  Event,
  Trace,
  TraceStatus,
} from '@flightlog/protocol';
import { ANALYSED_STATUSES, isIsoDateTime } from '@flightlog/protocol';
import { enqueueAnalysis } from './analysis-store.js';
import type { SqlClient, SqlExecutor } from './sql-client.js';
import {
  EVENT_COLUMNS,
  TRACE_COLUMNS,
  eventFromRow,
  traceFromRow,
  type EventRow,
  type TraceRow,
} from './trace-rows.js';

export type VerifyOutcome = 'verified' | 'rejected' | 'ignored';

export interface BatchWrite {
  /** The agent resolved from the API key; already written over every `trace.agentId`. */
  agentId: string;
  batchId: string;
  items: BufferBatchItem[];
  /** Present when the body carried a verify token (hash) and the agent id it claims. */
  verify?: { tokenHash: string; claimedAgentId: string | undefined };
  analysisGraceMs: number;
}

export type BatchWriteOutcome =
  | {
      kind: 'accepted';
      traceId: string;
      verify: VerifyOutcome | null;
      /** True when the batch finished a run and so queued its analysis. */
      analysisQueued: boolean;
    }
  | { kind: 'duplicate'; traceId: string; verify: VerifyOutcome | null }
  | { kind: 'id-conflict'; pointer: string };

export type CompleteOutcome =
  | { kind: 'completed'; trace: Trace; analysisQueued: boolean }
  | { kind: 'not-found' }
  | { kind: 'ends-before-start' };

export interface TracePage {
  traces: Trace[];
  nextCursor: string | null;
}

/** Thrown inside a transaction to roll it back; never escapes this module. */
class IdConflict extends Error {
  constructor(readonly pointer: string) {
    super('id conflict');
  }
}

const isAnalysed = (status: string) => (ANALYSED_STATUSES as readonly string[]).includes(status);

/**
 * One item of a batch in one statement: claim the batch id (first item only, $1 true), upsert
 * the trace snapshot, store the item's events. With the claim, nothing is written for a batch
 * id seen before. Runs inside the batch's transaction, which the caller rolls back when the
 * result shows an id of another agent.
 */
const WRITE_ITEM = `
WITH claim AS (
  INSERT INTO accepted_batches (agent_id, batch_id, trace_id, item_count, event_count)
  SELECT $2::text, $3::text, $4::text, $5::int, $6::int
  WHERE $1::boolean
  ON CONFLICT (agent_id, batch_id) DO NOTHING
  RETURNING batch_id
),
go AS (SELECT NOT $1::boolean OR EXISTS (SELECT 1 FROM claim) AS ok),
written AS (
  INSERT INTO traces (
    id, agent_id, status, started_at, ended_at, duration_ms, input_summary, output_summary,
    error_message, tags, event_count, total_tokens, total_cost_usd, total_lamports,
    chain_tx_count, tools_called, anchor_signature, anchor_slot, merkle_proof, trace_hash,
    share_token)
  SELECT $7::text, $2::text, $8::text, $9::timestamptz, $10::timestamptz, $11::float8, $12::text,
         $13::text, $14::text, $15::text[], $16::bigint, $17::bigint, $18::numeric, $19::numeric,
         $20::bigint, $21::text[], $22::text, $23::numeric, $24::text, $25::text, $26::text
  WHERE (SELECT ok FROM go)
  ON CONFLICT (id) DO UPDATE SET
    status = EXCLUDED.status, started_at = EXCLUDED.started_at, ended_at = EXCLUDED.ended_at,
    duration_ms = EXCLUDED.duration_ms, input_summary = EXCLUDED.input_summary,
    output_summary = EXCLUDED.output_summary, error_message = EXCLUDED.error_message,
    tags = EXCLUDED.tags, event_count = EXCLUDED.event_count,
    total_tokens = EXCLUDED.total_tokens, total_cost_usd = EXCLUDED.total_cost_usd,
    total_lamports = EXCLUDED.total_lamports, chain_tx_count = EXCLUDED.chain_tx_count,
    tools_called = EXCLUDED.tools_called, anchor_signature = EXCLUDED.anchor_signature,
    anchor_slot = EXCLUDED.anchor_slot, merkle_proof = EXCLUDED.merkle_proof,
    trace_hash = EXCLUDED.trace_hash,
    -- set from the dashboard: a client snapshot (always null) must not unshare the trace
    share_token = COALESCE(EXCLUDED.share_token, traces.share_token),
    updated_at = now()
  -- never another agent's trace; never an older snapshot (fewer events, or running again
  -- after the run ended)
  WHERE traces.agent_id = EXCLUDED.agent_id
    AND EXCLUDED.event_count >= traces.event_count
    AND NOT (EXCLUDED.status = 'running' AND traces.status <> 'running')
  -- the subquery reads the statement's snapshot: the row before this write (null when new)
  RETURNING (SELECT t0.status FROM traces t0 WHERE t0.id = traces.id) AS previous_status
),
stored AS (
  INSERT INTO events (
    id, trace_id, agent_id, sequence, type, started_at, ended_at, duration_ms, status, payload,
    payload_encrypted, parent_event_id, error_message)
  SELECT e.id, e.trace_id, $2::text, e.sequence, e.type, e.started_at, e.ended_at, e.duration_ms,
         e.status, e.payload, e.payload_encrypted, e.parent_event_id, e.error_message
  FROM unnest($27::text[], $28::text[], $29::bigint[], $30::text[], $31::timestamptz[],
              $32::timestamptz[], $33::float8[], $34::text[], $35::json[], $36::boolean[],
              $37::text[], $38::text[])
    AS e(id, trace_id, sequence, type, started_at, ended_at, duration_ms, status, payload,
         payload_encrypted, parent_event_id, error_message)
  WHERE (SELECT ok FROM go)
  ON CONFLICT (id) DO UPDATE SET
    sequence = EXCLUDED.sequence, type = EXCLUDED.type, started_at = EXCLUDED.started_at,
    ended_at = EXCLUDED.ended_at, duration_ms = EXCLUDED.duration_ms, status = EXCLUDED.status,
    payload = EXCLUDED.payload, payload_encrypted = EXCLUDED.payload_encrypted,
    parent_event_id = EXCLUDED.parent_event_id, error_message = EXCLUDED.error_message
  -- a re-sent event of the same trace is updated in place; an id used elsewhere is refused
  WHERE events.agent_id = EXCLUDED.agent_id AND events.trace_id = EXCLUDED.trace_id
  RETURNING id
)
SELECT (SELECT ok FROM go) AS claimed,
       EXISTS (SELECT 1 FROM written) AS written,
       (SELECT previous_status FROM written) AS "previousStatus",
       ARRAY(SELECT id FROM stored) AS "storedEvents"`;

interface WriteItemRow {
  claimed: boolean;
  written: boolean;
  previousStatus: TraceStatus | null;
  storedEvents: string[];
}

const CONSUME_VERIFY_TOKEN = `
WITH consumed AS (
  UPDATE verify_tokens SET consumed_at = now()
  WHERE token_hash = $1 AND agent_id = $2 AND consumed_at IS NULL
  RETURNING agent_id
)
UPDATE agents SET verified_at = COALESCE(verified_at, now())
WHERE id IN (SELECT agent_id FROM consumed)
RETURNING id`;

function traceParams(trace: Trace): unknown[] {
  return [
    trace.id,
    trace.status,
    trace.startedAt,
    trace.endedAt ?? null,
    trace.durationMs ?? null,
    trace.inputSummary,
    trace.outputSummary ?? null,
    trace.errorMessage ?? null,
    trace.tags,
    trace.eventCount,
    trace.totalTokens,
    trace.totalCostUsd,
    trace.totalLamports,
    trace.chainTxCount,
    trace.toolsCalled,
    trace.anchorSignature ?? null,
    trace.anchorSlot ?? null,
    trace.merkleProof ?? null,
    trace.traceHash ?? null,
    trace.shareToken ?? null,
  ];
}

function eventColumns(events: Event[]): unknown[][] {
  const columns: unknown[][] = Array.from({ length: 12 }, () => new Array(events.length));
  events.forEach((e, i) => {
    const values = [
      e.id,
      e.traceId,
      e.sequence,
      e.type,
      e.startedAt,
      e.endedAt ?? null,
      e.durationMs ?? null,
      e.status,
      JSON.stringify(e.payload),
      e.payloadEncrypted,
      e.parentEventId ?? null,
      e.errorMessage ?? null,
    ];
    values.forEach((v, c) => ((columns[c] as unknown[])[i] = v));
  });
  return columns;
}

/** Trace ids as the schemas allow them (see protocol `Identifier`). */
const CURSOR_ID = /^[A-Za-z0-9._:~-]{1,128}$/;

/** Cursor of the trace list: the last row's start time (microseconds, UTC) and id. */
function encodeCursor(startedAt: string, id: string): string {
  return Buffer.from(JSON.stringify([startedAt, id])).toString('base64url');
}

export function decodeCursor(cursor: string): [string, string] | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (
      Array.isArray(value) &&
      value.length === 2 &&
      typeof value[0] === 'string' &&
      /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/.test(value[0]) &&
      isIsoDateTime(value[0]) &&
      typeof value[1] === 'string' &&
      CURSOR_ID.test(value[1])
    )
      return [value[0], value[1]];
  } catch {
    // fall through: not a cursor this service wrote
  }
  return undefined;
}

/** Traces, events, accepted batch ids and the analysis queue: the SQL of ingest and reads. */
export class TraceStore {
  constructor(private readonly sql: SqlClient) {}

  /** Applies one batch in one transaction, all or nothing. */
  async writeBatch(write: BatchWrite): Promise<BatchWriteOutcome> {
    try {
      return await this.sql.transaction((tx) => this.writeBatchIn(tx, write));
    } catch (error) {
      if (error instanceof IdConflict) return { kind: 'id-conflict', pointer: error.pointer };
      throw error;
    }
  }

  private async writeBatchIn(tx: SqlExecutor, write: BatchWrite): Promise<BatchWriteOutcome> {
    const { agentId, items } = write;
    const firstTraceId = (items[0] as BufferBatchItem).trace.id;
    const eventCount = items.reduce((n, item) => n + item.events.length, 0);

    // Items are written in trace id order (stable, so snapshots of one trace keep their order):
    // two batches touching the same traces then lock them in the same order. The first
    // statement claims the batch id: a concurrent copy of this batch waits on it, then finds
    // the id taken and answers as a duplicate.
    let analysisQueued = false;
    const order = [...items.keys()].sort((a, b) =>
      compareIds(items[a]!.trace.id, items[b]!.trace.id),
    );
    for (const [position, index] of order.entries()) {
      const { trace, events } = items[index] as BufferBatchItem;
      const [row] = await tx.query<WriteItemRow>(WRITE_ITEM, [
        position === 0,
        agentId,
        write.batchId,
        firstTraceId,
        items.length,
        eventCount,
        ...traceParams(trace),
        ...eventColumns(events),
      ]);
      if (!row) throw new Error('the item statement returned no row');
      if (!row.claimed) return this.duplicateOf(tx, agentId, write.batchId);
      if (!row.written) {
        // Not written: either a newer snapshot is stored (kept), or the id is another agent's.
        const [owner] = await tx.query<{ agentId: string }>(
          'SELECT agent_id AS "agentId" FROM traces WHERE id = $1',
          [trace.id],
        );
        if (owner && owner.agentId !== agentId) throw new IdConflict(`/items/${index}/trace/id`);
      }
      if (row.storedEvents.length !== events.length) {
        const stored = new Set(row.storedEvents);
        const j = events.findIndex((e) => !stored.has(e.id));
        throw new IdConflict(`/items/${index}/events/${j}/id`);
      }
      const before = row.previousStatus;
      if (row.written && isAnalysed(trace.status) && (before === null || !isAnalysed(before))) {
        await enqueueAnalysis(tx, trace.id, agentId, write.analysisGraceMs);
        analysisQueued = true;
      }
    }

    let verify: VerifyOutcome | null = null;
    if (write.verify) {
      verify = 'rejected';
      if (write.verify.claimedAgentId === agentId) {
        const verified = await tx.query(CONSUME_VERIFY_TOKEN, [write.verify.tokenHash, agentId]);
        if (verified.length > 0) verify = 'verified';
      }
      await tx.query(
        'UPDATE accepted_batches SET verify_outcome = $3 WHERE agent_id = $1 AND batch_id = $2',
        [agentId, write.batchId, verify],
      );
    }

    return { kind: 'accepted', traceId: firstTraceId, verify, analysisQueued };
  }

  private async duplicateOf(
    tx: SqlExecutor,
    agentId: string,
    batchId: string,
  ): Promise<BatchWriteOutcome> {
    const [original] = await tx.query<{ traceId: string; verify: VerifyOutcome | null }>(
      `SELECT trace_id AS "traceId", verify_outcome AS verify FROM accepted_batches
       WHERE agent_id = $1 AND batch_id = $2`,
      [agentId, batchId],
    );
    if (!original) throw new Error('a batch id was taken but has no row');
    return { kind: 'duplicate', traceId: original.traceId, verify: original.verify };
  }

  /** Finalises a trace owned by `agentId` (the complete endpoint). */
  async completeTrace(
    agentId: string,
    traceId: string,
    body: CompleteTraceBody,
    analysisGraceMs: number,
  ): Promise<CompleteOutcome> {
    return this.sql.transaction(async (tx) => {
      const endedAt = body.endedAt ?? null;
      const [found] = await tx.query<{ endsBeforeStart: boolean }>(
        `SELECT COALESCE($3::timestamptz < started_at, false) AS "endsBeforeStart"
         FROM traces WHERE id = $1 AND agent_id = $2 FOR UPDATE`,
        [traceId, agentId, endedAt],
      );
      if (!found) return { kind: 'not-found' };
      if (found.endsBeforeStart) return { kind: 'ends-before-start' };

      const status = body.status ?? 'completed';
      // Absent summary fields stay as they are; an explicit null clears them. With no endedAt
      // the run ends now, but never before it started: an agent whose clock runs ahead of ours
      // can send a startedAt in our future, and its trace must still be finalisable.
      const [row] = await tx.query<TraceRow>(
        `UPDATE traces t SET
           status = $3,
           ended_at = COALESCE($4::timestamptz, GREATEST(now(), t.started_at)),
           duration_ms = EXTRACT(EPOCH FROM (
             COALESCE($4::timestamptz, GREATEST(now(), t.started_at)) - t.started_at)) * 1000,
           output_summary = CASE WHEN $5 THEN $6 ELSE t.output_summary END,
           error_message = CASE WHEN $7 THEN $8 ELSE t.error_message END,
           updated_at = now()
         WHERE t.id = $1 AND t.agent_id = $2
         RETURNING ${TRACE_COLUMNS}`,
        [
          traceId,
          agentId,
          status,
          endedAt,
          body.outputSummary !== undefined,
          body.outputSummary ?? null,
          body.errorMessage !== undefined,
          body.errorMessage ?? null,
        ],
      );
      if (!row) return { kind: 'not-found' };
      const analysisQueued = isAnalysed(status);
      if (analysisQueued) await enqueueAnalysis(tx, traceId, agentId, analysisGraceMs);
      return { kind: 'completed', trace: traceFromRow(row), analysisQueued };
    });
  }

  /** A trace with its events (by sequence), if `userId` has any role on its agent. */
  async traceForMember(
    userId: string,
    traceId: string,
  ): Promise<{ trace: Trace; events: Event[] } | undefined> {
    const [trace] = await this.sql.query<TraceRow>(
      `SELECT ${TRACE_COLUMNS} FROM traces t
       JOIN members m ON m.agent_id = t.agent_id AND m.user_id = $2
       WHERE t.id = $1`,
      [traceId, userId],
    );
    if (!trace) return undefined;
    const events = await this.sql.query<EventRow>(
      `SELECT ${EVENT_COLUMNS} FROM events e WHERE e.trace_id = $1 ORDER BY e.sequence, e.id`,
      [traceId],
    );
    return { trace: traceFromRow(trace), events: events.map(eventFromRow) };
  }

  /** One page of an agent's traces, newest first (by start time, then id). */
  async listTraces(
    agentId: string,
    options: { status?: TraceStatus; limit: number; after?: [string, string] },
  ): Promise<TracePage> {
    const rows = await this.sql.query<TraceRow & { cursorTime: string }>(
      `SELECT ${TRACE_COLUMNS},
              to_char(t.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS "cursorTime"
       FROM traces t
       WHERE t.agent_id = $1
         AND ($2::text IS NULL OR t.status = $2)
         AND ($3::timestamptz IS NULL OR (t.started_at, t.id) < ($3::timestamptz, $4::text))
       ORDER BY t.started_at DESC, t.id DESC
       LIMIT $5`,
      [
        agentId,
        options.status ?? null,
        options.after?.[0] ?? null,
        options.after?.[1] ?? null,
        options.limit + 1,
      ],
    );
    const page = rows.slice(0, options.limit);
    const last = page[page.length - 1];
    const nextCursor =
      rows.length > options.limit && last ? encodeCursor(last.cursorTime, last.id) : null;
    return {
      traces: page.map(({ cursorTime: _cursor, ...trace }) => traceFromRow(trace)),
      nextCursor,
    };
  }
}

function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
