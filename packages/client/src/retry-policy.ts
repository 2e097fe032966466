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
 * `Retry-After` is a lower bound on it, never a way around it: `Retry-After: 0` (or a date in the
 * past) from a server in trouble must not turn the retries into a burst that ends the batch's
 * chances within milliseconds. A longer one is honoured, capped at `maxDelayMs` (so a bogus hour
 * does not stall the client; the service itself sends 1 s).
 */
export function retryDelayMs(
  policy: RetryPolicy,
  attempt: number,
  retryAfterMs: number | undefined,
  random: () => number = Math.random,
): number {
  const exponential = Math.min(
    policy.maxDelayMs,
    policy.initialDelayMs * 2 ** Math.min(Math.max(attempt - 1, 0), 30),
  );
  const backoff = Math.round(exponential * (0.5 + random() * 0.5));
  if (retryAfterMs === undefined || !(retryAfterMs > backoff)) return backoff;
  return Math.min(retryAfterMs, policy.maxDelayMs);
}

/** delay-seconds: digits only (RFC 9110 §10.2.3); a sign, a fraction or an exponent is not one. */
const DELAY_SECONDS = /^\d+$/;
/** The three HTTP-date forms (RFC 9110 §5.6.7): IMF-fixdate, the obsolete RFC 850 and asctime. */
const HTTP_DATE = [
  /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/,
  /^[A-Z][a-z]{5,8}, \d{2}-[A-Z][a-z]{2}-\d{2} \d{2}:\d{2}:\d{2} GMT$/,
  /^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}$/,
];

/**
 * Reads a `Retry-After` header: delay-seconds or an HTTP date (RFC 9110), as milliseconds from
 * `now` (0 for a date in the past). Undefined when absent or not one of those forms (`-1`, `1.5`,
 * `soon`): an invalid value is ignored, as if the header were not there, rather than guessed at
 * (`Date.parse` reads `-1` as a year).
 */
export function parseRetryAfter(
  value: string | null,
  now: number = Date.now(),
): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (DELAY_SECONDS.test(text)) return Number(text) * 1_000;
  if (!HTTP_DATE.some((form) => form.test(text))) return undefined;
  const date = parseHttpDate(text);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}

/** An HTTP date in one of its three forms, as epoch ms (NaN when it names no real instant). */
function parseHttpDate(text: string): number {
  // asctime carries no zone: it is GMT. RFC 850's two-digit year is read as 20xx below 50 and
  // 19xx from 50, which is right for any date a server sends today.
  return Date.parse(text.endsWith('GMT') ? text : `${text} GMT`);
}
