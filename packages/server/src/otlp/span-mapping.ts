import { TEXT_MAX_LENGTH, storableText, type Event } from '@flightlog/protocol';
import type { ExportTraceServiceRequest, OtlpSpan, OtlpSpanEvent } from './otlp-json.js';
import { classifySpan, inputSummaryOf, outputSummaryOf } from './semantic-conventions.js';
import { attributesOf, type Attributes } from './span-attributes.js';

/**
 * One OTLP span as one Flightlog event, before the store is read (sequence numbers and the trace
 * snapshot need what is stored: export-batch.ts). Pure: no I/O.
 *
 * Ids: the OTel trace id (32 hex digits, lower case) is the Flightlog trace id as it is, so a run
 * is found under the id every other OpenTelemetry tool shows. A span id is unique only within
 * its trace (OTLP: "a unique identifier for a span within a trace"), while Flightlog event ids
 * are unique across the service, so an event id is the trace id and the span id joined by `-`:
 * `<32 hex>-<16 hex>`; `parentEventId` is built the same way from the parent span id.
 */

const TRACE_ID = /^[0-9a-f]{32}$/;
const SPAN_ID = /^[0-9a-f]{16}$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

/** Span flags (OTLP): whether the parent's remoteness is known, and that it is remote. */
const HAS_IS_REMOTE = 0x100;
const IS_REMOTE = 0x200;

const SPAN_KINDS = ['unspecified', 'internal', 'server', 'client', 'producer', 'consumer'];

/** Why a span was refused on its own; the export's answer counts them by reason. */
export type SpanRejection =
  | 'invalid-trace-id'
  | 'invalid-span-id'
  | 'invalid-parent-span-id'
  | 'invalid-start-time'
  | 'trace-id-in-use'
  | 'span-id-in-use'
  | 'too-many-spans';

/** What the root span of a run says about the run. */
export interface RootFacts {
  startedAt: string;
  endedAt: string | null;
  errored: boolean;
  inputSummary: string;
  outputSummary: string | null;
  errorMessage: string | null;
}

export interface MappedSpan {
  traceId: string;
  /** The event, all but its sequence number (given by arrival, in export-batch.ts). */
  event: Omit<Event, 'sequence'>;
  /** Start time in nanoseconds since the epoch (orders the events of one export). */
  startNanos: bigint;
  tokens: number;
  costUsd: number;
  toolName?: string;
  /** Present for the run's root span: no parent, or a parent in another process. */
  root?: RootFacts;
}

export interface MappedExport {
  spans: MappedSpan[];
  rejected: Map<SpanRejection, number>;
}

/** A non-negative 64-bit integer (decimal text or number) as a bigint; undefined if not one. */
function nanos(value: string | number | undefined): bigint | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0) return undefined;
    return BigInt(Math.round(value));
  }
  if (!/^\d{1,20}$/.test(value)) return undefined;
  return BigInt(value);
}

/** RFC 3339 in UTC with microseconds (what PostgreSQL keeps) from nanoseconds since the epoch. */
export function isoFromNanos(value: bigint): string {
  // from the decimal text: cheaper than bigint division, and exact
  const digits = value.toString().padStart(7, '0');
  const millis = Number(digits.slice(0, -6));
  const second = Math.floor(millis / 1000);
  // the spans of an export mostly start and end within a few seconds: the date and time up to
  // the second is formatted once per second (a third of the cost of formatting every time)
  if (second !== lastSecond) {
    lastSecond = second;
    lastSecondIso = new Date(second * 1000).toISOString().slice(0, -4);
  }
  const ms = String(millis - second * 1000).padStart(3, '0');
  return `${lastSecondIso}${ms}${digits.slice(-6, -3)}Z`;
}

let lastSecond = Number.NaN;
/** `YYYY-MM-DDTHH:MM:SS.` of lastSecond. */
let lastSecondIso = '';

function enumNumber(value: string | number | undefined, names: readonly string[]): number {
  if (typeof value === 'number') return value;
  if (typeof value === 'string') {
    const index = names.indexOf(value);
    return index;
  }
  return 0;
}

const STATUS_NAMES = ['STATUS_CODE_UNSET', 'STATUS_CODE_OK', 'STATUS_CODE_ERROR'];
const KIND_NAMES = [
  'SPAN_KIND_UNSPECIFIED',
  'SPAN_KIND_INTERNAL',
  'SPAN_KIND_SERVER',
  'SPAN_KIND_CLIENT',
  'SPAN_KIND_PRODUCER',
  'SPAN_KIND_CONSUMER',
];

/** The error text of a failed span: its status message, else its recorded exception. */
function errorMessageOf(span: OtlpSpan): string {
  const status = span.status?.message;
  if (status) return storableText(status, TEXT_MAX_LENGTH);
  for (const event of span.events ?? []) {
    if (event.name !== 'exception') continue;
    const a = attributesOf(event.attributes);
    const type = typeof a['exception.type'] === 'string' ? a['exception.type'] : '';
    const message = typeof a['exception.message'] === 'string' ? a['exception.message'] : '';
    const text = type && message ? `${type}: ${message}` : type || message;
    if (text) return storableText(text, TEXT_MAX_LENGTH);
  }
  return 'The span ended with status ERROR.';
}

