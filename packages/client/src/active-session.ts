import { performance } from 'node:perf_hooks';
import {
  isIdentifier,
  isIsoDateTime,
  TEXT_MAX_LENGTH,
  type ChainTxPayload,
  type CustomPayload,
  type EventStatus,
  type EventType,
  type LlmCallPayload,
  type McpCallPayload,
  type ToolCallPayload,
  type Trace,
  type TraceStatus,
  type X402PaymentPayload,
} from '@flightlog/protocol';
import type { ClientCounters } from './client-stats.js';
import type { UlidFactory } from './ids.js';
import { INSTANT_RANGE, dateMs, inRange } from './instants.js';
import { type WarningChannel, WARN_INTERVAL_MS } from './logger.js';
import { isPayloadOf, payloadProblem } from './payload-checks.js';
import { sealedBytes, type PayloadSealing } from './payload-sealing.js';
import {
  HOLDS_BIGINT,
  NOT_AN_OBJECT,
  TOO_DEEP,
  measureOwnPayload,
  snapshotPayload,
  type PayloadSnapshot,
} from './payload-size.js';
import type { RecordedEvent, SnapshotSource } from './recorded-event.js';
import type {
  EndOptions,
  EventFields,
  FlightlogSession,
  PayloadByType,
  TimedOutcome,
  TimedSpan,
} from './session-types.js';
import { errorText, storableText } from './storable-text.js';
import type { PendingStep, PendingSteps } from './pending-steps.js';
import { OPEN_STEP, currentStepOf, runInStep, type OpenStep } from './step-scope.js';
import { runTimed } from './timing.js';
import { TraceAggregates } from './trace-aggregates.js';

/** What a session needs from its client. */
export interface SessionHost {
  readonly ids: UlidFactory;
  readonly warnings: WarningChannel;
  readonly counters: ClientCounters;
  readonly maxEventBytes: number;
  readonly sealing: PayloadSealing;
  /** Ended instrumented steps not recorded yet; settled before anything reads the session. */
  readonly pendingSteps: PendingSteps;
  accept(source: SnapshotSource, event: RecordedEvent): void;
  touch(source: SnapshotSource): void;
  requestFlush(): void;
}

/** The settled identity of a trace (options already checked by the client). */
export interface TraceIdentity {
  traceId: string;
  agentId: string;
  inputSummary: string;
  tags: string[];
  startedAtMs: number;
}

/** The protocol's lamports: a non-negative integer as decimal text (re-checked when read again). */
const LAMPORTS = /^(?:0|[1-9][0-9]*)$/;
/** Wire bytes of an event besides its payload, ids and texts: keys, dates, numbers. */
const EVENT_OVERHEAD = 300;

/** Epoch milliseconds of a Date or RFC 3339 string the service can store, else undefined. */
function toMs(value: unknown): number | undefined {
  if (typeof value !== 'string') return dateMs(value);
  if (!isIsoDateTime(value)) return undefined;
  const ms = Date.parse(value.toUpperCase());
  return inRange(ms) ? ms : undefined;
}

const RANGE = INSTANT_RANGE;

interface ResolvedFields {
  startedAtMs: number;
  endedAtMs: number | null;
  durationMs: number | null;
  status: EventStatus;
  errorMessage: string | null;
  parentEventId: string | null;
}

