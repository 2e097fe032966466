import type { EventType } from '@flightlog/protocol';
import type {
  EndOptions,
  EventFields,
  FlightlogSession,
  PayloadByType,
  TimedOutcome,
  TimedSpan,
} from './session-types.js';
import { OPEN_STEP, type OpenStep } from './step-scope.js';

const NO_STEP: OpenStep<never> = { eventId: '', ended: false, end() {}, ok() {}, fail() {} };

/**
 * The session of a disabled client: every call is a cheap no-op that returns `''`, and `timed`
 * only runs the wrapped function and returns exactly what it returned (the same object: a
 * promise or any other thenable is passed through untouched) or throws what it threw, as an
 * enabled session does. Nothing is kept, so nothing can leak.
 */
export class NoopSession implements FlightlogSession {
  readonly status = 'running' as const;

  constructor(readonly traceId: string) {}

  llmCall(): string {
    return '';
  }
  toolCall(): string {
    return '';
  }
  chainTx(): string {
    return '';
  }
  x402Payment(): string {
    return '';
  }
  mcpCall(): string {
    return '';
  }
  custom(): string {
    return '';
  }
  record<K extends EventType>(_type: K, _payload: PayloadByType[K], _fields?: EventFields): string {
    return '';
  }
  timed<K extends EventType, R>(
    _type: K,
    run: (span: TimedSpan) => R,
    _describe: (outcome: TimedOutcome<R>) => PayloadByType[K],
  ): R {
    // A run that is not a function gives undefined, as on an enabled client, never a TypeError.
    return typeof run === 'function'
      ? run({ eventId: '', traceId: this.traceId })
      : (undefined as R);
  }
  /** Instrumented calls run unrecorded, without tracking a current step. */
  [OPEN_STEP](): OpenStep<never> {
    return NO_STEP;
  }
  end(_options?: EndOptions): void {}
  fail(_error: unknown, _options?: EndOptions): void {}
}
