import { AsyncLocalStorage } from 'node:async_hooks';
import type { EventType } from '@flightlog/protocol';
import type { FlightlogSession, PayloadByType } from '../session-types.js';
import {
  OPEN_STEP,
  currentStepOf,
  installStepScope,
  type CurrentStep,
  type OpenStep,
} from '../step-scope.js';

/*
 * The shared core of the instrumentations: one recorded step per SDK call. Loading this module
 * (any instrumentation does) installs the tracking of the current step, so that SDK calls nest
 * under the `session.timed` step of the host's they run inside. An SDK call is a leaf: it reads
 * the current step but sets none (nothing a model, MCP, Solana or x402 call does in turn is
 * recorded), so a program that never uses `timed` never turns the storage on — on Node 20 its
 * hooks cost every promise of the process, several µs per SDK call.
 */
const storage = new AsyncLocalStorage<CurrentStep>();
installStepScope({
  run: (step, fn) => storage.run(step, fn),
  current: () => storage.getStore(),
});

/** One SDK call being recorded. Every method is safe: none throws, and only the first end counts. */
export interface ObservedStep<P> {
  /** The event id reserved for the call ('' when the session records nothing). */
  readonly eventId: string;
  /** Ends the step as ok; `build` makes the payload (a throw costs the event only, with a warning). */
  ok(build: () => P): void;
  /** Ends the step as an error with `error`'s message (whatever was thrown). */
  fail(build: () => P, error: unknown): void;
  /** True once ok or fail was called. */
  readonly ended: boolean;
}

const NO_STEP_ID = '';

/**
 * Starts recording one call of `type` in `session`: the start time is now, the parent is the
 * step running now in the same trace. Returns undefined when anything about the session is
 * unusable (then the host's call runs unrecorded). Timing, the event's place in the sequence,
 * status, error message, checks, encryption and the never-throw rule are the session's own.
 * `own`: every payload built for the step is a fresh tree of the instrumentation's own plain
 * objects, arrays, strings, finite numbers and booleans, which nothing changes afterwards (what
 * `llmCallPayload` makes): the session records it as it is, without copying it.
 */
export function beginStep<K extends EventType>(
  session: FlightlogSession,
  type: K,
  own = false,
): ObservedStep<PayloadByType[K]> | undefined {
  try {
    const traceId = session.traceId;
    if (typeof traceId !== 'string') return undefined;
    const open = (session as { [OPEN_STEP]?: unknown })[OPEN_STEP];
    if (typeof open === 'function') {
      // The session's own step is one (no wrapper made per call).
      return open.call(session, type, own) as OpenStep<PayloadByType[K]> | undefined;
    }
    return timedStep(session, type, traceId);
  } catch {
    return undefined;
  }
}

/**
 * The same on a session of another make (a wrapper of the host's, say), through its public
 * `timed`: recorded one microtask after it ends.
 */
function timedStep<K extends EventType>(
  session: FlightlogSession,
  type: K,
  traceId: string,
): ObservedStep<PayloadByType[K]> {
  let build: (() => PayloadByType[K]) | undefined;
  let settle: ((ok: boolean, error?: unknown) => void) | undefined;
  const settled = new Promise<void>((resolve, reject) => {
    settle = (ok, error) => (ok ? resolve() : reject(error));
  });
  // A disabled client's timed never watches this promise: its rejection must not be unhandled.
  settled.catch(ignore);
  let eventId = NO_STEP_ID;
  void session.timed(
    type,
    (span) => {
      eventId = typeof span?.eventId === 'string' ? span.eventId : NO_STEP_ID;
      return settled;
    },
    () => (build as () => PayloadByType[K])(),
    { parentEventId: currentStepOf(traceId) },
  );
  let ended = false;
  const end = (ok: boolean, payload: () => PayloadByType[K], error?: unknown) => {
    if (ended) return;
    ended = true;
    build = payload;
    settle?.(ok, error);
  };
  return {
    get eventId() {
      return eventId;
    },
    get ended() {
      return ended;
    },
    ok: (payload) => end(true, payload),
    fail: (payload, error) => end(false, payload, error),
  };
}

function ignore(): void {}

/**
 * Runs an instrumented call: `start` begins the step (undefined: run unrecorded), `call` invokes
 * the original (exactly once, whatever happens here), `observe` watches what it returned. A
 * synchronous throw of the original is recorded and rethrown as it is; a failure of ours never
 * reaches the host.
 */
export function instrumentCall<P, R>(
  start: () => ObservedStep<P> | undefined,
  call: () => R,
  observe: (step: ObservedStep<P>, result: R) => void,
  failed: (step: ObservedStep<P>, error: unknown) => void,
): R {
  let step: ObservedStep<P> | undefined;
  try {
    step = start();
  } catch {
    step = undefined;
  }
  if (step === undefined) return call();
  let result: R;
  try {
    result = call();
  } catch (error) {
    guard(() => failed(step, error));
    throw error;
  }
  guard(() => observe(step, result));
  return result;
}

/** Runs instrumentation code that must never throw into the host. */
export function guard(fn: () => void): void {
  try {
    fn();
  } catch {
    // An instrumentation bug costs the event, never the host's call.
  }
}

/** A promise of this realm's own Promise (never a thenable whose `then` may do work). */
export function isNativePromise(value: unknown): value is Promise<unknown> {
  return value instanceof Promise && Object.getPrototypeOf(value) === Promise.prototype;
}

/** Watches a native promise with the intrinsic `then` (which only registers callbacks). */
export function watchPromise(
  promise: Promise<unknown>,
  onValue: (value: unknown) => void,
  onError: (error: unknown) => void,
): void {
  void Promise.prototype.then.call(
    promise,
    (value: unknown) => guard(() => onValue(value)),
    (error: unknown) => guard(() => onError(error)),
  );
}