/** Applies the defaults of {@link EventFields}; a string says what is wrong. */
function resolveFields(fields: EventFields, now: number): ResolvedFields | string {
  if (typeof fields !== 'object' || fields === null) return 'the second argument must be an object';
  const { startedAt, endedAt, durationMs, status, errorMessage, parentEventId } = fields;
  if (
    durationMs !== undefined &&
    !(typeof durationMs === 'number' && durationMs >= 0 && durationMs <= Number.MAX_SAFE_INTEGER)
  )
    return 'durationMs must be a non-negative number';
  // undefined: not given, null: still in progress
  let endMs: number | null | undefined;
  if (endedAt === null) endMs = null;
  else if (endedAt !== undefined) {
    endMs = toMs(endedAt);
    if (endMs === undefined) return `endedAt must be a valid Date or RFC 3339 date-time (${RANGE})`;
  }
  let startMs: number | undefined;
  if (startedAt !== undefined) {
    startMs = toMs(startedAt);
    if (startMs === undefined)
      return `startedAt must be a valid Date or RFC 3339 date-time (${RANGE})`;
  }
  if (endMs === undefined)
    endMs =
      startMs !== undefined && durationMs !== undefined ? startMs + Math.round(durationMs) : now;
  if (startMs === undefined) {
    const reference = endMs ?? now;
    startMs = durationMs !== undefined ? reference - Math.round(durationMs) : reference;
  }
  // Each given time was in range; what was computed from a duration may not be.
  if (!inRange(startMs) || (endMs !== null && !inRange(endMs)))
    return `the event's times leave the ${RANGE} (startedAt, endedAt and durationMs together)`;
  let duration: number | null = null;
  if (endMs !== null) {
    if (endMs < startMs) return 'endedAt is before startedAt';
    duration = durationMs ?? endMs - startMs;
  }
  if (status !== undefined && status !== 'ok' && status !== 'error')
    return 'status must be "ok" or "error"';
  if (errorMessage !== undefined && errorMessage !== null && typeof errorMessage !== 'string')
    return 'errorMessage must be a string or null';
  const message =
    typeof errorMessage === 'string' ? storableText(errorMessage, TEXT_MAX_LENGTH) : null;
  let parent: string | null = null;
  if (parentEventId !== undefined && parentEventId !== null && parentEventId !== '') {
    if (typeof parentEventId !== 'string' || !isIdentifier(parentEventId))
      return 'parentEventId must be an event id';
    parent = parentEventId;
  }
  return {
    startedAtMs: startMs,
    endedAtMs: endMs,
    durationMs: duration,
    status: status ?? (message === null ? 'ok' : 'error'),
    errorMessage: message,
    parentEventId: parent,
  };
}

/** Why instrumentation-timed fields cannot be stored (a host's clock out of range), if so. */
function timesProblem(times: ResolvedFields): string | undefined {
  if (times.endedAtMs !== null && !inRange(times.endedAtMs))
    return `endedAt must be a valid Date or RFC 3339 date-time (${RANGE})`;
  if (!inRange(times.startedAtMs))
    return `startedAt must be a valid Date or RFC 3339 date-time (${RANGE})`;
  return undefined;
}

/** What an event adds to its trace's totals. */
interface EventTotals {
  tokens: number;
  cost: number;
  lamports: string;
  toolName: string;
}

/** The totals of an event of a type that adds none of them (only to the count). */
const NO_TOTALS: EventTotals = Object.freeze({ tokens: 0, cost: 0, lamports: '0', toolName: '' });

/**
 * What an event adds to the totals, or why it is refused. Read a second time (the schema check
 * read them first): a getter may answer differently, and a total of the wrong type would make
 * every later snapshot of the trace unsendable.
 */
function totalsOf(type: EventType, payload: object): EventTotals | string {
  switch (type) {
    case 'llm_call': {
      const p = payload as LlmCallPayload;
      const tokens = p.usage.totalTokens;
      const cost = p.costUsd;
      if (typeof tokens !== 'number' || !(tokens >= 0) || typeof cost !== 'number')
        return 'payload changed while it was read (usage or costUsd)';
      return { ...NO_TOTALS, tokens, cost };
    }
    case 'chain_tx': {
      // A decimal string of any size (summed exactly, with BigInt past 2^53), or a number
      // while it is exact: a whole number from 0 to 2^53 − 1, counted by its decimal text.
      const raw: unknown = (payload as ChainTxPayload).lamports;
      if (typeof raw === 'number' && Number.isSafeInteger(raw) && raw >= 0)
        return { ...NO_TOTALS, lamports: String(raw) };
      if (typeof raw === 'string' && raw.length <= 80 && LAMPORTS.test(raw))
        return { ...NO_TOTALS, lamports: raw };
      return 'payload changed while it was read (lamports)';
    }
    case 'tool_call': {
      const toolName = (payload as ToolCallPayload).name;
      if (typeof toolName !== 'string') return 'payload changed while it was read (name)';
      return { ...NO_TOTALS, toolName };
    }
    default:
      return NO_TOTALS;
  }
}

