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
});
