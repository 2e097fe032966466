import type {
  ChainTxPayload,
  CustomPayload,
  EventStatus,
  EventType,
  LlmCallPayload,
  McpCallPayload,
  ToolCallPayload,
  TraceStatus,
  X402PaymentPayload,
} from '@flightlog/protocol';

/** Options of {@link FlightlogClient.startSession}. One session is one trace. */
export interface SessionOptions {
  /** Human-readable description of the run; the trace title. Required. */
  inputSummary: string;
  /** Labels for filtering and grouping. Default `[]` (plus `env:<environment>` when set). */
  tags?: string[];
  /** Overrides the generated trace id (a ULID). 1–128 characters of `A–Z a–z 0–9 . _ : ~ -`. */
  traceId?: string;
  /** Overrides the client's `agentId` for this trace. */
  agentId?: string;
  /** Back-fills the start of the run. Default: now. */
  startedAt?: Date;
}

/**
 * The event's own fields, the optional second argument of every event helper. Defaults: the
 * event is recorded when it finished, so `endedAt` is now and `startedAt` is `endedAt` minus
 * `durationMs` (or `endedAt` itself: an instant); `endedAt: null` records a step still in
 * progress. `status` is `error` when `errorMessage` is given, else `ok`. Every time, given or
 * computed, must lie between 0001-01-01 and 9999-12-31 UTC (what the service stores): an event
 * whose times leave that range is refused with a warning and counted in `invalidEvents`.
 */
export interface EventFields {
  /** When the step started (a Date or an RFC 3339 date-time). Default: `endedAt − durationMs`. */
  startedAt?: Date | string;
  /** When the step ended; `null` while in progress. Default: now (or `startedAt + durationMs`). */
  endedAt?: Date | string | null;
  /** Milliseconds, 0 to 2^53 − 1; default: computed from the two dates when both are known. */
  durationMs?: number;
  status?: EventStatus;
  errorMessage?: string | null;
  /** Id of the enclosing event (returned by its helper, or `span.eventId` in `timed`). */
  parentEventId?: string | null;
}

/** The payload type of each event type. */
export interface PayloadByType {
  llm_call: LlmCallPayload;
  tool_call: ToolCallPayload;
  chain_tx: ChainTxPayload;
  x402_payment: X402PaymentPayload;
  mcp_call: McpCallPayload;
  custom: CustomPayload;
}

/** What a function wrapped by {@link FlightlogSession.timed} did. */
export type TimedOutcome<R> =
  { ok: true; value: R; durationMs: number } | { ok: false; error: unknown; durationMs: number };

/** Handed to a function wrapped by `timed`: its own event id, for nesting events under it. */
export interface TimedSpan {
  eventId: string;
  traceId: string;
}

/** Options of `end()`. */
export interface EndOptions {
  /** What the agent produced or decided. Default `null`. */
  outputSummary?: string | null;
  /**
   * When the run ended. Default: now (never before `startedAt`). Read with the intrinsic Date
   * getter (a subclass's own `getTime` is never called); anything else (a Proxy, an invalid or
   * out-of-range date, not a Date at all) is reported and replaced by now: the session ends all
   * the same.
   */
  endedAt?: Date;
}

/**
 * One agent run (one trace). Every method is safe to call in any state: nothing throws into the
 * host, and events after `end()`/`fail()` are ignored with a warning. The event helpers return
 * the new event's id (`''` when the client is disabled).
 */
export interface FlightlogSession {
  /** The trace id (the session's `traceId` option or a generated ULID). */
  readonly traceId: string;
  /** `running` until `end()` (`completed`) or `fail()` (`errored`). */
  readonly status: TraceStatus;
  /** Records an `llm_call`; `usage.totalTokens` and `costUsd` feed the trace totals. */
  llmCall(payload: LlmCallPayload, fields?: EventFields): string;
  /** Records a `tool_call`; `name` joins the trace's `toolsCalled`. */
  toolCall(payload: ToolCallPayload, fields?: EventFields): string;
  /** Records a `chain_tx`; `lamports` feeds `totalLamports`, and `chainTxCount` grows. */
  chainTx(payload: ChainTxPayload, fields?: EventFields): string;
  /** Records an `x402_payment`. */
  x402Payment(payload: X402PaymentPayload, fields?: EventFields): string;
  /** Records an `mcp_call`. */
  mcpCall(payload: McpCallPayload, fields?: EventFields): string;
  /** Records a `custom` event. */
  custom(payload: CustomPayload, fields?: EventFields): string;
  /** Records an event of any type (what the helpers above call). */
  record<K extends EventType>(type: K, payload: PayloadByType[K], fields?: EventFields): string;
  /**
   * Runs `run`, timing it, and records one event of `type` whose payload `describe` builds from
   * the outcome: start, end, duration, `ok`/`error` and the error's message. Returns exactly what
   * `run` returned (the very same object) or throws exactly what it threw. A native promise is
   * watched until it settles (which marks a rejection as handled); any other thenable is not
   * touched — its `then` is never called, so a lazy query does not run early — and the step ends
   * when `run` returns. The event's id is reserved when `run` starts (`span.eventId`), so events
   * recorded inside can name it as their `parentEventId`, and its sequence number places it
   * before them. Bad arguments never throw: a `run` that is not a function is refused with a
   * warning (counted in `invalidEvents`) and `undefined` comes back; a `describe` that is not a
   * function, or throws, costs the event only.
   */
  timed<K extends EventType, R>(
    type: K,
    run: (span: TimedSpan) => Promise<R>,
    describe: (outcome: TimedOutcome<R>) => PayloadByType[K],
    fields?: Pick<EventFields, 'parentEventId'>,
  ): Promise<R>;
  timed<K extends EventType, R>(
    type: K,
    run: (span: TimedSpan) => R,
    describe: (outcome: TimedOutcome<R>) => PayloadByType[K],
    fields?: Pick<EventFields, 'parentEventId'>,
  ): R;
  /** Ends the run as `completed` and triggers the final flush. */
  end(options?: EndOptions): void;
  /**
   * Ends the run as `errored`, and triggers the final flush. `error` may be anything thrown: its
   * message becomes the trace's `errorMessage` (`unknown error (null)` for `null`, and so on).
   */
  fail(error: unknown, options?: EndOptions): void;
}
