import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createInProcessBus } from '../../src/live/in-process-bus.js';
import { splitMessageId, type LiveBus, type LiveMessage } from '../../src/live/live-bus.js';
import { createRedisBus } from '../../src/live/redis-bus.js';
import { describeBuses, redisUrl, type BusName } from '../harness/engines.js';
import { newId, traceSnapshot } from '../fixtures/batches.js';

/** An item of `traceId`, as ingest publishes it (the trace first, then its events). */
const item = (traceId: string, label: string) =>
  JSON.stringify({
    trace: traceSnapshot({ id: traceId, inputSummary: label }),
    events: [{ id: newId(), payload: { text: `"id":"${traceId}" in a payload is data` } }],
  });
const label = (m: LiveMessage) =>
  (JSON.parse(m.data) as { trace: { inputSummary: string } }).trace.inputSummary;

describeBuses('forgetting deleted traces in the live buffer [%s]', (engine: BusName) => {
  let bus: LiveBus;
  const prefix = `flightlog-test:forget:${randomBytes(6).toString('hex')}:`;
  beforeAll(async () => {
    bus =
      engine === 'memory'
        ? createInProcessBus()
        : createRedisBus({ url: redisUrl(), keyPrefix: prefix, blockMs: 200 });
    expect(await bus.ready(5_000)).toBe(true);
  });
  afterAll(async () => {
    await bus.close();
    if (engine === 'redis') {
      const redis = new Redis(redisUrl());
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    }
  });

  it("removes the traces' items everywhere in the buffer; every other item keeps its id", async () => {
    const agent = `agent-${newId()}`;
    const [x, y, z] = [newId(), newId(), newId()];
    const a = await bus.publish(agent, [item(x, 'a0')]);
    const b = await bus.publish(agent, [item(y, 'b0'), item(x, 'b1'), item(z, 'b2')]);
    const c = await bus.publish(agent, [item(z, 'c0'), item(x, 'c1')]);
    const d = await bus.publish(agent, [item(y, 'd0')]);
    const other = `agent-${newId()}`;
    await bus.publish(other, [item(x, 'other agent')]);

    await bus.forgetTraces(agent, [x]);

    const replay = await bus.replay(agent);
    expect(replay.messages.map(label)).toEqual(['b0', 'b2', 'c0', 'd0']);
    expect(replay.messages.map((m) => m.id)).toEqual([b[0], b[2], c[0], d[0]]);
    // another agent's buffer is its own
    expect((await bus.replay(other)).messages.map(label)).toEqual(['other agent']);

    // resuming after an item that stays, or after one that went: exactly what followed it
    const afterB0 = await bus.replay(agent, b[0]);
    expect(afterB0.resumed).toBe(true);
    expect(afterB0.messages.map(label)).toEqual(['b2', 'c0', 'd0']);
    const afterB1 = await bus.replay(agent, b[1]);
    expect(afterB1.resumed).toBe(true);
    expect(afterB1.messages.map(label)).toEqual(['b2', 'c0', 'd0']);
    const afterC0 = await bus.replay(agent, c[0]);
    expect(afterC0.messages.map(label)).toEqual(['d0']);
    // a batch all of whose items went is gone: resuming after it replays the buffer
    expect(splitMessageId(a[0]!).index).toBe(0);
    expect((await bus.replay(agent, a[0])).resumed).toBe(false);

    // paged replays see the same
    const page = await bus.replay(agent, undefined, 1);
    expect(page.messages.map(label)).toEqual(['b0', 'b2']);

    // new batches go on after the kept ones, and the forgotten trace stays forgotten
    const e = await bus.publish(agent, [item(y, 'e0')]);
    expect((await bus.replay(agent, d[0])).messages.map((m) => m.id)).toEqual(e);
    await bus.forgetTraces(agent, [y, z]);
    expect((await bus.replay(agent)).messages).toEqual([]);
  });

  it('does nothing to a buffer without those traces, or to an empty one', async () => {
    const agent = `agent-${newId()}`;
    await bus.forgetTraces(agent, [newId()]);
    const ids = await bus.publish(agent, [item(newId(), 'kept')]);
    await bus.forgetTraces(agent, [newId()]);
    expect((await bus.replay(agent)).messages.map((m) => m.id)).toEqual(ids);
  });

  it('with a hint that the traces sent nothing since a time, skips a buffer whose batches are all newer', async () => {
    const agent = `agent-${newId()}`;
    const x = newId();
    const before = Date.now() - 60_000;
    await bus.publish(agent, [item(x, 'x')]);
    await bus.forgetTraces(agent, [x], { lastBatchBefore: before });
    expect((await bus.replay(agent)).messages.map(label)).toEqual(['x']);
    await bus.forgetTraces(agent, [x], { lastBatchBefore: Date.now() + 1_000 });
    expect((await bus.replay(agent)).messages).toEqual([]);
  });

  it('keeps the buffer accounting right: the bytes forgotten are free again', async () => {
    if (engine !== 'redis') return;
    const agent = `agent-${newId()}`;
    const kept = item(newId(), 'kept');
    const gone = newId();
    await bus.publish(agent, [item(gone, 'gone'), kept]);
    await bus.publish(agent, [item(gone, 'gone again')]);
    await bus.forgetTraces(agent, [gone]);
    const redis = new Redis(redisUrl());
    try {
      expect(Number(await redis.zscore(`${prefix}#bytes`, agent))).toBe(kept.length);
      const twins = (await redis.xrange(`${prefix}#tokens:${agent}`, '-', '+')) as [
        string,
        string[],
      ][];
      expect(twins).toHaveLength(1);
      expect(twins[0]![1]).toContain(String(kept.length));
    } finally {
      redis.disconnect();
    }
  });
});