/** A payload checked, copied (unless the instrumentation's own) and its totals read. */
interface PreparedPayload {
  recorded: PayloadSnapshot;
  totals: EventTotals;
}

/**
 * One step opened by an instrumentation (a class: one is made per SDK call). Its start is taken
 * when it is made, its end when `end` is first called. It is recorded on the next turn of the
 * event loop (see pending-steps.ts). A step whose payload is the instrumentation's own (`own`:
 * nothing the host holds is read when it is built) builds it then; any other builds and copies
 * it when it ends, since it holds the host's objects, which the host may change as soon as it has
 * the result.
 */
class SessionStep<P> implements OpenStep<P>, PendingStep {
  private readonly t0 = performance.now();
  ended = false;
  private times: ResolvedFields | undefined;
  /** Own payloads: the builder, run when the step is recorded. */
  private build: (() => P) | undefined;
  /** Other payloads: built, checked and copied when the step ended (or why they were refused). */
  private prepared: PreparedPayload | string | undefined;

  constructor(
    private readonly session: ActiveSession,
    private readonly type: EventType,
    readonly eventId: string,
    private readonly sequence: number,
    private readonly parentEventId: string | null,
    private readonly own: boolean,
    private readonly startedAtMs: number,
  ) {}

  ok(build: () => P): void {
    this.end(true, build);
  }

  fail(build: () => P, error: unknown): void {
    this.end(false, build, error);
  }

  end(ok: boolean, build: () => P, error?: unknown): void {
    if (this.ended) return;
    this.ended = true;
    try {
      const durationMs = performance.now() - this.t0;
      this.times = {
        startedAtMs: this.startedAtMs,
        endedAtMs: this.startedAtMs + Math.round(durationMs),
        durationMs,
        status: ok ? 'ok' : 'error',
        errorMessage: ok ? null : errorText(error, TEXT_MAX_LENGTH),
        parentEventId: this.parentEventId,
      };
      // A payload that holds the host's objects is built, checked and copied now: the host may
      // change them as soon as it has the result. What is left waits either way.
      if (this.own) this.build = build;
      else this.prepared = this.session.prepareStep(this.type, build, this.eventId);
      this.session.recordLater(this);
    } catch {
      // endStep reports its own failures; nothing here throws into the host.
    }
  }

  record(): void {
    const { times, build, prepared } = this;
    if (times === undefined) return;
    this.times = undefined;
    this.build = undefined;
    this.prepared = undefined;
    try {
      if (build !== undefined)
        this.session.endStep(this.type, build, times, this.eventId, this.sequence);
      else if (prepared !== undefined)
        this.session.recordPrepared(this.type, prepared, times, this.eventId, this.sequence);
    } catch {
      // endStep reports its own failures; nothing here throws into the host.
    }
  }
}

/**
 * A recording session: one trace. It keeps the trace's snapshot and aggregates, checks and
 * records events into its client's buffer, and never throws into the host.
 */
export class ActiveSession implements FlightlogSession, SnapshotSource {
  readonly traceId: string;
  private traceStatus: TraceStatus = 'running';
  private sequence = 0;
  private durationMs: number | null = null;
  private outputSummary: string | null = null;
  private errorMessage: string | null = null;
  private readonly aggregates = new TraceAggregates();
  private readonly fixedBytes: number;
  private readonly startedAtText: string;
  private endedAtText: string | null = null;

  constructor(
    private readonly host: SessionHost,
    private readonly identity: TraceIdentity,
  ) {
    this.traceId = identity.traceId;
    this.startedAtText = new Date(identity.startedAtMs).toISOString();
    this.fixedBytes =
      520 +
      identity.traceId.length +
      identity.agentId.length +
      identity.inputSummary.length +
      identity.tags.reduce((n, tag) => n + tag.length + 3, 0);
    host.touch(this);
  }

  get status(): TraceStatus {
    return this.traceStatus;
  }

  llmCall(payload: LlmCallPayload, fields?: EventFields): string {
    return this.record('llm_call', payload, fields);
  }

