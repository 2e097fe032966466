import { INSTANT_MAX_MS, INSTANT_MIN_MS } from '@flightlog/protocol';

/** The range in words, for warnings. */
export const INSTANT_RANGE = 'years 0001 to 9999: the service stores 0001-01-01 to 9999-12-31 UTC';

/** True for an instant the service can store (NaN is not one). */
export function inRange(ms: number): boolean {
  return ms >= INSTANT_MIN_MS && ms <= INSTANT_MAX_MS;
}

const getTime = Date.prototype.getTime;

/**
 * The time of a Date as the service can store it, else undefined. Never throws: the intrinsic
 * `getTime` reads the date itself, so a subclass overriding `getTime`, a Date of another realm and
 * Proxy traps change nothing (a Proxy has no date inside, so it is not one; nor is any other
 * object).
 */
export function dateMs(value: unknown): number | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  let ms: number;
  try {
    ms = getTime.call(value);
  } catch {
    return undefined; // not a Date
  }
  return inRange(ms) ? ms : undefined;
}
