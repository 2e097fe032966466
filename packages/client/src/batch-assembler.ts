import { type WarningChannel, WARN_INTERVAL_MS } from './logger.js';
import { inRange } from './instants.js';
import { eventProblem, noteWrittenDateTime, traceProblem } from './payload-checks.js';
import { isEncrypted, sealPayload, type PayloadSealing } from './payload-sealing.js';
import type { DrainedItem, RecordedEvent } from './recorded-event.js';
import {
  SliceClock,
  payloadJson,
  payloadJsonNow,
  sealPayloadSliced,
  sealsAtOnce,
} from './sliced-json.js';

/** One event as wire JSON: `head` is the event up to its payload (`{"id":…,`), `payload` its JSON. */
export interface WireEvent {
  id: string;
  head: string;
  payload: string;
}

/** One batch item as wire JSON fragments, ready to be joined into a body (and split on a 413). */
export interface WireItem {
  traceId: string;
  trace: string;
  events: WireEvent[];
}

/**
 * An empty object stands in for the payload when the envelope is checked (the payload's text is
 * checked on its own) and serialised; the envelope's JSON then ends with this, cut off to splice
 * the real payload in.
 */
const ANY_OBJECT = Object.freeze({});
const PAYLOAD_TAIL = '"payload":{}}';

/** Where the assembler reports what it had to leave out. */
export interface AssemblyReport {
  /** Called for an event (or a whole item) that cannot be sent, with why. */
  dropped(count: number, reason: string, context: object): void;
}

let lastIsoMs = NaN;
let lastIso = '';

/**
 * ISO text of an instant. Events recorded in a burst share their millisecond, and formatting a
 * date costs about a microsecond on a small core: the last one is reused.
 */
function iso(ms: number): string {
  if (ms !== lastIsoMs) {
    lastIso = new Date(ms).toISOString();
    lastIsoMs = ms;
    if (inRange(ms)) noteWrittenDateTime(lastIso);
  }
  return lastIso;
}

/** What the assembler needs besides the items. */
export interface AssemblyLimits {
  /** Largest payload JSON (UTF-8 bytes, before sealing); a larger one becomes a marker. */
  maxEventBytes: number;
  /** Where a payload cut to the marker at flush time is reported (throttled). */
  warnings: WarningChannel;
  /** Paces the work (default: slices of 1 ms); tests pass their own clock. */
  clock?: SliceClock;
}

type WireOutcome = { event: WireEvent } | { problem: string };

/** The envelope of an event: its wire fields, an empty object standing in for the payload. */
function envelopeOf(event: RecordedEvent, sealing: PayloadSealing) {
  return {
    id: event.id,
    traceId: event.traceId,
    sequence: event.sequence,
    type: event.type,
    startedAt: iso(event.startedAtMs),
    status: event.status,
    payloadEncrypted: isEncrypted(sealing),
    parentEventId: event.parentEventId,
    endedAt: event.endedAtMs === null ? null : iso(event.endedAtMs),
    durationMs: event.durationMs,
    errorMessage: event.errorMessage,
    payload: ANY_OBJECT,
  };
}

/** Its payload's JSON when it is larger than the service takes: the marker, with a warning. */
function truncatedJson(event: RecordedEvent, limits: AssemblyLimits): { json: string } {
  limits.warnings.throttled(
    'event-too-large',
    WARN_INTERVAL_MS,
    `a ${event.type} payload is larger than maxEventBytes (${limits.maxEventBytes}) as UTF-8 JSON; it is replaced by a truncation marker`,
    { traceId: event.traceId, eventId: event.id },
  );
  return {
    json: JSON.stringify({
      truncated: true,
      reason: `larger than maxEventBytes (${limits.maxEventBytes})`,
    }),
  };
}

/**
 * The common case at once: a payload small enough to be written (and sealed) in one call, as
 * almost every event's is — no promise and no pause per event. Undefined for one that needs
 * slices ({@link wireEvent}).
 */
function wireEventNow(
  event: RecordedEvent,
  sealing: PayloadSealing,
  limits: AssemblyLimits,
): WireOutcome | undefined {
  const envelope = envelopeOf(event, sealing);
  const problem = eventProblem(envelope);
  if (problem !== null) return { problem: `event does not match the schema: ${problem}` };
  const plain = payloadJsonNow(event.payload, event.payloadBytes, limits.maxEventBytes);
  if (plain === undefined) return undefined;
  const json = 'tooLarge' in plain ? truncatedJson(event, limits).json : plain.json;
  if (!sealsAtOnce(json, sealing)) return undefined;
  // `{…,"payload":{}}` → `{…,` ; batchJson appends `"payload":<json>}`
  const head = JSON.stringify(envelope).slice(0, -PAYLOAD_TAIL.length);
  return { event: { id: event.id, head, payload: sealPayload(json, sealing) } };
}

