import { describe, expect, it } from 'vitest';
import { RecentIds } from '../../src/ingest/recent-ids.js';

describe('recent ids', () => {
  it('keeps at most its capacity, forgetting the oldest first', () => {
    const recent = new RecentIds(3);
    recent.add(['a', 'b']);
    recent.add(['c', 'd']);
    expect(recent.size).toBe(3);
    expect(recent.hasAny(['a'])).toBe(false);
    expect(recent.hasAny(['x', 'b'])).toBe(true);
    expect(recent.hasAny(['x', 'y'])).toBe(false);
  });

  it('an id added again is the newest again', () => {
    const recent = new RecentIds(2);
    recent.add(['a', 'b']);
    recent.add(['a']);
    recent.add(['c']);
    expect(recent.hasAny(['a'])).toBe(true);
    expect(recent.hasAny(['b'])).toBe(false);
  });
});
