import { describe, expect, it } from 'vitest';
import { createInProcessBus } from '../../src/live/in-process-bus.js';

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
