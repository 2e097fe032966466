import { createHash, type Hash } from 'node:crypto';
import { Type, type Static } from '@sinclair/typebox';
import type { Event } from './event.js';
import { Count, IsoDateTime, Nullable } from './primitives.js';
import { TraceStatusSchema, type Trace } from './trace.js';

/*
 * A finished run's fingerprint (`traceHash`): SHA-256, in lowercase hex, of the run's canonical
 * form, version 1:
 *
 *   "flightlog-trace/1\n"
 *   canonical JSON of the run's fields                                  "\n"
 *   canonical JSON of each event, by sequence then id (as read back)    "\n"   (one line each)
 *
 * Canonical JSON is RFC 8785 (JCS): object keys sorted by UTF-16 code units, no whitespace,
 * numbers and strings written as ECMAScript's JSON.stringify writes them. The run's fields are
 * every field of the trace except those the server sets after the fact (`traceHash`,
 * `merkleProof`, `anchorSignature`, `anchorSlot`, `shareToken`); an event's are all of its
 * fields. A field a record leaves out counts as null. An encrypted payload is hashed as stored
 * (its envelope), so anyone can check a run without its key. Everything is read as the service
 * hands it back (the read API and the export), so an export is enough to check a run offline.
 */

/** Names the canonical form; a new form gets a new version, and old hashes keep theirs. */
export const TRACE_HASH_VERSION = 'flightlog-trace/1';

const RUN_FIELDS = [
  'id',
  'agentId',
  'status',
  'startedAt',
  'endedAt',
  'durationMs',
  'inputSummary',
  'outputSummary',
  'errorMessage',
  'tags',
  'eventCount',
  'totalTokens',
  'totalCostUsd',
  'totalLamports',
  'chainTxCount',
  'toolsCalled',
] as const satisfies readonly (keyof Trace)[];

const EVENT_FIELDS = [
  'id',
  'traceId',
  'sequence',
  'type',
  'startedAt',
  'endedAt',
  'durationMs',
  'status',
  'payloadEncrypted',
  'parentEventId',
  'errorMessage',
  'payload',
] as const satisfies readonly (keyof Event)[];

/**
 * RFC 8785 canonical JSON of a JSON value. Throws on what JSON cannot hold (a non-finite number,
 * a function, a cycle): a bug of the caller, never data read back from the service.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value === 'boolean') return String(value);
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError('canonical JSON has no non-finite numbers');
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map((item) => canonicalJson(item)).join(',')}]`;
  if (typeof value === 'object') {
    const record = value as Record<string, unknown>;
    const parts: string[] = [];
    for (const key of Object.keys(record).sort()) {
      const field = record[key];
      // As JSON.stringify: a property holding undefined is not written.
      if (field !== undefined) parts.push(`${JSON.stringify(key)}:${canonicalJson(field)}`);
    }
    return `{${parts.join(',')}}`;
  }
  throw new TypeError(`canonical JSON has no ${typeof value}`);
}

function picked(record: object, fields: readonly string[]): Record<string, unknown> {
  const source = record as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const field of fields) out[field] = source[field] ?? null;
  return out;
}

/** The canonical line of a run's fields (without its newline). */
export function canonicalRun(trace: Trace): string {
  return canonicalJson(picked(trace, RUN_FIELDS));
}

/** The canonical line of one event (without its newline). */
export function canonicalEvent(event: Event): string {
  return canonicalJson(picked(event, EVENT_FIELDS));
}

/**
 * Computes a run's fingerprint as its events are read, one at a time in order (sequence, then
 * id), without holding them: the server hashes runs of any length this way.
 */
export class TraceFingerprint {
  private readonly hash: Hash = createHash('sha256');

  constructor(trace: Trace) {
    this.hash.update(`${TRACE_HASH_VERSION}\n${canonicalRun(trace)}\n`);
  }

  addEvent(event: Event): void {
    this.hash.update(`${canonicalEvent(event)}\n`);
  }

  /** The fingerprint: 64 lowercase hex digits. Call once. */
  digest(): string {
    return this.hash.digest('hex');
  }
}

/** The `traceHash` of a run and its events, listed in order (sequence, then id). */
export function traceHashOf(trace: Trace, events: readonly Event[]): string {
  const fingerprint = new TraceFingerprint(trace);
  for (const event of events) fingerprint.addEvent(event);
  return fingerprint.digest();
}

/** Whether `a` comes before `b` in a run's order: sequence, then id. */
function inOrder(a: Event, b: Event): boolean {
  if (a.sequence !== b.sequence) return a.sequence < b.sequence;
  return a.id < b.id;
}

/** What checking a run against its `traceHash` found. */
export type TraceHashCheck =
  | { kind: 'verified'; traceHash: string }
  /** The run carries no fingerprint (not finished, or not fingerprinted yet). */
  | { kind: 'no-fingerprint'; computed: string }
  /** An event of another run is in the list. */
  | { kind: 'foreign-event'; index: number; eventId: string }
  /** The events are not in the run's order (sequence, then id) at `index`. */
  | { kind: 'out-of-order'; index: number; eventId: string }
  /** The run's data does not give its fingerprint: something was changed, added or left out. */
  | { kind: 'mismatch'; traceHash: string; computed: string };

/**
 * Checks a run read back from the service (the read API's `{trace, events}`, or one line of an
 * export) against the `traceHash` it carries, offline.
 */
export function checkTraceHash(trace: Trace, events: readonly Event[]): TraceHashCheck {
  for (let i = 0; i < events.length; i++) {
    const event = events[i] as Event;
    if (event.traceId !== trace.id) return { kind: 'foreign-event', index: i, eventId: event.id };
    if (i > 0 && !inOrder(events[i - 1] as Event, event))
      return { kind: 'out-of-order', index: i, eventId: event.id };
  }
  const computed = traceHashOf(trace, events);
  const stored = trace.traceHash;
  if (typeof stored !== 'string' || stored === '') return { kind: 'no-fingerprint', computed };
  return stored === computed
    ? { kind: 'verified', traceHash: stored }
    : { kind: 'mismatch', traceHash: stored, computed };
}

/** One fingerprint a run had. */
export const TraceHashRecordSchema = Type.Object(
  {
    /** 1 for the run's first fingerprint, then 2, 3… */
    n: Count,
    traceHash: Type.String(),
    /** The canonical form hashed (`flightlog-trace/1`). */
    version: Type.String(),
    /** The run as hashed: its status and how many events it held. */
    status: TraceStatusSchema,
    eventCount: Count,
    computedAt: IsoDateTime,
  },
  { additionalProperties: false },
);
export type TraceHashRecord = Static<typeof TraceHashRecordSchema>;

/** Body of `GET /v1/traces/:id/fingerprints`: every fingerprint the run had, oldest first. */
export const TraceFingerprintsSchema = Type.Object(
  {
    /** The run's current fingerprint (the last of `fingerprints`); null before the first. */
    traceHash: Nullable(Type.String()),
    fingerprints: Type.Array(TraceHashRecordSchema),
  },
  { additionalProperties: false },
);
export type TraceFingerprints = Static<typeof TraceFingerprintsSchema>;
