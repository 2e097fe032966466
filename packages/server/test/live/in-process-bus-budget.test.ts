import { describe, expect, it } from 'vitest';
import { createInProcessBus } from '../../src/live/in-process-bus.js';

const payload = (n: number) => JSON.stringify({ n, filler: 'x'.repeat(1000) });

describe('in-process bus memory budget', () => {
  it('once the byte budget is passed, the agent holding the most drops its oldest first', async () => {
    // each message counts about 2 KB: a 20 KB budget holds about 9 of them
    const bus = createInProcessBus({ bufferSize: 1000, maxBytes: 20_000 });
    for (let i = 0; i < 10; i++) await bus.publish('a', [payload(i)]);
    for (let i = 0; i < 10; i++) await bus.publish('b', [payload(i)]);
    const a = (await bus.replay('a')).messages.map((m) => JSON.parse(m.data).n);
    const b = (await bus.replay('b')).messages.map((m) => JSON.parse(m.data).n);
    // a, which held the most when b came, gave up its oldest: both keep their newest, in order
    expect(a.length + b.length).toBeGreaterThan(5);
    expect(a.length + b.length).toBeLessThan(10);
    expect(Math.abs(a.length - b.length)).toBeLessThanOrEqual(1);
    for (const kept of [a, b])
      expect(kept).toEqual(Array.from({ length: kept.length }, (_, i) => 10 - kept.length + i));
  });

  it('keeps an agent within its own byte budget, its newest batch whatever its size', async () => {
    const bus = createInProcessBus({ bufferSize: 1000, agentMaxBytes: 10_000 });
    for (let i = 0; i < 10; i++) await bus.publish('a', [payload(i)]);
    await bus.publish('b', [payload(0)]);
    const a = (await bus.replay('a')).messages.map((m) => JSON.parse(m.data).n);
    // about 1 KB of JSON each: 9 fit in 10,000 bytes
    expect(a).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect((await bus.replay('b')).messages).toHaveLength(1);
    await bus.publish('a', [JSON.stringify({ n: 10, filler: 'x'.repeat(50_000) })]);
    expect((await bus.replay('a')).messages.map((m) => JSON.parse(m.data).n)).toEqual([10]);
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

  it('the budget takes from the agent holding the most, after many per-agent drops', async () => {
    // each batch counts about 2 KB: a 20 KB budget holds about 9; the cap holds 3 per agent
    const bus = createInProcessBus({ bufferSize: 3, maxBytes: 20_000 });
    for (let i = 0; i < 10_000; i++) await bus.publish('churn', [`{"n":${i}}`]);
    await bus.publish('churn', [payload(-1)]);
    for (let round = 0; round < 10; round++)
      for (const agent of ['a', 'b', 'c', 'd', 'e']) await bus.publish(agent, [payload(round)]);
    const kept = new Map<string, number[]>();
    for (const agent of ['a', 'b', 'c', 'd', 'e'])
      kept.set(
        agent,
        (await bus.replay(agent)).messages.map((m) => JSON.parse(m.data).n as number),
      );
    const total = [...kept.values()].reduce((sum, k) => sum + k.length, 0);
    expect(total).toBeGreaterThan(5);
    expect(total).toBeLessThan(10);
    // every agent keeps its newest, in order: none was emptied for the others
    for (const [agent, ns] of kept) {
      expect(ns.at(-1), agent).toBe(9);
      expect(ns).toEqual(Array.from({ length: ns.length }, (_, i) => 10 - ns.length + i));
    }
    expect(bus.size()).toBe(total + (await bus.replay('churn')).messages.length);
  });
});
