import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FlightlogClient } from '../../src/index.js';
import type { TransportOutcome } from '../../src/http-transport.js';
import { RecordingLogger } from '@flightlog/test-support';
import { OK, ScriptedTransport, until } from '../harness/scripted-transport.js';

function makeClient(transport: ScriptedTransport, extra: Record<string, unknown> = {}) {
  const logger = new RecordingLogger();
  const client = new FlightlogClient(
    {
      apiKey: 'k',
      logger,
      flushOnExit: false,
      flushIntervalMs: 100,
      retry: { initialDelayMs: 100, maxDelayMs: 1_000, maxAttempts: 4 },
      ...extra,
    },
    { transport, random: () => 1 },
  );
  return { client, logger };
}

/**
 * Lets fake time pass in small steps, with real turns between (gzip runs on the thread pool). On
 * a loaded machine fake time may run ahead of the real work: give deadlines room.
 */
async function settled<T>(promise: Promise<T>): Promise<T> {
  let result: { value: T } | undefined;
  void promise.then((value) => (result = { value }));
  for (let i = 0; i < 20_000 && result === undefined; i++) {
    await vi.advanceTimersByTimeAsync(5);
    await new Promise((resolve) => setImmediate(resolve));
  }
  if (result === undefined) throw new Error('never settled');
  return result.value;
}

const retryable = (retryAfterMs?: number): TransportOutcome => ({
  kind: 'retryable',
  reason: 'HTTP 503: store unavailable',
  ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
});