function spanEvents(events: readonly OtlpSpanEvent[]): Record<string, unknown>[] {
  return events.map((event) => {
    const time = nanos(event.timeUnixNano);
    return {
      name: event.name ?? '',
      ...(time !== undefined && time > 0n ? { time: isoFromNanos(time) } : {}),
      attributes: attributesOf(event.attributes),
    };
  });
}

interface SpanContext {
  service: string | undefined;
  scope: string | undefined;
}

function mapSpan(span: OtlpSpan, context: SpanContext): MappedSpan | SpanRejection {
  const traceId = (span.traceId ?? '').toLowerCase();
  if (!TRACE_ID.test(traceId) || traceId === ZERO_TRACE) return 'invalid-trace-id';
  const spanId = (span.spanId ?? '').toLowerCase();
  if (!SPAN_ID.test(spanId) || spanId === ZERO_SPAN) return 'invalid-span-id';
  const parentSpanId = (span.parentSpanId ?? '').toLowerCase();
  if (parentSpanId !== '' && (!SPAN_ID.test(parentSpanId) || parentSpanId === ZERO_SPAN))
    return 'invalid-parent-span-id';
  const start = nanos(span.startTimeUnixNano);
  if (start === undefined || start === 0n) return 'invalid-start-time';
  const endRaw = nanos(span.endTimeUnixNano);
  // a span that ends before it starts (clocks) ends when it starts
  const end = endRaw === undefined || endRaw === 0n ? undefined : endRaw < start ? start : endRaw;

  const flags = span.flags ?? 0;
  const parentIsRemote = (flags & HAS_IS_REMOTE) !== 0 && (flags & IS_REMOTE) !== 0;
  const isRoot = parentSpanId === '' || parentIsRemote;
  const errored = enumNumber(span.status?.code, STATUS_NAMES) === 2;
  const errorMessage = errored ? errorMessageOf(span) : null;
  const name = span.name || 'span';
  const attributes: Attributes = attributesOf(span.attributes);
  const kind = SPAN_KINDS[enumNumber(span.kind, KIND_NAMES)] ?? 'unspecified';
  const classified = classifySpan({ name, kind, attributes, service: context.service });

  const events = span.events ?? [];
  const links = span.links ?? [];
  classified.payload.otel = {
    spanName: name,
    spanKind: kind,
    ...(context.service ? { service: context.service } : {}),
    ...(context.scope ? { scope: context.scope } : {}),
    ...(events.length > 0 ? { events: spanEvents(events) } : {}),
    ...(links.length > 0
      ? {
          links: links.map((link) => ({
            traceId: (link.traceId ?? '').toLowerCase(),
            spanId: (link.spanId ?? '').toLowerCase(),
            attributes: attributesOf(link.attributes),
          })),
        }
      : {}),
  };

  const startedAt = isoFromNanos(start);
  const endedAt = end === undefined ? null : isoFromNanos(end);
  const mapped: MappedSpan = {
    traceId,
    event: {
      id: `${traceId}-${spanId}`,
      traceId,
      type: classified.type,
      startedAt,
      payload: classified.payload,
      status: errored ? 'error' : 'ok',
      payloadEncrypted: false,
      parentEventId: isRoot ? null : `${traceId}-${parentSpanId}`,
      endedAt,
      durationMs: end === undefined ? null : Number(end - start) / 1e6,
      errorMessage,
    },
    startNanos: start,
    tokens: classified.tokens,
    costUsd: classified.costUsd,
    ...(classified.toolName !== undefined ? { toolName: classified.toolName } : {}),
  };
  if (isRoot) {
    const output = outputSummaryOf(attributes);
    mapped.root = {
      startedAt,
      endedAt,
      errored,
      inputSummary: storableText(inputSummaryOf(attributes) ?? name, TEXT_MAX_LENGTH),
      outputSummary: output === undefined ? null : storableText(output, TEXT_MAX_LENGTH),
      errorMessage,
    };
  }
  return mapped;
}

/** Every span of an export, mapped, or counted by why it was refused. */
export function mapExport(request: ExportTraceServiceRequest): MappedExport {
  const spans: MappedSpan[] = [];
  const rejected = new Map<SpanRejection, number>();
  for (const resource of request.resourceSpans ?? []) {
    const serviceName = attributesOf(resource.resource?.attributes)['service.name'];
    const service = typeof serviceName === 'string' && serviceName !== '' ? serviceName : undefined;
    for (const scopeSpans of resource.scopeSpans ?? []) {
      const scopeName = scopeSpans.scope?.name;
      const version = scopeSpans.scope?.version;
      const scope = scopeName ? (version ? `${scopeName}@${version}` : scopeName) : undefined;
      for (const span of scopeSpans.spans ?? []) {
        const mapped = mapSpan(span, { service, scope });
        if (typeof mapped === 'string') rejected.set(mapped, (rejected.get(mapped) ?? 0) + 1);
        else spans.push(mapped);
      }
    }
  }
  return { spans, rejected };
}
