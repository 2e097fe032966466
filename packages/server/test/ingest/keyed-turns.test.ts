import { describe, expect, it } from 'vitest';
import { KeyedTurns } from '../../src/ingest/keyed-turns.js';

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('KeyedTurns', () => {
  it('runs holders of a shared key one at a time, in arrival order, others at once', async () => {
    const turns = new KeyedTurns();
    const log: string[] = [];
    let active = 0;
    let most = 0;
    const job = (name: string, keys: string[]) =>
      turns.run(keys, async () => {
        active++;
        most = Math.max(most, active);
        log.push(`start ${name}`);
        await tick();
        await tick();
        log.push(`end ${name}`);
        active--;
      });
    await Promise.all([
      job('a', ['t1']),
      job('b', ['t2', 't1']),
      job('c', ['t1']),
      job('d', ['t3']),
    ]);
    // a, b and c share t1: one after another; d shares nothing and ran beside a
    expect(log.indexOf('end a')).toBeLessThan(log.indexOf('start b'));
    expect(log.indexOf('end b')).toBeLessThan(log.indexOf('start c'));
    expect(log.indexOf('start d')).toBeLessThan(log.indexOf('end a'));
    expect(most).toBe(2);
    expect(turns.size).toBe(0);
  });

  it('frees the keys of work that throws', async () => {
    const turns = new KeyedTurns();
    await expect(
      turns.run(['x'], async () => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await turns.run(['x'], async () => 'next')).toBe('next');
    expect(turns.size).toBe(0);
  });

  it('cannot deadlock two holders of overlapping keys named in opposite orders', async () => {
    const turns = new KeyedTurns();
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        turns.run(i % 2 ? ['p', 'q'] : ['q', 'p'], async () => {
          await tick();
          return i;
        }),
      ),
    );
    expect(results).toHaveLength(50);
    expect(turns.size).toBe(0);
  });
});