  toolCall(payload: ToolCallPayload, fields?: EventFields): string {
    return this.record('tool_call', payload, fields);
  }

  chainTx(payload: ChainTxPayload, fields?: EventFields): string {
    return this.record('chain_tx', payload, fields);
  }

  x402Payment(payload: X402PaymentPayload, fields?: EventFields): string {
    return this.record('x402_payment', payload, fields);
  }

  mcpCall(payload: McpCallPayload, fields?: EventFields): string {
    return this.record('mcp_call', payload, fields);
  }

  custom(payload: CustomPayload, fields?: EventFields): string {
    return this.record('custom', payload, fields);
  }

  record<K extends EventType>(type: K, payload: PayloadByType[K], fields?: EventFields): string {
    try {
      const now = Date.now();
      const id = this.host.ids.next(now);
      // The id is returned even when the event is refused (with a warning), so the host's code
      // that nests later events under it runs the same either way.
      this.add(type, payload, fields, id, this.sequence++, now);
      return id;
    } catch (error) {
      this.internalError('record', error);
      return '';
    }
  }

  timed<K extends EventType, R>(
    type: K,
    run: (span: TimedSpan) => R,
    describe: (outcome: TimedOutcome<R>) => PayloadByType[K],
    fields?: Pick<EventFields, 'parentEventId'>,
  ): R {
    let span: TimedSpan;
    let sequence: number;
    let parentEventId: unknown = null;
    if (typeof run !== 'function') {
      // Nothing to run, nothing to time: the call is refused like a malformed event, and the
      // host gets undefined (what calling nothing gives) instead of our TypeError.
      this.refuse(type, 'timed: run must be a function; nothing was run');
      return undefined as R;
    }
    try {
      span = { eventId: this.host.ids.next(), traceId: this.traceId };
      sequence = this.sequence++;
      try {
        // Not given: the step this call runs inside, when an instrumentation tracks it.
        parentEventId = fields?.parentEventId;
        if (parentEventId === undefined) parentEventId = currentStepOf(this.traceId);
      } catch (error) {
        this.host.warnings.throttled(
          'timed-fields',
          WARN_INTERVAL_MS,
          `timed: reading fields.parentEventId threw (${errorText(error, 200)}); the event is recorded without a parent`,
          { traceId: this.traceId },
        );
      }
    } catch (error) {
      this.internalError('timed', error);
      return run({ eventId: '', traceId: this.traceId });
    }
    return runTimed(
      // Instrumented SDK calls made inside `run` nest under this step (when an instrumentation
      // is loaded; otherwise this is a plain call).
      () => runInStep(span, () => run(span)),
      (ok, valueOrError, timing) => {
        try {
          const outcome = (
            ok
              ? { ok: true, value: valueOrError as R, durationMs: timing.durationMs }
              : { ok: false, error: valueOrError, durationMs: timing.durationMs }
          ) as TimedOutcome<R>;
          if (typeof describe !== 'function') {
            this.refuse(type, 'timed: describe must be a function; no event is recorded');
            return;
          }
          let payload: PayloadByType[K];
          try {
            payload = describe(outcome);
          } catch (error) {
            this.refuse(type, `describe() threw: ${errorText(error, 200)}`);
            return;
          }
          const resolved: EventFields = {
            startedAt: new Date(timing.startedAtMs),
            endedAt: new Date(timing.endedAtMs),
            durationMs: timing.durationMs,
            status: ok ? 'ok' : 'error',
            errorMessage: ok ? null : errorText(valueOrError, TEXT_MAX_LENGTH),
            parentEventId: parentEventId as string | null,
          };
          this.add(type, payload, resolved, span.eventId, sequence);
        } catch (error) {
          this.internalError('timed', error);
        }
      },
    );
  }

