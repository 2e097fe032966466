/** When and how often a request that may succeed later is tried again. */
export interface RetryPolicy {
  initialDelayMs: number;
  maxDelayMs: number;
  maxAttempts: number;
}

/**
 * Delay before attempt `attempt + 1`, after `attempt` failed attempts (1 for the first retry):
 * exponential (initial × 2^(attempt−1), capped at `maxDelayMs`) with jitter between half and the
 * full value, so clients that failed together do not come back together. A server's
 * `Retry-After` wins when given (capped at `maxDelayMs`, so a bogus hour does not stall the
 * client; the service itself sends 1 s).
 */
export function retryDelayMs(
  policy: RetryPolicy,
  attempt: number,
  retryAfterMs: number | undefined,
  random: () => number = Math.random,
): number {
  if (retryAfterMs !== undefined) return Math.min(Math.max(retryAfterMs, 0), policy.maxDelayMs);
  const exponential = Math.min(
    policy.maxDelayMs,
    policy.initialDelayMs * 2 ** Math.min(Math.max(attempt - 1, 0), 30),
  );
  return Math.round(exponential * (0.5 + random() * 0.5));
}

/**
 * Reads a `Retry-After` header: delay-seconds or an HTTP date (RFC 9110). Undefined when absent
 * or unreadable.
 */
export function parseRetryAfter(
  value: string | null,
  now: number = Date.now(),
): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1_000;
  const date = Date.parse(text);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}
