import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FlightlogClient } from '../../src/index.js';
import type { TransportOutcome } from '../../src/http-transport.js';
import { RecordingLogger } from '@flightlog/test-support';
import { OK, ScriptedTransport, until } from '../harness/scripted-transport.js';

const tool = (name: string) => ({ name, input: { text: 'x'.repeat(200) } });

function makeClient(transport: ScriptedTransport, extra: Record<string, unknown> = {}) {
  const logger = new RecordingLogger();
  const client = new FlightlogClient(
    { apiKey: 'k', logger, flushOnExit: false, ...extra },
    { transport },
  );
  return { client, logger };
}

describe('flush triggers (fake timers, no I/O)', () => {
  beforeEach(() => {
    // setImmediate stays real: gzip and the exporter's hand-offs run between fake ticks.
    vi.useFakeTimers({
      toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'],
    });
  });
  afterEach(() => vi.useRealTimers());

  it('flushes on the timer every flushIntervalMs, not before, and not when there is nothing to send', async () => {
    const transport = new ScriptedTransport();
    const { client } = makeClient(transport, { flushIntervalMs: 1_000 });
    const session = client.startSession({ inputSummary: 'timer' });
    session.toolCall(tool('a'));
    // A flush drains the buffer synchronously in the timer's callback (the request follows
    // after an immediate and gzip), so the buffer tells at once whether the timer flushed.
    await vi.advanceTimersByTimeAsync(999);
    expect(client.stats()).toMatchObject({ bufferedEvents: 1, queuedBatches: 0, sentBatches: 0 });
    await vi.advanceTimersByTimeAsync(1);
    expect(client.stats().bufferedEvents).toBe(0);
    await until(() => transport.requests.length === 1);
    session.toolCall(tool('b'));
    await vi.advanceTimersByTimeAsync(999);
    expect(client.stats().bufferedEvents).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(client.stats().bufferedEvents).toBe(0);
    await until(() => transport.requests.length === 2);
    // Nothing to send: the ticks of the next 5 s make no batch. flush() waits for everything
    // the exporter has, so a batch made by a tick would have reached the transport by then.
    await vi.advanceTimersByTimeAsync(5_000);
    expect(client.stats()).toMatchObject({ bufferedEvents: 0, queuedBatches: 0 });
    await client.flush();
    expect(transport.requests).toHaveLength(2);
    expect(client.stats().sentBatches).toBe(2);
    // each flush: a fresh batchId, one item per trace, the latest snapshot, the events since the last flush
    const [first, second] = transport.requests;
    expect(first?.batchId).not.toBe(second?.batchId);
    expect(first?.batchId).toMatch(/^[0-7][0-9A-HJKMNP-TV-Z]{25}$/);
    expect(first?.items.map((i) => [i.trace.eventCount, i.events.length])).toEqual([[1, 1]]);
    expect(second?.items.map((i) => [i.trace.eventCount, i.events.length])).toEqual([[2, 1]]);
    expect(second?.items[0]?.trace.toolsCalled).toEqual(['a', 'b']);
    await client.close();
  });

  it('flushes before accepting the event that would pass maxBufferBytes', async () => {
    const transport = new ScriptedTransport();
    const { client } = makeClient(transport, { maxBufferBytes: 4_096, flushIntervalMs: 60_000 });
    const session = client.startSession({ inputSummary: 'full buffer' });
    let recorded = 0;
    while (client.stats().bufferedBytes + 600 <= 4_096) {
      session.toolCall(tool(`t${recorded++}`));
    }
    const before = client.stats();
    expect(before.queuedBatches + transport.requests.length).toBe(0);
    session.toolCall(tool('overflow'));
    // the full buffer went out as one batch; the new event waits in a fresh buffer
    expect(client.stats().bufferedEvents).toBe(1);
    await until(() => transport.requests.length === 1);
    expect(transport.requests[0]?.items[0]?.events).toHaveLength(recorded);
    expect(transport.requests[0]?.items[0]?.events.at(-1)?.payload).toMatchObject({
      name: `t${recorded - 1}`,
    });
    await client.close();
    expect(transport.requests[1]?.items[0]?.events.map((e) => e.payload.name)).toEqual([
      'overflow',
    ]);
  });

  it('sends one request at a time: later flushes wait for the one in flight', async () => {
    const transport = new ScriptedTransport();
    const pending: ((outcome: TransportOutcome) => void)[] = [];
    transport.answer = () => new Promise((resolve) => pending.push(resolve));
    const { client } = makeClient(transport, { flushIntervalMs: 100 });
    const session = client.startSession({ inputSummary: 'one in flight' });
    session.toolCall(tool('a'));
    await vi.advanceTimersByTimeAsync(100);
    await until(() => pending.length === 1);
    session.toolCall(tool('b'));
    await vi.advanceTimersByTimeAsync(1_000);
    for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
    expect(transport.requests).toHaveLength(1);
    pending[0]?.(OK);
    await until(() => pending.length === 2);
    expect(transport.requests[1]?.items[0]?.events.map((e) => e.payload.name)).toEqual(['b']);
    pending[1]?.(OK);
    await client.close();
  });

  it('ending a session flushes at once, without waiting for the timer', async () => {
    const transport = new ScriptedTransport();
    const { client } = makeClient(transport, { flushIntervalMs: 60_000 });
    const session = client.startSession({ inputSummary: 'ends' });
    session.toolCall(tool('a'));
    session.end({ outputSummary: 'done' });
    await until(() => transport.requests.length === 1);
    expect(transport.requests[0]?.items[0]?.trace).toMatchObject({
      status: 'completed',
      outputSummary: 'done',
      eventCount: 1,
    });
    await client.close();
  });

  it('close() flushes, stops the timer, and returns the same promise every time', async () => {
    const transport = new ScriptedTransport();
    const { client } = makeClient(transport, { flushIntervalMs: 100 });
    const session = client.startSession({ inputSummary: 'closing' });
    session.toolCall(tool('a'));
    const first = client.close();
    const second = client.close();
    expect(await first).toEqual({ timedOut: false });
    expect(await second).toEqual({ timedOut: false });
    expect(transport.requests).toHaveLength(1);
    session.toolCall(tool('late'));
    await vi.advanceTimersByTimeAsync(10_000);
    expect(transport.requests).toHaveLength(1);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('sends verifyToken and agentId with the first batch, and no more once it was acknowledged', async () => {
    const transport = new ScriptedTransport();
    const { client } = makeClient(transport, {
      agentId: 'bot-1',
      verifyToken: 'flv_once',
      flushIntervalMs: 100,
    });
    const session = client.startSession({ inputSummary: 'verify' });
    session.toolCall(tool('a'));
    await client.flush();
    session.toolCall(tool('b'));
    await client.flush();
    expect(transport.requests.map((b) => [b.agentId, b.verifyToken])).toEqual([
      ['bot-1', 'flv_once'],
      [undefined, undefined],
    ]);
    await client.close();
  });

  it('flush() resolves once the batch in flight and everything before the call is delivered', async () => {
    const transport = new ScriptedTransport();
    let release: ((outcome: TransportOutcome) => void) | undefined;
    transport.answer = () => new Promise((resolve) => (release = resolve));
    const { client } = makeClient(transport);
    const session = client.startSession({ inputSummary: 'serverless' });
    session.toolCall(tool('a'));
    let flushed = false;
    void client.flush().then(() => (flushed = true));
    await until(() => release !== undefined);
    for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
    expect(flushed).toBe(false);
    release?.(OK);
    await until(() => flushed);
    expect(client.stats()).toMatchObject({ deliveredEvents: 1, sentBatches: 1 });
    await client.close();
  });
});
