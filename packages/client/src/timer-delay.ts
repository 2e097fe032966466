/**
 * The longest delay Node's timers hold: 2^31 − 1 ms (about 24.8 days). A longer one is not
 * honoured but replaced by 1 ms, with a TimeoutOverflowWarning on the host's stderr.
 */
export const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

/**
 * A delay every timer of the client goes through: clamped to what a timer can hold (so
 * `close({ timeoutMs: Number.MAX_SAFE_INTEGER })` waits as long as possible instead of giving up
 * at once), and 0 for negative or NaN values.
 */
export function timerDelay(ms: number): number {
  if (ms > MAX_TIMER_DELAY_MS) return MAX_TIMER_DELAY_MS;
  return ms >= 0 ? ms : 0;
}
