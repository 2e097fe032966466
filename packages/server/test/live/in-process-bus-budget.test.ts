import { describe, expect, it } from 'vitest';
import { createInProcessBus } from '../../src/live/in-process-bus.js';
import { compareMessageIds } from '../../src/live/live-bus.js';

const payload = (n: number) => JSON.stringify({ n, filler: 'x'.repeat(1000) });

describe('in-process bus memory budget', () => {
  it('drops the oldest messages of any agent once the byte budget is passed', async () => {
    // each message counts about 2 KB: a 20 KB budget holds about 9 of them
    const bus = createInProcessBus({ bufferSize: 1000, maxBytes: 20_000 });
    for (let i = 0; i < 10; i++) await bus.publish('a', [payload(i)]);
    for (let i = 0; i < 10; i++) await bus.publish('b', [payload(i)]);
    const a = await bus.replay('a');
    const b = await bus.replay('b');
    expect(a.messages).toHaveLength(0);
    expect(b.messages.length).toBeGreaterThan(5);
    expect(b.messages.length).toBeLessThan(10);
    // what is left is the newest, in order
    const kept = b.messages.map((m) => JSON.parse(m.data).n);
    expect(kept).toEqual(Array.from({ length: kept.length }, (_, i) => 10 - kept.length + i));
  });

  it('keeps the per-agent cap and the budget consistent over many publishes', async () => {
    const bus = createInProcessBus({ bufferSize: 5, maxBytes: 1024 * 1024 });
    for (let i = 0; i < 100; i++) await bus.publish(`agent-${i % 3}`, [payload(i)]);
    for (const agent of ['agent-0', 'agent-1', 'agent-2'])
      expect((await bus.replay(agent)).messages).toHaveLength(5);
  });
});

describe('in-process bus bookkeeping', () => {
  it('stays bounded by what is buffered, however many batches the per-agent cap has dropped', async () => {
    const bus = createInProcessBus({ bufferSize: 5, maxBytes: 1024 * 1024 });
    for (let i = 0; i < 100_000; i++) await bus.publish(`agent-${i % 3}`, [`{"n":${i}}`]);
    expect(bus.size()).toBe(15);
    // a batch of several items is one entry
    await bus.publish('agent-3', ['{"n":1}', '{"n":2}', '{"n":3}']);
    expect(bus.size()).toBe(16);
    for (const agent of ['agent-0', 'agent-1', 'agent-2'])
      expect((await bus.replay(agent)).messages).toHaveLength(5);
    expect((await bus.replay('agent-3')).messages).toHaveLength(3);
  });

  it('the budget evicts the oldest batches across agents first, after many per-agent drops', async () => {
    // each batch counts about 2 KB: a 20 KB budget holds about 9; the cap holds 3 per agent
    const bus = createInProcessBus({ bufferSize: 3, maxBytes: 20_000 });
    for (let i = 0; i < 10_000; i++) await bus.publish('churn', [`{"n":${i}}`]);
    await bus.publish('churn', [payload(-1)]);
    const order: string[] = [];
    for (let round = 0; round < 10; round++)
      for (const agent of ['a', 'b', 'c', 'd', 'e']) {
        await bus.publish(agent, [payload(round)]);
        order.push(`${agent}${round}`);
      }
    const kept: { id: string; label: string }[] = [];
    for (const agent of ['churn', 'a', 'b', 'c', 'd', 'e'])
      for (const m of (await bus.replay(agent)).messages)
        kept.push({ id: m.id, label: `${agent}${JSON.parse(m.data).n}` });
    kept.sort((x, y) => compareMessageIds(x.id, y.id));
    expect(kept.length).toBeGreaterThan(5);
    expect(kept.length).toBeLessThan(10);
    // what is left is the newest of all agents together, in publish order
    expect(kept.map((k) => k.label)).toEqual(order.slice(-kept.length));
    expect(bus.size()).toBe(kept.length);
  });
});
