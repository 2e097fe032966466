import { describe, expect, it } from 'vitest';
import { parseRetryAfter, retryDelayMs } from '../../src/retry-policy.js';

const policy = { initialDelayMs: 250, maxDelayMs: 30_000, maxAttempts: 10 };

describe('retry schedule', () => {
  it('doubles from initialDelayMs up to maxDelayMs, with jitter between half and the full delay', () => {
    const high = Array.from({ length: 10 }, (_, i) =>
      retryDelayMs(policy, i + 1, undefined, () => 1),
    );
    expect(high).toEqual([250, 500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]);
    const low = Array.from({ length: 4 }, (_, i) =>
      retryDelayMs(policy, i + 1, undefined, () => 0),
    );
    expect(low).toEqual([125, 250, 500, 1_000]);
    for (let i = 0; i < 100; i++) {
      const delay = retryDelayMs(policy, 3, undefined);
      expect(delay).toBeGreaterThanOrEqual(500);
      expect(delay).toBeLessThanOrEqual(1_000);
    }
  });

  it('honours a longer Retry-After (seconds or an HTTP date), capped at maxDelayMs', () => {
    expect(retryDelayMs(policy, 1, 1_000)).toBe(1_000);
    expect(retryDelayMs(policy, 5, 0, () => 1)).toBe(4_000); // a lower bound, not a way around
    expect(retryDelayMs(policy, 1, 3_600_000)).toBe(30_000);
    const now = Date.parse('2026-11-22T10:00:00Z');
    expect(parseRetryAfter('1', now)).toBe(1_000);
    expect(parseRetryAfter(' 120 ', now)).toBe(120_000);
    expect(parseRetryAfter('Sun, 22 Nov 2026 10:00:05 GMT', now)).toBe(5_000);
    expect(parseRetryAfter('Sun, 22 Nov 2026 09:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter(null, now)).toBeUndefined();
  });
});