  /**
   * A step the instrumentations end themselves (see step-scope.ts); undefined when it failed.
   * `own`: the payloads built for it are the instrumentation's own fresh objects (see
   * `measureOwnPayload`), recorded without a copy.
   */
  [OPEN_STEP]<K extends EventType>(type: K, own = false): OpenStep<PayloadByType[K]> | undefined {
    try {
      // One clock read for the id and the start.
      const startedAtMs = Date.now();
      const eventId = this.host.ids.next(startedAtMs);
      const sequence = this.sequence++;
      const parentEventId = currentStepOf(this.traceId);
      return new SessionStep(this, type, eventId, sequence, parentEventId, own, startedAtMs);
    } catch (error) {
      this.internalError('step', error);
      return undefined;
    }
  }

  /** Queues an ended step on the client's pending steps (SessionStep.end). */
  recordLater(step: PendingStep): void {
    this.host.pendingSteps.add(step);
  }

  /**
   * A step's payload built, checked and copied now (SessionStep.end, for a payload that holds
   * the host's objects), to be recorded a turn later by recordPrepared; or why it is refused.
   */
  prepareStep(type: EventType, build: () => unknown, id: string): PreparedPayload | string {
    let payload: unknown;
    try {
      payload = build();
    } catch (thrown) {
      return `describe() threw: ${errorText(thrown, 200)}`;
    }
    return this.prepare(type, payload, id, false);
  }

  /** Records a step prepared by prepareStep. */
  recordPrepared(
    type: EventType,
    prepared: PreparedPayload | string,
    times: ResolvedFields,
    id: string,
    sequence: number,
  ): void {
    try {
      if (this.endedBeforeStep(type)) return;
      if (typeof prepared === 'string') {
        this.refuse(type, prepared);
        return;
      }
      this.addPrepared(type, prepared, undefined, id, sequence, times.startedAtMs, times);
    } catch (internal) {
      this.internalError('step', internal);
    }
  }

  /**
   * Records an ended step whose payload is the instrumentation's own (SessionStep.record): its
   * times are numbers already, no Date made.
   */
  endStep(
    type: EventType,
    build: () => unknown,
    times: ResolvedFields,
    id: string,
    sequence: number,
  ): void {
    try {
      if (this.endedBeforeStep(type)) return;
      let payload: unknown;
      try {
        payload = build();
      } catch (thrown) {
        this.refuse(type, `describe() threw: ${errorText(thrown, 200)}`);
        return;
      }
      this.add(type, payload, undefined, id, sequence, times.startedAtMs, times, true);
    } catch (internal) {
      this.internalError('step', internal);
    }
  }

  /**
   * Ended first, refused second, as for a step recorded at once: a step that ends after the
   * session did is told as such (and its payload not built), not counted invalid. finish()
   * settles the waiting steps before the status changes, so a step that finds the session ended
   * when it is recorded ended after it.
   */
  private endedBeforeStep(type: EventType): boolean {
    if (this.traceStatus === 'running') return false;
    this.refuseAfterEnd(type);
    return true;
  }

  end(options?: EndOptions): void {
    try {
      this.finish('completed', options, null);
    } catch (error) {
      this.internalError('end', error);
      this.finishPlainly('completed', null);
    }
  }

  fail(error: unknown, options?: EndOptions): void {
    // errorText never throws: whatever was thrown (an Error, a string, an object whose message
    // is not text, null, undefined) becomes a message, and the session ends as errored.
    const message = errorText(error, TEXT_MAX_LENGTH);
    try {
      this.finish('errored', options, message);
    } catch (internal) {
      this.internalError('fail', internal);
      this.finishPlainly('errored', message);
    }
  }

  snapshot(): Trace {
    this.host.pendingSteps.settle();
    const a = this.aggregates;
    return {
      id: this.identity.traceId,
      agentId: this.identity.agentId,
      status: this.traceStatus,
      startedAt: this.startedAtText,
      inputSummary: this.identity.inputSummary,
      endedAt: this.endedAtText,
      durationMs: this.durationMs,
      outputSummary: this.outputSummary,
      errorMessage: this.errorMessage,
      tags: [...this.identity.tags],
      eventCount: a.eventCount,
      totalTokens: a.totalTokens,
      totalCostUsd: a.totalCostUsd(),
      totalLamports: a.totalLamports(),
      chainTxCount: a.chainTxCount,
      toolsCalled: a.toolsCalled(),
      anchorSignature: null,
      anchorSlot: null,
      merkleProof: null,
      traceHash: null,
      shareToken: null,
    };
  }