describe('delivery: retries, refusals, 413 splits, the backlog cap, deadlines (fake timers, no I/O)', () => {
  beforeEach(() => {
    vi.useFakeTimers({
      toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'],
    });
  });
  afterEach(() => vi.useRealTimers());

  it('retries with exponential backoff and the same batchId until the service takes it', async () => {
    const transport = new ScriptedTransport();
    transport.answer = (_b, n) => (n < 3 ? retryable() : OK);
    const { client, logger } = makeClient(transport);
    const session = client.startSession({ inputSummary: 'flaky' });
    session.toolCall({ name: 'a' });
    void client.flush();
    await until(() => transport.requests.length === 1);
    await vi.advanceTimersByTimeAsync(99);
    expect(transport.requests).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    await until(() => transport.requests.length === 2);
    await vi.advanceTimersByTimeAsync(199);
    expect(transport.requests).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1);
    await until(() => transport.requests.length === 3);
    await until(() => client.stats().sentBatches === 1);
    expect(new Set(transport.requests.map((b) => b.batchId)).size).toBe(1);
    expect(client.stats()).toMatchObject({
      retriedRequests: 2,
      deliveredEvents: 1,
      droppedEvents: 0,
    });
    expect(logger.matching('retrying in')).toHaveLength(1); // throttled: one line per 10 s
    await client.close();
  });

  it('waits what Retry-After says', async () => {
    const transport = new ScriptedTransport();
    transport.answer = (_b, n) => (n === 1 ? retryable(700) : OK);
    const { client } = makeClient(transport);
    client.startSession({ inputSummary: 'busy' }).toolCall({ name: 'a' });
    void client.flush();
    await until(() => transport.requests.length === 1);
    await vi.advanceTimersByTimeAsync(699);
    expect(transport.requests).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    await until(() => transport.requests.length === 2);
    await client.close();
  });

  it('gives a batch up after maxAttempts, counts its events as dropped, and goes on with the next', async () => {
    const transport = new ScriptedTransport();
    transport.answer = (batch) =>
      batch.items[0]?.events[0]?.payload.name === 'doomed' ? retryable() : OK;
    const { client, logger } = makeClient(transport);
    const session = client.startSession({ inputSummary: 'down' });
    session.toolCall({ name: 'doomed' });
    void client.flush();
    await until(() => transport.requests.length === 1);
    session.toolCall({ name: 'next' });
    await vi.advanceTimersByTimeAsync(5_000);
    await until(() => client.stats().sentBatches === 1);
    expect(transport.requests.map((b) => b.items[0]?.events[0]?.payload.name)).toEqual([
      'doomed',
      'doomed',
      'doomed',
      'doomed',
      'next',
    ]);
    expect(client.stats()).toMatchObject({
      failedBatches: 1,
      droppedEvents: 1,
      deliveredEvents: 1,
    });
    expect(logger.matching('batch given up after 4 attempts: HTTP 503')).toHaveLength(1);
    await client.close();
  });

  it('drops a batch refused with another 4xx, naming the status and the detail, without retrying', async () => {
    const transport = new ScriptedTransport();
    transport.answer = (_b, n) =>
      n === 1
        ? {
            kind: 'failed',
            status: 409,
            detail: 'An id in this batch is already used by another trace.',
          }
        : OK;
    const { client, logger } = makeClient(transport);
    const session = client.startSession({ inputSummary: 'conflict', traceId: 'taken-id' });
    session.toolCall({ name: 'a' });
    await client.flush();
    session.toolCall({ name: 'b' });
    await client.close();
    expect(transport.requests).toHaveLength(2);
    expect(
      logger.matching(
        'refused a batch with 409: An id in this batch is already used by another trace.',
      ),
    ).toHaveLength(1);
    expect(client.stats()).toMatchObject({
      failedBatches: 1,
      droppedEvents: 1,
      deliveredEvents: 1,
    });
  });

  it('on 413 splits the batch in halves (items, then events), each a new batchId, until it fits; the pieces back off while 413s come in a row', async () => {
    const transport = new ScriptedTransport();
    const eventsIn = (b: { items: { events: unknown[] }[] }) =>
      b.items.reduce((n, i) => n + i.events.length, 0);
    const sentAt: number[] = [];
    transport.answer = (batch) => {
      sentAt.push(Date.now());
      return eventsIn(batch) > 3
        ? { kind: 'failed', status: 413, detail: 'The request body exceeds 5242880 bytes.' }
        : OK;
    };
    const { client, logger } = makeClient(transport, { flushIntervalMs: 60_000 });
    const a = client.startSession({ inputSummary: 'a' });
    const b = client.startSession({ inputSummary: 'b' });
    for (let i = 0; i < 5; i++) a.toolCall({ name: `a${i}` });
    for (let i = 0; i < 3; i++) b.toolCall({ name: `b${i}` });
    const result = await settled(client.close({ timeoutMs: 600_000 }));
    expect(result.timedOut).toBe(false);
    // 413, 100 ms, 413, 200 ms, 202 (the backoff ends: see too-large.test.ts in real time).
    const gaps = sentAt.slice(1).map((at, i) => at - (sentAt[i] ?? 0));
    expect(gaps[0]).toBeGreaterThanOrEqual(100);
    expect(gaps[1]).toBeGreaterThanOrEqual(200);
    const delivered = transport.requests.filter((r) => eventsIn(r) <= 3);
    expect(
      delivered.map((r) => r.items.map((i) => [i.trace.inputSummary, i.events.length])),
    ).toEqual([[['a', 3]], [['a', 2]], [['b', 3]]]);
    expect(new Set(transport.requests.map((r) => r.batchId)).size).toBe(transport.requests.length);
    expect(client.stats()).toMatchObject({ deliveredEvents: 8, droppedEvents: 0 });
    expect(logger.lines).toEqual([]);
  });

  it('on 413 for one lone event, replaces its payload by a truncation marker once, never retrying forever', async () => {
    const transport = new ScriptedTransport();
    transport.answer = (batch) =>
      batch.items[0]?.events[0]?.payload.truncated === true
        ? OK
        : { kind: 'failed', status: 413, detail: 'too large' };
    const { client, logger } = makeClient(transport);
    client
      .startSession({ inputSummary: 'huge' })
      .toolCall({ name: 'dump', output: 'x'.repeat(5_000) });
    await settled(client.close({ timeoutMs: 600_000 }));
    expect(transport.requests).toHaveLength(2);
    expect(transport.requests[1]?.items[0]?.events[0]?.payload).toEqual({
      truncated: true,
      reason: 'too large for the service',
      originalBytes: expect.any(Number),
    });
    expect(logger.matching('replaced by a truncation marker')).toHaveLength(1);

    const stubborn = new ScriptedTransport();
    stubborn.answer = () => ({ kind: 'failed', status: 413, detail: 'too large' });
    const second = makeClient(stubborn);
    second.client.startSession({ inputSummary: 'huge' }).toolCall({ name: 'dump' });
    await settled(second.client.close({ timeoutMs: 600_000 }));
    expect(stubborn.requests).toHaveLength(2);
    expect(second.client.stats()).toMatchObject({ droppedEvents: 1, failedBatches: 1 });
  });

  it('caps the backlog while the service is down: the oldest batches are dropped, counted and reported', async () => {
    const transport = new ScriptedTransport();
    const pending: ((o: TransportOutcome) => void)[] = [];
    transport.answer = () => new Promise((resolve) => pending.push(resolve));
    const { client, logger } = makeClient(transport, {
      maxBufferBytes: 2_048,
      maxBacklogBytes: 8_192,
      flushIntervalMs: 60_000,
    });
    const session = client.startSession({ inputSummary: 'outage' });
    for (let i = 0; i < 200; i++) session.toolCall({ name: `t${i}`, input: 'y'.repeat(100) });
    const stats = client.stats();
    expect(stats.queuedBytes).toBeLessThanOrEqual(8_192);
    expect(stats.droppedEvents).toBeGreaterThan(0);
    expect(stats.recordedEvents).toBe(200);
    expect(
      logger.matching('backlog passed maxBacklogBytes (8192): dropped the oldest').length,
    ).toBeGreaterThan(0);
    await until(() => pending.length === 1);
    // the service comes back: what was kept is the newest data, delivered in order
    transport.answer = () => OK;
    pending[0]?.(OK);
    await client.close();
    const after = client.stats();
    expect(after.deliveredEvents + after.droppedEvents).toBe(200);
    const names = transport.requests
      .slice(1)
      .flatMap((b) => b.items[0]?.events.map((e) => String(e.payload.name)) ?? []);
    expect(names.at(-1)).toBe('t199');
    expect(names).toEqual([...names].sort((x, y) => Number(x.slice(1)) - Number(y.slice(1))));
  });

  it('close() on a 503 retries after Retry-After while its deadline allows: a service back in time gets the batch', async () => {
    const transport = new ScriptedTransport();
    transport.answer = (_b, n) => (n === 1 ? retryable(1_000) : OK);
    const { client, logger } = makeClient(transport);
    client.startSession({ inputSummary: 'busy once' }).toolCall({ name: 'a' });
    let result: unknown;
    void client.close({ timeoutMs: 5_000 }).then((r) => (result = r));
    await until(() => transport.requests.length === 1);
    await vi.advanceTimersByTimeAsync(999);
    expect(transport.requests).toHaveLength(1); // Retry-After is honoured, not cut short by close
    await vi.advanceTimersByTimeAsync(1);
    await until(() => result !== undefined);
    expect(result).toEqual({ timedOut: false });
    expect(transport.requests).toHaveLength(2);
    expect(new Set(transport.requests.map((b) => b.batchId)).size).toBe(1);
    expect(client.stats()).toMatchObject({ deliveredEvents: 1, droppedEvents: 0 });
    expect(logger.matching('close(): not everything was delivered')).toEqual([]);
  });

  it('close() on a service that keeps answering 503: retries until its deadline, then gives up with one warning, and nothing runs after', async () => {
    const transport = new ScriptedTransport();
    transport.answer = () => retryable(1_000);
    const { client, logger } = makeClient(transport, {
      retry: { initialDelayMs: 100, maxDelayMs: 1_000, maxAttempts: 100 },
    });
    const session = client.startSession({ inputSummary: 'down' });
    session.toolCall({ name: 'a' });
    session.toolCall({ name: 'b' });
    let result: unknown;
    void client.close({ timeoutMs: 2_500 }).then((r) => (result = r));
    await until(() => transport.requests.length === 1);
    await vi.advanceTimersByTimeAsync(1_000);
    await until(() => transport.requests.length === 2);
    await vi.advanceTimersByTimeAsync(1_000);
    await until(() => transport.requests.length === 3);
    expect(result).toBeUndefined();
    await vi.advanceTimersByTimeAsync(500); // the deadline, in the middle of a retry delay
    await until(() => result !== undefined);
    expect(result).toEqual({ timedOut: true });
    await until(() => client.stats().droppedEvents === 2);
    expect(
      logger.matching('close(): not everything was delivered within 2500 ms; 2 events dropped'),
    ).toHaveLength(1);
    // The retry delay was cut short: no request after the deadline, no timer left behind.
    await vi.advanceTimersByTimeAsync(10_000);
    expect(transport.requests).toHaveLength(3);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('close() gives up at its deadline: the request in flight is aborted, the rest dropped and counted', async () => {
    const transport = new ScriptedTransport();
    let aborted = false;
    transport.answer = (_b, _n, signal) =>
      new Promise((resolve) =>
        signal.addEventListener('abort', () => {
          aborted = true;
          resolve({ kind: 'retryable', reason: 'aborted' });
        }),
      );
    const { client, logger } = makeClient(transport);
    const session = client.startSession({ inputSummary: 'hung service' });
    session.toolCall({ name: 'a' });
    session.toolCall({ name: 'b' });
    const closing = client.close({ timeoutMs: 2_000 });
    await until(() => transport.requests.length === 1);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(await closing).toEqual({ timedOut: true });
    await until(() => aborted && client.stats().droppedEvents === 2);
    expect(
      logger.matching('close(): not everything was delivered within 2000 ms; 2 events dropped'),
    ).toHaveLength(1);
  });
});
