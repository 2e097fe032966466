import type { BufferBatchItem, Event, Trace } from '@flightlog/protocol';
import { BATCH_LIMITS } from '@flightlog/protocol';
import type { StoredEventOwner } from '../store/trace-store.js';
import type { MappedSpan, RootFacts, SpanRejection } from './span-mapping.js';
import { addCosts, addTokens, addTools } from './trace-totals.js';

/**
 * An OTLP export as the items of one Flightlog batch, given what is stored of its traces: the
 * batch the client library would have sent had it recorded these spans. Spans of one trace
 * arrive over many exports and out of order (an exporter sends a span when it ends, so children
 * come before their parents); each export adds its new spans to what is stored:
 *
 * - a span already stored for this trace (an exporter's retry) is skipped: stored once;
 * - new events are numbered after the stored ones (`sequence` = arrival order; within one export
 *   by start time, a parent before its child when they start together), so numbers never repeat
 *   and never move;
 * - the trace's totals are the stored ones plus the new events' (trace-totals.ts), and its
 *   `eventCount` grows by exactly the events added, so every snapshot is at least as new as the
 *   stored one (the store never takes an older one);
 * - the root span (no parent, or a remote one) sets `startedAt`, `endedAt`, the summaries and the
 *   status: `running` until it arrives ended, then `completed`, or `errored` for status ERROR.
 *   Spans that arrive after it leave all that as it is.
 *
 * A trace id that belongs to another agent refuses every span of that trace; an event id stored
 * elsewhere (only another client's batch can have made one) refuses that span.
 */

export interface ExportBatch {
  items: BufferBatchItem[];
  /** New events written. */
  accepted: number;
  /** Spans stored before (retries), skipped. */
  duplicates: number;
  rejected: Map<SpanRejection, number>;
}

const count = (map: Map<SpanRejection, number>, reason: SpanRejection, n: number) => {
  if (n > 0) map.set(reason, (map.get(reason) ?? 0) + n);
};

/** Microseconds since the epoch of an RFC 3339 time in UTC, for ordering (ms, then µs digits). */
function micros(iso: string): number {
  const fraction = /\.(\d+)Z$/i.exec(iso)?.[1] ?? '';
  return Date.parse(iso) * 1000 + Number(fraction.slice(3, 6).padEnd(3, '0'));
}

const earlier = (a: string, b: string) => (micros(a) <= micros(b) ? a : b);
const later = (a: string, b: string) => (micros(a) >= micros(b) ? a : b);

function durationMs(startedAt: string, endedAt: string): number {
  return Math.max(0, (micros(endedAt) - micros(startedAt)) / 1000);
}

/** The root's facts merged into a snapshot (a second root, rare, widens and can only fail it). */
function applyRoot(trace: Trace, root: RootFacts, hadRoot: boolean): void {
  const errored = root.errored || (hadRoot && trace.status === 'errored');
  trace.startedAt = hadRoot ? earlier(trace.startedAt, root.startedAt) : root.startedAt;
  const endedAt =
    root.endedAt === null
      ? null
      : hadRoot && trace.endedAt
        ? later(trace.endedAt, root.endedAt)
        : root.endedAt;
  trace.endedAt = endedAt;
  trace.durationMs = endedAt === null ? null : durationMs(trace.startedAt, endedAt);
  trace.status = endedAt === null ? 'running' : errored ? 'errored' : 'completed';
  if (!hadRoot || trace.inputSummary === '') trace.inputSummary = root.inputSummary;
  trace.outputSummary = root.outputSummary ?? trace.outputSummary ?? null;
  trace.errorMessage = root.errored
    ? root.errorMessage
    : errored
      ? (trace.errorMessage ?? null)
      : null;
}

function newTrace(agentId: string, id: string, first: MappedSpan): Trace {
  return {
    id,
    agentId,
    status: 'running',
    startedAt: first.event.startedAt,
    // until the root span arrives, the run is named after its earliest span so far
    inputSummary: first.root?.inputSummary ?? spanName(first),
    endedAt: null,
    durationMs: null,
    outputSummary: null,
    errorMessage: null,
    tags: [],
    eventCount: 0,
    totalTokens: 0,
    totalCostUsd: '0',
    totalLamports: '0',
    chainTxCount: 0,
    toolsCalled: [],
    anchorSignature: null,
    anchorSlot: null,
    merkleProof: null,
    traceHash: null,
    shareToken: null,
  };
}

function spanName(span: MappedSpan): string {
  const otel = span.event.payload.otel as { spanName?: unknown } | undefined;
  return typeof otel?.spanName === 'string' ? otel.spanName : span.event.id;
}