async function wireEvent(
  event: RecordedEvent,
  sealing: PayloadSealing,
  limits: AssemblyLimits,
  clock: SliceClock,
): Promise<WireOutcome> {
  const envelope = envelopeOf(event, sealing);
  const problem = eventProblem(envelope);
  if (problem !== null) return { problem: `event does not match the schema: ${problem}` };
  // The payload copy was checked when recorded (plain JSON values, an object at the root); its
  // size then was an estimate by characters, and here it is measured in UTF-8 bytes as sent.
  const plain = await payloadJson(event.payload, event.payloadBytes, limits.maxEventBytes, clock);
  await clock.pause();
  const json = 'tooLarge' in plain ? truncatedJson(event, limits).json : plain.json;
  // `{…,"payload":{}}` → `{…,` ; batchJson appends `"payload":<json>}`
  const head = JSON.stringify(envelope).slice(0, -PAYLOAD_TAIL.length);
  const payload = await sealPayloadSliced(json, sealing, clock, sealPayload);
  return { event: { id: event.id, head, payload } };
}

/** The snapshot's JSON, or why it cannot be sent (then its item is left out). */
function traceJson(item: DrainedItem): { json: string } | { problem: string } {
  try {
    const problem = traceProblem(item.trace);
    if (problem !== null)
      return { problem: `trace snapshot does not match the schema: ${problem}` };
    return { json: JSON.stringify(item.trace) };
  } catch (error) {
    return { problem: `trace snapshot cannot be written: ${(error as Error).message}` };
  }
}

/**
 * Turns drained items into wire JSON: ISO dates, payloads serialised from the copies taken when
 * they were recorded (and encrypted or withheld per `sealing`), each event and snapshot checked
 * against the protocol schema. An event that fails is left out and reported, so it can never make
 * the service refuse the whole batch. Work is sliced (at most ~1 ms at a time, then the event
 * loop runs), so flushing a large buffer does not stall the host.
 */
export async function assembleItems(
  items: DrainedItem[],
  sealing: PayloadSealing,
  report: AssemblyReport,
  limits: AssemblyLimits,
): Promise<WireItem[]> {
  const out: WireItem[] = [];
  const clock = limits.clock ?? new SliceClock();
  for (const item of items) {
    const trace = traceJson(item);
    if ('problem' in trace) {
      report.dropped(item.events.length, trace.problem, { traceId: item.trace.id });
      continue;
    }
    const events: WireEvent[] = [];
    for (const event of item.events) {
      // Each event is guarded on its own: whatever goes wrong with one (a bug of ours, a time
      // `toISOString` cannot write) costs that event only, never its batch.
      let made: WireOutcome;
      try {
        made =
          wireEventNow(event, sealing, limits) ?? (await wireEvent(event, sealing, limits, clock));
      } catch (error) {
        made = { problem: `event cannot be written: ${(error as Error).message}` };
      }
      if ('event' in made) events.push(made.event);
      else
        report.dropped(1, made.problem, {
          traceId: event.traceId,
          eventId: event.id,
          type: event.type,
        });
      const wait = clock.pause();
      if (wait !== undefined) await wait;
    }
    out.push({ traceId: item.trace.id, trace: trace.json, events });
  }
  return out;
}

/** The verify fields that go with the client's batches until one carrying them is acknowledged. */
export interface VerifyFields {
  agentId: string;
  verifyToken: string;
}

/**
 * The request body: a TransportBatchPayload as JSON, in the pre-serialised fragments it is made
 * of, in order (joined, they are the body). Never joined here: a large payload is encoded from
 * its own fragment, a step at a time, instead of being copied into one big text first.
 */
export function batchJsonParts(
  batchId: string,
  items: WireItem[],
  verify?: VerifyFields,
): string[] {
  const parts: string[] = [`{"batchId":${JSON.stringify(batchId)},"items":[`];
  items.forEach((item, i) => {
    parts.push(`${i > 0 ? ',' : ''}{"trace":${item.trace},"events":[`);
    item.events.forEach((e, j) =>
      parts.push(`${j > 0 ? ',' : ''}${e.head}"payload":`, e.payload, '}'),
    );
    parts.push(']}');
  });
  const tail = verify
    ? `,"agentId":${JSON.stringify(verify.agentId)},"verifyToken":${JSON.stringify(verify.verifyToken)}`
    : '';
  parts.push(`]${tail}}`);
  return parts;
}

/** The request body as one JSON text (see {@link batchJsonParts}). */
export function batchJson(batchId: string, items: WireItem[], verify?: VerifyFields): string {
  return batchJsonParts(batchId, items, verify).join('');
}

/** Wire bytes of an item, roughly (for the backlog account of split batches). */
export function wireItemBytes(item: WireItem): number {
  let bytes = item.trace.length + 30;
  for (const event of item.events) bytes += event.head.length + event.payload.length + 12;
  return bytes;
}

/** The payload that replaces one too large for the service. */
export function truncatedPayloadJson(reason: string, originalBytes: number): string {
  return JSON.stringify({ truncated: true, reason, originalBytes });
}
