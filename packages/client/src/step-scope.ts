/**
 * The step a piece of code runs inside, so that an instrumented SDK call nests under it without
 * the host passing `parentEventId` by hand. The main entry point does not track it itself: the
 * tracking (an `AsyncLocalStorage`, whose hooks cost every promise of the process something on
 * Node 20) is installed only when an instrumentation (`@flightlog/client/openai`, …) is imported.
 * Until then `runInStep` is a plain call.
 */

/** The event a step records, and its trace. */
export interface CurrentStep {
  readonly traceId: string;
  readonly eventId: string;
}

/** What keeps the current step across `await`s. */
export interface StepScope {
  run<R>(step: CurrentStep, fn: () => R): R;
  current(): CurrentStep | undefined;
}

let installed: StepScope | undefined;

/** Installs the tracking once; later calls keep the first (one process, one current step). */
export function installStepScope(scope: StepScope): void {
  installed ??= scope;
}

/** Runs `fn` as the step `step` (a plain call while no instrumentation is loaded). */
export function runInStep<R>(step: CurrentStep, fn: () => R): R {
  return installed === undefined || step.eventId === '' ? fn() : installed.run(step, fn);
}

/** The id of the step running now in trace `traceId`, or null (a step of another trace is none). */
export function currentStepOf(traceId: string): string | null {
  const step = installed?.current();
  return step !== undefined && step.traceId === traceId ? step.eventId : null;
}

/**
 * How the instrumentations open a step on a session of this package: the event's id, sequence
 * number, parent and start are taken now, and the end when `end` is called. The step is then
 * recorded on the next turn of the event loop — a payload that is not the instrumentation's own
 * (`own`) built, checked and copied at `end` already — and in any case before anything reads the
 * session or its client (ending the session right after loses nothing; see pending-steps.ts).
 * Not part of the public API: a session of another make is driven through `timed`.
 */
export const OPEN_STEP: unique symbol = Symbol('flightlog.openStep');

/** A step opened with {@link OPEN_STEP}: what an instrumentation's `ObservedStep` is. */
export interface OpenStep<P> {
  /** The event's id ('' when the session records nothing). */
  readonly eventId: string;
  /** Records the step (the first call only); `build` makes the payload, a throw costs the event. */
  end(ok: boolean, build: () => P, error?: unknown): void;
  /** `end(true, build)`. */
  ok(build: () => P): void;
  /** `end(false, build, error)`. */
  fail(build: () => P, error: unknown): void;
  /** True once ended. */
  readonly ended: boolean;
}