/**
 * How many of its ancestors each span has in the same export. Start times tie often: the OTel JS
 * SDK stamps a span's start with Date.now(), to the millisecond, and a generation, its first
 * model call and the tool call after it can all start in the same one. Among spans that start
 * together, a parent is numbered before its child. A parent chain that loops (only a forged
 * export has one) is cut after as many steps as there are spans.
 */
function depthsInExport(spans: readonly MappedSpan[]): Map<string, number> {
  const parentOf = new Map<string, string | null>();
  for (const span of spans) parentOf.set(span.event.id, span.event.parentEventId ?? null);
  const depth = new Map<string, number>();
  for (const span of spans) {
    const path: string[] = [];
    let id: string | null = span.event.id;
    let base = -1;
    while (id !== null && parentOf.has(id) && path.length <= spans.length) {
      const known = depth.get(id);
      if (known !== undefined) {
        base = known;
        break;
      }
      path.push(id);
      id = parentOf.get(id) ?? null;
    }
    for (let i = path.length - 1; i >= 0; i--)
      if (!depth.has(path[i]!)) depth.set(path[i]!, ++base);
  }
  return depth;
}

/**
 * The order events are numbered in: by start time; among spans that start together, ancestors
 * first, then the export's own order (the order the exporter's spans ended: the SDK's batch
 * processor sends them as they end).
 */
function inNumberingOrder(spans: MappedSpan[]): MappedSpan[] {
  const depth = depthsInExport(spans);
  const depthOf = (span: MappedSpan) => depth.get(span.event.id) ?? 0;
  // Array.prototype.sort is stable: equal keys keep the export's order
  return spans.sort((a, b) =>
    a.startNanos < b.startNanos ? -1 : a.startNanos > b.startNanos ? 1 : depthOf(a) - depthOf(b),
  );
}

/**
 * The batch items of an export for `agentId`: one per trace that gains events. `stored` holds
 * the stored snapshots of the export's traces (any owner), `storedEvents` the stored events
 * among the export's event ids.
 */
export function exportBatch(
  agentId: string,
  spans: readonly MappedSpan[],
  stored: ReadonlyMap<string, Trace>,
  storedEvents: ReadonlyMap<string, StoredEventOwner>,
): ExportBatch {
  const rejected = new Map<SpanRejection, number>();
  let duplicates = 0;
  let accepted = 0;
  const byTrace = new Map<string, MappedSpan[]>();
  for (const span of spans) {
    const list = byTrace.get(span.traceId);
    if (list) list.push(span);
    else byTrace.set(span.traceId, [span]);
  }
  const items: BufferBatchItem[] = [];
  for (const [traceId, traceSpans] of byTrace) {
    const before = stored.get(traceId);
    if (before && before.agentId !== agentId) {
      count(rejected, 'trace-id-in-use', traceSpans.length);
      continue;
    }
    const fresh: MappedSpan[] = [];
    const inExport = new Set<string>();
    for (const span of traceSpans) {
      const owner = storedEvents.get(span.event.id);
      if (inExport.has(span.event.id)) duplicates++;
      else if (!owner) {
        inExport.add(span.event.id);
        fresh.push(span);
      } else if (owner.agentId === agentId && owner.traceId === traceId) duplicates++;
      else count(rejected, 'span-id-in-use', 1);
    }
    if (fresh.length === 0) continue;
    inNumberingOrder(fresh);
    // one item holds at most this many events (the batch schema's limit); exporters send 512
    const room = BATCH_LIMITS.maxEventsPerItem;
    count(rejected, 'too-many-spans', fresh.length - room);
    const kept = fresh.slice(0, room);

    const first = kept[0] as MappedSpan;
    const trace: Trace = before ? { ...before, agentId } : newTrace(agentId, traceId, first);
    const base = trace.eventCount;
    const events: Event[] = kept.map((span, i) => ({ ...span.event, sequence: base + i }));
    // a root already stored leaves the run's times, summaries and status as they are
    let hadRoot = before !== undefined && trace.status !== 'running';
    for (const span of kept)
      if (span.root) {
        applyRoot(trace, span.root, hadRoot);
        hadRoot = true;
      }
    if (!hadRoot) trace.startedAt = earlier(trace.startedAt, first.event.startedAt);
    trace.eventCount = base + kept.length;
    trace.totalTokens = addTokens(
      trace.totalTokens,
      kept.map((span) => span.tokens),
    );
    trace.totalCostUsd = addCosts(
      trace.totalCostUsd,
      kept.map((span) => span.costUsd),
    );
    const tools = kept.flatMap((span) => (span.toolName === undefined ? [] : [span.toolName]));
    if (tools.length > 0) trace.toolsCalled = addTools(trace.toolsCalled, tools);
    items.push({ trace, events });
    accepted += kept.length;
  }
  return { items, accepted, duplicates, rejected };
}
