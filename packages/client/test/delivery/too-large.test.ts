import { afterEach, describe, expect, it } from 'vitest';
import { FlightlogClient } from '../../src/index.js';
import { LoopbackServer, type ReceivedRequest } from '../harness/loopback-server.js';
import { RecordingLogger } from '@flightlog/test-support';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const tooLarge = {
  status: 413,
  headers: { 'content-type': 'application/problem+json' },
  body: { status: 413, detail: 'The request body exceeds 5242880 bytes.' },
};
const eventsIn = (request: ReceivedRequest) =>
  (request.json as { items: { events: unknown[] }[] }).items.reduce(
    (n, item) => n + item.events.length,
    0,
  );

describe('413 from a loopback service: split pieces back off too, and warnings are throttled', () => {
  let server: LoopbackServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it('a service answering 413 to everything gets a handful of requests and log lines, not a storm', async () => {
    server = await new LoopbackServer(() => tooLarge).start();
    const logger = new RecordingLogger();
    const client = new FlightlogClient({
      apiKey: 'flk_k',
      ingestUrl: server.url,
      logger,
      flushOnExit: false,
      maxBufferBytes: 1024 * 1024,
    });
    for (let s = 0; s < 6; s++) {
      const session = client.startSession({ inputSummary: `storm ${s}` });
      for (let i = 0; i < 100; i++) session.toolCall({ name: 'step', input: { i } });
    }
    void client.flush();
    await sleep(3_000);
    // Before: ~1,800 requests in 3 s (every split piece sent at once) and 1,200 log lines.
    // With the default schedule (125–250 ms doubling) 3 s hold at most 5 waits.
    const requests = server.batches().length;
    expect(requests).toBeGreaterThanOrEqual(3);
    expect(requests).toBeLessThanOrEqual(7);
    const gaps = server
      .batches()
      .slice(1)
      .map((r, i) => r.at - (server?.batches()[i]?.at ?? 0));
    for (const [i, gap] of gaps.entries()) expect(gap).toBeGreaterThanOrEqual(125 * 2 ** i - 5);
    expect(logger.lines.length).toBeLessThanOrEqual(2);
    await client.close({ timeoutMs: 0 });
    expect(client.stats().droppedEvents).toBe(600);
  });

  it('every too-large warning is throttled, and what was held back is counted', async () => {
    // Every event alone is too large even as a truncation marker: each one is a warning.
    server = await new LoopbackServer(() => tooLarge).start();
    const logger = new RecordingLogger();
    const client = new FlightlogClient({
      apiKey: 'flk_k',
      ingestUrl: server.url,
      logger,
      flushOnExit: false,
      retry: { initialDelayMs: 1, maxDelayMs: 2, maxAttempts: 10 },
    });
    const session = client.startSession({ inputSummary: 'storm' });
    for (let i = 0; i < 40; i++) session.toolCall({ name: 'step', input: { i } });
    const result = await client.close({ timeoutMs: 20_000 });
    expect(result.timedOut).toBe(false);
    expect(client.stats()).toMatchObject({ droppedEvents: 40, deliveredEvents: 0 });
    const [summary, ...lines] = [...logger.lines].reverse();
    const truncated = lines.filter((l) => l.message.includes('replaced by a truncation marker'));
    const dropped = lines.filter((l) => l.message.includes('too large for the service even alone'));
    expect(truncated).toHaveLength(1);
    expect(dropped).toHaveLength(1);
    expect(lines).toHaveLength(2);
    // close() reports what the throttle held back, so the counts are never lost.
    expect(summary?.message).toContain('warnings held back by the throttle since last shown');
    expect(summary?.message).toMatch(/39 × .*truncation marker/);
    expect(summary?.message).toMatch(/39 × .*even alone/);
  });

  it('a batch that is merely too large is split and delivered, the pieces after one short backoff', async () => {
    server = await new LoopbackServer((request) =>
      eventsIn(request) > 50 ? tooLarge : { status: 202, body: {} },
    ).start();
    const logger = new RecordingLogger();
    const client = new FlightlogClient({
      apiKey: 'flk_k',
      ingestUrl: server.url,
      logger,
      flushOnExit: false,
      maxBufferBytes: 1024 * 1024,
    });
    const session = client.startSession({ inputSummary: 'big' });
    for (let i = 0; i < 80; i++) session.toolCall({ name: 'step', input: { i } });
    await client.close({ timeoutMs: 5_000 });
    expect(client.stats()).toMatchObject({ deliveredEvents: 80, droppedEvents: 0 });
    const [first, second, third] = server.batches();
    expect(server.batches().map(eventsIn)).toEqual([80, 40, 40]);
    expect((second?.at ?? 0) - (first?.at ?? 0)).toBeGreaterThanOrEqual(120);
    // Delivered again: the backoff is over, the second half goes at once.
    expect((third?.at ?? 0) - (second?.at ?? 0)).toBeLessThan(100);
    expect(logger.lines).toEqual([]);
  });
});