  snapshotBytes(): number {
    return (
      this.fixedBytes +
      this.aggregates.toolsBytes +
      (this.outputSummary?.length ?? 0) +
      (this.errorMessage?.length ?? 0)
    );
  }

  /**
   * The hot path: check, copy the payload (so later changes to the host's object change nothing
   * recorded), time, aggregate, hand to the buffer. False when refused. Everything read
   * from the host's objects is read inside one guard, before any total changes: a getter or Proxy
   * trap that throws refuses the event (counted in invalidEvents) and leaves the trace as it was.
   */
  private add(
    type: EventType,
    payload: unknown,
    fields: EventFields | undefined,
    id: string,
    sequence: number,
    now: number = Date.now(),
    times?: ResolvedFields,
    own = false,
  ): boolean {
    if (this.traceStatus !== 'running') return this.refuseAfterEnd(type);
    const prepared = this.prepare(type, payload, id, own);
    if (typeof prepared === 'string') return this.refuse(type, prepared);
    return this.addPrepared(type, prepared, fields, id, sequence, now, times);
  }

  /**
   * Checks a payload, copies it (unless it is the instrumentation's own) and reads its totals,
   * or says why it is refused. Everything read from the host's objects is read here, inside one
   * guard: a getter or Proxy trap that throws refuses the event.
   */
  private prepare(
    type: EventType,
    payload: unknown,
    id: string,
    own: boolean,
  ): PreparedPayload | string {
    try {
      if (typeof payload !== 'object' || payload === null || !isPayloadOf(type, payload))
        return `payload is not a valid ${type} payload: ${payloadProblem(type, payload)}`;
      const recorded = this.recordedPayload(type, payload, id, own);
      if (typeof recorded === 'string') return recorded;
      const totals = totalsOf(type, payload);
      if (typeof totals === 'string') return totals;
      return { recorded, totals };
    } catch (error) {
      return `reading the payload or its fields threw: ${errorText(error, 200)}`;
    }
  }

  /** The event of a prepared payload, timed, aggregated and handed to the buffer. */
  private addPrepared(
    type: EventType,
    prepared: PreparedPayload,
    fields: EventFields | undefined,
    id: string,
    sequence: number,
    now: number,
    times?: ResolvedFields,
  ): boolean {
    if (this.traceStatus !== 'running') return this.refuseAfterEnd(type);
    let event: RecordedEvent;
    try {
      const made = this.eventOf(type, prepared.recorded, id, sequence, now, fields, times);
      if (typeof made === 'string') return this.refuse(type, made);
      event = made;
    } catch (error) {
      return this.refuse(type, `reading the payload or its fields threw: ${errorText(error, 200)}`);
    }
    this.aggregate(type, prepared.totals);
    this.host.accept(this, event);
    return true;
  }

  /**
   * The payload as it is recorded, read now, not at flush time: what is sent is the payload as
   * it is at this call, whatever the host does with its object afterwards (reuse it, change it,
   * put a BigInt in it). The walk copies it into a JSON-ready tree (cheaper than serialising
   * here; the text is made at flush time, from the copy) and refuses what JSON or the service
   * cannot take: why, as a string. A payload over maxEventBytes becomes a truncation marker.
   */
  private recordedPayload(
    type: EventType,
    payload: object,
    id: string,
    own: boolean,
  ): PayloadSnapshot | string {
    let snapshot: PayloadSnapshot | number;
    try {
      // A payload the instrumentation built is its own already: measured, not copied.
      if (own) {
        const measured = measureOwnPayload(payload, this.host.maxEventBytes);
        snapshot = measured >= 0 ? { value: payload, bytes: measured } : measured;
      } else snapshot = snapshotPayload(payload, this.host.maxEventBytes);
    } catch (error) {
      return `payload cannot be serialised: ${errorText(error, 200)}`;
    }
    if (snapshot === TOO_DEEP) return 'payload nests deeper than 64 levels (or refers to itself)';
    if (snapshot === HOLDS_BIGINT) return 'payload holds a BigInt value (convert it to a string)';
    if (snapshot === NOT_AN_OBJECT)
      return 'payload does not serialise to a JSON object (check its toJSON)';
    if (typeof snapshot !== 'number') return snapshot;
    this.host.warnings.throttled(
      'event-too-large',
      WARN_INTERVAL_MS,
      `a ${type} payload is larger than maxEventBytes (${this.host.maxEventBytes}); it is replaced by a truncation marker`,
      { traceId: this.traceId, eventId: id },
    );
    return {
      value: { truncated: true, reason: `larger than maxEventBytes (${this.host.maxEventBytes})` },
      bytes: 100,
    };
  }

