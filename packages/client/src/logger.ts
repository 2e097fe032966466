import { redactUrls } from './redact.js';
import { errorText } from './storable-text.js';

/**
 * Where the client reports its problems. It never throws them into the host program. `warn` may
 * also be `async`: a returned promise that rejects is caught, as is a synchronous throw.
 */
export interface FlightlogLogger {
  warn(message: string, context?: object): void;
}

const WINDOW_MS = 60_000;
const PER_WINDOW = 20;

/**
 * The default logger: `console.warn` with a `[flightlog]` prefix, at most 20 lines a minute, so a
 * service that is down for an hour cannot flood the host's logs; what was held back is counted on
 * the next line that gets through.
 */
export function createConsoleLogger(now: () => number = Date.now): FlightlogLogger {
  let windowStart = -Infinity;
  let printed = 0;
  let suppressed = 0;
  return {
    warn(message, context) {
      const at = now();
      if (at - windowStart >= WINDOW_MS) {
        windowStart = at;
        printed = 0;
      }
      if (printed >= PER_WINDOW) {
        suppressed += 1;
        return;
      }
      printed += 1;
      const note = suppressed > 0 ? ` (${suppressed} earlier warnings suppressed)` : '';
      suppressed = 0;
      if (context === undefined) console.warn(`[flightlog] ${message}${note}`);
      else console.warn(`[flightlog] ${message}${note}`, context);
    },
  };
}

/** The string values of a context, redacted (contexts are flat: ids, counts, details). */
function redactContext(context: object): object {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(context))
    out[key] = typeof value === 'string' ? redactUrls(value) : value;
  return out;
}

/** How many held-back warnings of different keys one summary line names. */
const SUMMARY_KEYS = 10;

/** How often a repeated warning of one kind is shown at most (the rest are counted). */
export const WARN_INTERVAL_MS = 10_000;

/**
 * The client's single way out to a logger. A logger that throws (or is replaced by something that
 * is not a logger) cannot take the client, or the host calling it, down with it. Every line is
 * stripped of URL credentials here (a refused `ingestUrl`, a redirect's `Location`, a service's
 * problem detail), whatever its origin. Warnings of one `key` can be limited to one per interval,
 * with the number of repeats attached to the next one, and {@link reportHeldBack} tells what is
 * still held back, so no count is lost.
 */
export class WarningChannel {
  private readonly lastByKey = new Map<
    string,
    { at: number; repeats: number; message: string; intervalMs: number }
  >();

  constructor(
    private readonly logger: FlightlogLogger,
    private readonly now: () => number = Date.now,
  ) {}

  warn(message: string, context?: object): void {
    try {
      const line = redactUrls(message);
      const details = context === undefined ? undefined : redactContext(context);
      // The interface says void, but an `async warn` (or one returning a promise) is common: its
      // rejection would be unhandled and could end the host process, so it is caught here.
      const result: unknown = this.logger.warn(line, details);
      if (isThenable(result)) result.then(undefined, ignore);
    } catch {
      // A broken logger leaves us nowhere to report to; the host must not pay for it.
    }
  }

  /**
   * Runs `work` now; anything it throws goes to the logger instead of up the stack. For the
   * callbacks the client schedules itself (timers, immediates, promise continuations), where a
   * throw would otherwise become an uncaught exception or unhandled rejection in the host.
   */
  guard(where: string, work: () => void): void {
    try {
      work();
    } catch (error) {
      this.throttled(`internal:${where}`, 10_000, `internal error in ${where}; it was skipped`, {
        error: errorText(error, 500),
      });
    }
  }

  /** At most one warning of this key per `intervalMs`; later ones carry `repeats` (the skipped count). */
  throttled(key: string, intervalMs: number, message: string, context?: object): void {
    const at = this.now();
    const last = this.lastByKey.get(key);
    if (last && at - last.at < intervalMs) {
      last.repeats += 1;
      return;
    }
    const repeats = last?.repeats ?? 0;
    if (!last && this.lastByKey.size >= 256) this.lastByKey.clear();
    this.lastByKey.set(key, { at, repeats: 0, message, intervalMs });
    this.warn(message, repeats > 0 ? { ...context, repeatsSinceLastWarning: repeats } : context);
  }

  /**
   * One line naming the warnings the throttle held back since each was last shown, with their
   * counts (at most {@link SUMMARY_KEYS} kinds, the most repeated first), then forgets them: the
   * client calls it when it closes, where no later warning of the key would carry the count.
   * Warnings given {@link once} are not named: they were meant to be said once.
   */
  reportHeldBack(): void {
    const held = [...this.lastByKey.values()]
      .filter((entry) => entry.repeats > 0 && entry.intervalMs !== Infinity)
      .sort((a, b) => b.repeats - a.repeats);
    if (held.length === 0) return;
    const named = held
      .slice(0, SUMMARY_KEYS)
      .map((entry) => `${entry.repeats} × "${entry.message.slice(0, 200)}"`);
    const more = held.length > SUMMARY_KEYS ? `; and ${held.length - SUMMARY_KEYS} more kinds` : '';
    for (const entry of held) entry.repeats = 0;
    this.warn(`warnings held back by the throttle since last shown: ${named.join('; ')}${more}`);
  }

  /** Only the first warning of this key, ever. */
  once(key: string, message: string, context?: object): void {
    this.throttled(key, Infinity, message, context);
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

function ignore(): void {
  // A logger that failed has nowhere to report to.
}
