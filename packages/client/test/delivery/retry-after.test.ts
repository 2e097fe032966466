import { afterEach, describe, expect, it } from 'vitest';
import { FlightlogClient } from '../../src/index.js';
import { parseRetryAfter, retryDelayMs } from '../../src/retry-policy.js';
import { LoopbackServer } from '../harness/loopback-server.js';
import { RecordingLogger } from '@flightlog/test-support';

const policy = { initialDelayMs: 250, maxDelayMs: 30_000, maxAttempts: 10 };

describe('Retry-After is a lower bound on the backoff, never a way around it', () => {
  it('a Retry-After shorter than the backoff (0, a past date) leaves the backoff; a longer one wins, capped at maxDelayMs', () => {
    const low = () => 0;
    expect(retryDelayMs(policy, 1, 0, low)).toBe(125);
    expect(retryDelayMs(policy, 4, 0, low)).toBe(1_000);
    expect(retryDelayMs(policy, 4, 100, low)).toBe(1_000);
    expect(retryDelayMs(policy, 1, 1_000, low)).toBe(1_000);
    expect(retryDelayMs(policy, 1, 3_600_000, low)).toBe(30_000);
  });

  it('reads delay-seconds and HTTP dates; negative, fractional, signed or unreadable values are ignored', () => {
    const now = Date.parse('2026-11-22T10:00:00Z');
    expect(parseRetryAfter('0', now)).toBe(0);
    expect(parseRetryAfter(' 120 ', now)).toBe(120_000);
    expect(parseRetryAfter('Sun, 22 Nov 2026 10:00:05 GMT', now)).toBe(5_000);
    expect(parseRetryAfter('Sunday, 22-Nov-26 10:00:05 GMT', now)).toBe(5_000);
    expect(parseRetryAfter('Sun Nov 22 10:00:05 2026', now)).toBe(5_000);
    expect(parseRetryAfter('Sun, 22 Nov 2026 09:00:00 GMT', now)).toBe(0); // past: no wait asked
    for (const invalid of [
      '-1',
      '-5',
      '+3',
      '1.5',
      '1e3',
      '-0',
      'soon',
      '',
      '12 apples',
      'Sun, 22 Nov 2026 10:00:05',
    ])
      expect(parseRetryAfter(invalid, now), invalid).toBeUndefined();
    expect(parseRetryAfter(null, now)).toBeUndefined();
  });
});

describe('a 300 ms outage answered with a Retry-After that asks for no wait (loopback service)', () => {
  let server: LoopbackServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  for (const retryAfter of ['0', '-1', 'Thu, 01 Jan 1970 00:00:00 GMT', 'garbage']) {
    it(`Retry-After: ${retryAfter} — the default backoff rides it out and the batch arrives`, async () => {
      let firstAt: number | undefined;
      server = await new LoopbackServer((request) => {
        firstAt ??= request.at;
        return request.at - firstAt < 300
          ? { status: 503, headers: { 'retry-after': retryAfter }, body: { detail: 'restarting' } }
          : { status: 202, body: {} };
      }).start();
      const logger = new RecordingLogger();
      const client = new FlightlogClient({
        apiKey: 'flk_k',
        ingestUrl: server.url,
        logger,
        flushOnExit: false,
      });
      client.startSession({ inputSummary: 'outage' }).toolCall({ name: 'a' });
      const result = await client.close({ timeoutMs: 5_000 });
      expect(result).toEqual({ timedOut: false });
      // Before: 10 attempts within ~20 ms, and the batch was given up.
      expect(client.stats()).toMatchObject({ deliveredEvents: 1, droppedEvents: 0 });
      const batches = server.batches();
      expect(batches.length).toBeLessThanOrEqual(4); // 125–250, 250–500 ms: two or three waits
      for (let i = 1; i < batches.length; i++)
        expect((batches[i]?.at ?? 0) - (batches[i - 1]?.at ?? 0)).toBeGreaterThanOrEqual(
          125 * 2 ** (i - 1) - 5,
        );
    });
  }
});