  /** The event with its times: an instrumentation's, the caller's fields, or an instant now. */
  private eventOf(
    type: EventType,
    payload: PayloadSnapshot,
    id: string,
    sequence: number,
    now: number,
    fields: EventFields | undefined,
    times: ResolvedFields | undefined,
  ): RecordedEvent | string {
    const eventBytes =
      EVENT_OVERHEAD + this.traceId.length + sealedBytes(payload.bytes, this.host.sealing);
    if (times !== undefined) {
      // A step an instrumentation timed: numbers from its clocks, checked like given dates.
      const problem = timesProblem(times);
      if (problem !== undefined) return problem;
      return {
        id,
        traceId: this.traceId,
        sequence,
        type,
        startedAtMs: times.startedAtMs,
        endedAtMs: times.endedAtMs,
        durationMs: times.durationMs,
        status: times.status,
        errorMessage: times.errorMessage,
        parentEventId: times.parentEventId,
        payload: payload.value,
        payloadBytes: payload.bytes,
        bytes: eventBytes + (times.errorMessage?.length ?? 0),
      };
    }
    if (fields === undefined) {
      // The common case, kept free of intermediate objects: an instant, ok, top level. The
      // host's clock is checked too (a mocked Date.now can be anything).
      if (!inRange(now)) return `the clock (Date.now()) is outside the ${RANGE}`;
      return {
        id,
        traceId: this.traceId,
        sequence,
        type,
        startedAtMs: now,
        endedAtMs: now,
        durationMs: 0,
        status: 'ok',
        errorMessage: null,
        parentEventId: null,
        payload: payload.value,
        payloadBytes: payload.bytes,
        bytes: eventBytes,
      };
    }
    const resolved = resolveFields(fields, now);
    if (typeof resolved === 'string') return resolved;
    return {
      id,
      traceId: this.traceId,
      sequence,
      type,
      startedAtMs: resolved.startedAtMs,
      endedAtMs: resolved.endedAtMs,
      durationMs: resolved.durationMs,
      status: resolved.status,
      errorMessage: resolved.errorMessage,
      parentEventId: resolved.parentEventId,
      payload: payload.value,
      payloadBytes: payload.bytes,
      bytes: eventBytes + (resolved.errorMessage?.length ?? 0),
    };
  }

  /** Adds an accepted event's totals to the trace's. */
  private aggregate(type: EventType, totals: EventTotals): void {
    switch (type) {
      case 'llm_call':
        this.aggregates.addLlmCall(totals.tokens, totals.cost);
        break;
      case 'chain_tx':
        if (this.aggregates.addChainTx(totals.lamports))
          this.host.warnings.throttled(
            'lamports-cap',
            WARN_INTERVAL_MS,
            `totalLamports of trace ${this.traceId} passed 80 digits, the most the service stores; it is kept at 10^80 − 1 from now on (the events are still sent)`,
            { traceId: this.traceId },
          );
        break;
      case 'tool_call':
        this.aggregates.addToolCall(totals.toolName);
        break;
      default:
        this.aggregates.addOther();
    }
  }

  private refuseAfterEnd(type: EventType): false {
    this.host.warnings.throttled(
      `after-end:${this.traceId}`,
      WARN_INTERVAL_MS,
      'an event recorded after the session ended is ignored',
      { traceId: this.traceId, type },
    );
    return false;
  }

