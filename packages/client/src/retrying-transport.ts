import type { Transport, TransportOutcome } from './http-transport.js';
import { retryDelayMs, type RetryPolicy } from './retry-policy.js';
import { timerDelay } from './timer-delay.js';

/** A `retryable` outcome: a request that may succeed later. */
export type RetryableOutcome = Extract<TransportOutcome, { kind: 'retryable' }>;

/** How a {@link RetryingTransport} call ended: the last outcome, and the requests it took. */
export interface RetriedOutcome {
  /** `ok`, `failed`, or `retryable` when the attempts ran out or the call was aborted. */
  outcome: TransportOutcome;
  /** Requests made (0 when the call was aborted before the first). */
  attempts: number;
}

/** One call's options. */
export interface RetryOptions {
  /** Ends the call: the request in flight is aborted, a wait cut short, no attempt follows. */
  signal: AbortSignal;
  /**
   * Refusals in a row that came before this call and are resent by it (the pieces of a batch
   * split after a 413): its first request waits as a retry after that many failures would.
   * Default 0 (the first request goes at once).
   */
  failuresBefore?: number;
  /** Told before each wait, to count and report the retry. */
  onRetry?: (outcome: RetryableOutcome, attempt: number, delayMs: number) => void;
}

/** The outcome of a call aborted before (or between) its requests. */
const ABORTED: RetryableOutcome = { kind: 'retryable', reason: 'aborted' };

/**
 * Waits `ms` on an unref'd timer, cut short when `signal` aborts. Unref'd: a wait never keeps the
 * host's process alive by itself; whoever is awaited on the host's behalf (an awaited flush,
 * close or completeTrace, the exit flush) holds the process with a timer of its own.
 */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, timerDelay(ms));
    timer.unref();
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * The one retry loop of the client, in front of a {@link Transport} (the model is OpenTelemetry's
 * `RetryingTransport` in front of its HTTP transport): the batch exporter and `completeTrace()`
 * both send through it, so both follow the same schedule. A `retryable` outcome (network error,
 * timeout, 408, 429, 5xx) is tried again after {@link retryDelayMs} — exponential backoff with
 * jitter, with the server's `Retry-After` as a lower bound — until `maxAttempts` requests were
 * made; `ok` and `failed` end the call at once. Never throws: outcomes are values.
 */
export class RetryingTransport {
  constructor(
    private readonly transport: Transport,
    private readonly policy: RetryPolicy,
    private readonly random: () => number = Math.random,
  ) {}

  /** POST /v1/traces/batch with the same gzip body on every attempt (the same batchId). */
  sendBatch(body: Buffer, options: RetryOptions): Promise<RetriedOutcome> {
    return this.send((signal) => this.transport.sendBatch(body, signal), options);
  }

  /** POST /v1/traces/:id/complete. */
  complete(traceId: string, body: object, options: RetryOptions): Promise<RetriedOutcome> {
    return this.send((signal) => this.transport.complete(traceId, body, signal), options);
  }

  /** Releases the transport's connections once the client is closed. */
  close(): void {
    this.transport.close?.();
  }

  private async send(
    request: (signal: AbortSignal) => Promise<TransportOutcome>,
    { signal, failuresBefore = 0, onRetry }: RetryOptions,
  ): Promise<RetriedOutcome> {
    if (failuresBefore > 0)
      await pause(retryDelayMs(this.policy, failuresBefore, undefined, this.random), signal);
    for (let attempts = 1; ; attempts++) {
      if (signal.aborted) return { outcome: ABORTED, attempts: attempts - 1 };
      const outcome = await request(signal);
      if (outcome.kind !== 'retryable' || attempts >= this.policy.maxAttempts || signal.aborted)
        return { outcome, attempts };
      const delay = retryDelayMs(this.policy, attempts, outcome.retryAfterMs, this.random);
      onRetry?.(outcome, attempts, delay);
      await pause(delay, signal);
    }
  }
}
