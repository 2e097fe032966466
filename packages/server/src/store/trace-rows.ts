import type { Event, Trace } from '@flightlog/protocol';
import { isoFromRow, isoOrNullFromRow } from './row-dates.js';

/** Columns of `traces` as wire field names; numerics as text so they stay exact. */
export const TRACE_COLUMNS = `
  t.id, t.agent_id AS "agentId", t.status, t.started_at AS "startedAt",
  t.input_summary AS "inputSummary", t.ended_at AS "endedAt", t.duration_ms AS "durationMs",
  t.output_summary AS "outputSummary", t.error_message AS "errorMessage", t.tags,
  t.event_count AS "eventCount", t.total_tokens AS "totalTokens",
  t.total_cost_usd::text AS "totalCostUsd", t.total_lamports::text AS "totalLamports",
  t.chain_tx_count AS "chainTxCount", t.tools_called AS "toolsCalled",
  t.anchor_signature AS "anchorSignature", t.anchor_slot::text AS "anchorSlot",
  t.merkle_proof AS "merkleProof", t.trace_hash AS "traceHash", t.share_token AS "shareToken"`;

/**
 * A run's exact place in start order, for a cursor: its start to the microsecond (as stored;
 * the wire's startedAt has milliseconds), as `"cursorTime"`.
 */
export const CURSOR_TIME = `to_char(t.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS "cursorTime"`;

export const EVENT_COLUMNS = `
  e.id, e.trace_id AS "traceId", e.sequence, e.type, e.started_at AS "startedAt",
  e.payload, e.status, e.payload_encrypted AS "payloadEncrypted",
  e.parent_event_id AS "parentEventId", e.ended_at AS "endedAt", e.duration_ms AS "durationMs",
  e.error_message AS "errorMessage"`;

/** A row as the driver returns it: timestamps are Dates. */
type Stored<T> = Omit<T, 'startedAt' | 'endedAt'> & {
  startedAt: Date | string;
  endedAt?: Date | string | null;
};
export type TraceRow = Stored<Trace>;
export type EventRow = Stored<Event>;

export function traceFromRow(row: Stored<Trace>): Trace {
  return {
    ...row,
    startedAt: isoFromRow(row.startedAt),
    endedAt: isoOrNullFromRow(row.endedAt),
  } as Trace;
}

export function eventFromRow(row: Stored<Event>): Event {
  return {
    ...row,
    startedAt: isoFromRow(row.startedAt),
    endedAt: isoOrNullFromRow(row.endedAt),
  } as Event;
}