  private refuse(type: EventType, reason: string): false {
    this.host.counters.invalidEvents += 1;
    // String(): an untyped caller's `type` may be anything, a Symbol included (which a template
    // literal would throw on).
    const label = String(type).slice(0, 40);
    this.host.warnings.throttled(
      `invalid:${label}:${reason.slice(0, 60)}`,
      WARN_INTERVAL_MS,
      `${label} event dropped: ${reason}`,
      { traceId: this.traceId },
    );
    return false;
  }

  private finish(status: TraceStatus, options: unknown, error: string | null): void {
    // The calls that ended before this one are part of the trace it ends.
    this.host.pendingSteps.settle();
    if (this.traceStatus !== 'running') {
      this.host.warnings.throttled(
        `ended-twice:${this.traceId}`,
        WARN_INTERVAL_MS,
        `the session already ended as ${this.traceStatus}; end()/fail() is ignored`,
        { traceId: this.traceId },
      );
      return;
    }
    const endedAt = this.endOption(options, 'endedAt');
    const given = endedAt === undefined ? undefined : toMs(endedAt);
    if (endedAt !== undefined && given === undefined)
      this.host.warnings.throttled(
        'end-endedAt',
        WARN_INTERVAL_MS,
        `end: endedAt is not a valid Date (${RANGE}); using now`,
        { traceId: this.traceId },
      );
    const endedAtMs =
      given === undefined ? this.endNow() : Math.max(given, this.identity.startedAtMs);
    const summary = this.endOption(options, 'outputSummary');
    if (summary !== undefined && summary !== null && typeof summary !== 'string')
      this.host.warnings.throttled(
        'end-output-summary',
        WARN_INTERVAL_MS,
        'end: outputSummary must be a string or null; it is left empty',
        { traceId: this.traceId },
      );
    this.outputSummary =
      typeof summary === 'string' ? storableText(summary, TEXT_MAX_LENGTH) : null;
    this.errorMessage = error;
    this.endedAtText = new Date(endedAtMs).toISOString();
    this.durationMs = endedAtMs - this.identity.startedAtMs;
    this.traceStatus = status;
    this.host.touch(this);
    this.host.requestFlush();
  }

  /** Now as an end time: never before the start, and a clock outside the range counts as the start. */
  private endNow(): number {
    const now = Date.now();
    return inRange(now) ? Math.max(now, this.identity.startedAtMs) : this.identity.startedAtMs;
  }

  /**
   * The last resort of end()/fail() when `finish` failed (a bug of ours): the session still ends,
   * now, without the options, as the README promises.
   */
  private finishPlainly(status: TraceStatus, error: string | null): void {
    if (this.traceStatus !== 'running') return;
    try {
      const endedAtMs = this.endNow();
      this.endedAtText = new Date(endedAtMs).toISOString();
      this.durationMs = endedAtMs - this.identity.startedAtMs;
      this.outputSummary = null;
      this.errorMessage = error;
      this.traceStatus = status;
      this.host.touch(this);
      this.host.requestFlush();
    } catch (internal) {
      this.internalError('end (plainly)', internal);
    }
  }

  /**
   * One option of end()/fail(), read safely: the session must end even when the options are odd,
   * so a non-object or a getter that throws is reported and counts as not given.
   */
  private endOption(options: unknown, key: keyof EndOptions): unknown {
    if (options === undefined || options === null) return undefined;
    if (typeof options !== 'object') {
      this.host.warnings.throttled(
        `end-options:${this.traceId}`,
        WARN_INTERVAL_MS,
        'end: options must be an object; they are ignored',
        { traceId: this.traceId },
      );
      return undefined;
    }
    try {
      return (options as Record<string, unknown>)[key];
    } catch (error) {
      this.host.warnings.throttled(
        `end-option-threw:${key}`,
        WARN_INTERVAL_MS,
        `end: reading ${key} threw (${errorText(error, 200)}); it is left out`,
        { traceId: this.traceId },
      );
      return undefined;
    }
  }

  private internalError(where: string, error: unknown): void {
    this.host.warnings.throttled(
      `internal:${where}`,
      WARN_INTERVAL_MS,
      `internal error in session.${where}; the call was ignored`,
      { error: errorText(error, 500) },
    );
  }
}
