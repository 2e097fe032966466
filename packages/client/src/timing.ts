import { performance } from 'node:perf_hooks';
import type { EventFields } from './session-types.js';

/** When a timed step ran: wall-clock start and end, and its duration from a monotonic clock. */
export interface StepTiming {
  startedAtMs: number;
  endedAtMs: number;
  durationMs: number;
}

/** A running stopwatch for a step; `stop()` gives the fields to pass to an event helper. */
export interface Stopwatch {
  readonly startedAt: Date;
  /** Start, end and duration so far, as event fields (call it when the step finished). */
  stop(): Required<Pick<EventFields, 'startedAt' | 'endedAt' | 'durationMs'>>;
}

/**
 * Starts timing a step by hand, for code that cannot be wrapped in `session.timed`:
 * `const t = startTimer(); …; session.toolCall(payload, t.stop())`. The duration comes from a
 * monotonic clock, so a wall-clock adjustment during the step cannot make it negative.
 */
export function startTimer(): Stopwatch {
  const startedAtMs = Date.now();
  const t0 = performance.now();
  return {
    startedAt: new Date(startedAtMs),
    stop() {
      const durationMs = performance.now() - t0;
      return {
        startedAt: new Date(startedAtMs),
        endedAt: new Date(startedAtMs + Math.round(durationMs)),
        durationMs,
      };
    },
  };
}

/**
 * True for a promise of this realm's native `Promise` (what an `async` function returns), whose
 * `then` only registers callbacks. Other thenables are not observed: calling `then` on a lazy
 * query builder (Knex, Prisma) is what runs its query, so doing it behind the host's back would
 * run it early, or twice.
 */
function isNativePromise(value: unknown): value is Promise<unknown> {
  return value instanceof Promise && Object.getPrototypeOf(value) === Promise.prototype;
}

/**
 * Runs `run`, reports how it went to `settle`, and hands back exactly what `run` did: the very
 * value it returned (same object, so a promise stays the host's promise) or the very exception it
 * threw. For a native promise the outcome is observed with the intrinsic `then` (registering
 * callbacks only), so the event gets its real end, duration and status once the promise settles;
 * the promise returned is still the original. Observing it does mark a rejection as handled:
 * a rejected promise the host never awaits no longer reaches `unhandledRejection`.
 * Any other thenable is not touched (see {@link isNativePromise}): the step is settled as `ok`
 * when `run` returns, with the thenable as its value. `settle` must not throw.
 */
export function runTimed<R>(
  run: () => R,
  settle: (ok: boolean, valueOrError: unknown, timing: StepTiming) => void,
): R {
  const startedAtMs = Date.now();
  const t0 = performance.now();
  const finish = (ok: boolean, valueOrError: unknown) => {
    const durationMs = performance.now() - t0;
    settle(ok, valueOrError, {
      startedAtMs,
      endedAtMs: startedAtMs + Math.round(durationMs),
      durationMs,
    });
  };
  let result: R;
  try {
    result = run();
  } catch (error) {
    finish(false, error);
    throw error;
  }
  if (isNativePromise(result)) {
    // The intrinsic then, not `result.then`: an own `then` property on the instance is ignored.
    // The derived promise always fulfils (both callbacks return), so it never rejects unhandled.
    void Promise.prototype.then.call(
      result,
      (value: unknown) => settleQuietly(finish, true, value),
      (error: unknown) => settleQuietly(finish, false, error),
    );
    return result;
  }
  finish(true, result);
  return result;
}

/** A continuation of ours must not reject: its promise has no handler and would be unhandled. */
function settleQuietly(
  finish: (ok: boolean, valueOrError: unknown) => void,
  ok: boolean,
  valueOrError: unknown,
): void {
  try {
    finish(ok, valueOrError);
  } catch {
    // `settle` reports its own problems; nothing is left to do with one that escaped.
  }
}
