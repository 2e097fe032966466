import { decodeTime } from 'ulidx';
import { describe, expect, it } from 'vitest';
import { UlidFactory } from '../../src/ids.js';

const ULID = /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/;

describe('ids: monotonic ULIDs', () => {
  it('are valid ULIDs carrying the current time', () => {
    const id = new UlidFactory().next();
    expect(id).toMatch(ULID);
    expect(Math.abs(decodeTime(id) - Date.now())).toBeLessThan(1_000);
  });

  it('sort in creation order and never repeat, within one millisecond and when the clock steps back', () => {
    let now = 1_700_000_000_000;
    const factory = new UlidFactory(() => now);
    const ids: string[] = [];
    for (let i = 0; i < 300_000; i++) {
      if (i === 100_000) now -= 5_000; // clock stepped back
      if (i === 200_000) now += 10_000;
      ids.push(factory.next());
    }
    for (let i = 1; i < ids.length; i++)
      if (!((ids[i - 1] as string) < (ids[i] as string))) throw new Error(`not increasing at ${i}`);
    expect(ids.every((id) => ULID.test(id))).toBe(true);
  });

  it('carry the very millisecond they are made in, each millisecond with random bits of its own', () => {
    // Consecutive milliseconds across the cached part of the prefix (it changes every 1,024 ms),
    // then far-apart ones, up to the last a ULID can hold.
    const times = [
      ...Array.from({ length: 3_000 }, (_, i) => 1_700_000_000_000 - 1_500 + i),
      ...Array.from({ length: 200 }, (_, i) => 1_700_000_002_000 + i * 9_876_543_211),
      2 ** 48 - 1,
    ];
    const factory = new UlidFactory(() => 0);
    const randomParts = new Set<string>();
    for (const ms of times) {
      const id = factory.next(ms);
      expect(id).toMatch(ULID);
      expect(decodeTime(id)).toBe(ms);
      randomParts.add(id.slice(10));
    }
    // 80 random bits per millisecond: two alike would mean the draw was reused.
    expect(randomParts.size).toBe(times.length);
  });
});
