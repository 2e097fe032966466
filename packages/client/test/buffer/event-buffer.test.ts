import type { Trace } from '@flightlog/protocol';
import { describe, expect, it } from 'vitest';
import { EventBuffer } from '../../src/event-buffer.js';
import type { RecordedEvent, SnapshotSource } from '../../src/recorded-event.js';

function source(traceId: string, bytes = 500): SnapshotSource & { version: number; size: number } {
  return {
    traceId,
    version: 0,
    size: bytes,
    snapshot() {
      return { id: traceId, eventCount: this.version } as unknown as Trace;
    },
    snapshotBytes() {
      return this.size;
    },
  };
}

let n = 0;
function event(traceId: string, bytes: number): RecordedEvent {
  return {
    id: `e${n}`,
    traceId,
    sequence: n++,
    type: 'custom',
    startedAtMs: 0,
    endedAtMs: 0,
    durationMs: 0,
    status: 'ok',
    errorMessage: null,
    parentEventId: null,
    payload: { name: 'x' },
    payloadBytes: 12,
    bytes,
  };
}

describe('event buffer accounting', () => {
  it('counts each event’s bytes plus each trace’s snapshot once, and empties on drain', () => {
    const buffer = new EventBuffer(10_000);
    const a = source('a', 400);
    const b = source('b', 600);
    buffer.add(a, event('a', 100));
    buffer.add(a, event('a', 150));
    buffer.touch(b);
    expect(buffer.bytes).toBe(400 + 100 + 150 + 600);
    expect(buffer.eventCount).toBe(2);
    a.version = 7;
    const items = buffer.drain();
    expect(items.map((i) => [i.trace.id, i.trace.eventCount, i.events.length])).toEqual([
      ['a', 7, 2],
      ['b', 0, 0],
    ]);
    expect(buffer.bytes).toBe(0);
    expect(buffer.isEmpty()).toBe(true);
  });

  it('asks for a flush before an event that would pass maxBytes, never for an empty buffer', () => {
    const buffer = new EventBuffer(1_000);
    const a = source('a', 200);
    expect(buffer.mustFlushBefore(a, 5_000)).toBe(false); // alone, a big event still goes
    buffer.add(a, event('a', 700));
    expect(buffer.mustFlushBefore(a, 100)).toBe(false); // 200 + 700 + 100 = 1000
    expect(buffer.mustFlushBefore(a, 101)).toBe(true);
    expect(buffer.mustFlushBefore(source('b', 50), 60)).toBe(true); // a new trace brings its snapshot
    expect(buffer.isFull()).toBe(false);
    buffer.add(a, event('a', 100));
    expect(buffer.isFull()).toBe(true);
  });

  it('keeps a drained buffer within the service’s limits: 1,000 traces, 10,000 events per trace', () => {
    const buffer = new EventBuffer(Number.MAX_SAFE_INTEGER);
    const sources = Array.from({ length: 1_000 }, (_, i) => source(`t${i}`, 1));
    for (const s of sources) buffer.touch(s);
    expect(buffer.mustFlushBefore(source('one-more', 1), 1)).toBe(true);
    expect(buffer.mustFlushBefore(sources[0] as SnapshotSource, 1)).toBe(false);
    const busy = new EventBuffer(Number.MAX_SAFE_INTEGER);
    const s = source('busy', 1);
    for (let i = 0; i < 10_000; i++) busy.add(s, event('busy', 1));
    expect(busy.mustFlushBefore(s, 1)).toBe(true);
  });

  it('re-charges a snapshot that grows (tool names, summaries) or shrinks, each one at most half the buffer', () => {
    const buffer = new EventBuffer(10_000);
    const a = source('a', 600);
    buffer.add(a, event('a', 100));
    expect(buffer.bytes).toBe(700);
    a.size = 600 + 13 * 253; // 13 new tool names of 250 characters: 3,889 bytes
    // the growth counts: 100 (event) + 3,889 + 6,012 > 10,000
    expect(buffer.mustFlushBefore(a, 6_012)).toBe(true);
    expect(buffer.mustFlushBefore(a, 6_011)).toBe(false);
    a.size = 4_000;
    buffer.add(a, event('a', 100));
    expect(buffer.bytes).toBe(4_000 + 200);
    buffer.touch(a); // unchanged: nothing more charged
    expect(buffer.bytes).toBe(4_200);
    a.size = 30_000; // larger than the buffer: charged half of it
    buffer.touch(a);
    expect(buffer.bytes).toBe(5_000 + 200);
    expect(buffer.mustFlushBefore(a, 4_800)).toBe(false);
    expect(buffer.mustFlushBefore(a, 4_801)).toBe(true);
    const b = source('b', 6_000);
    expect(buffer.mustFlushBefore(b, 0)).toBe(true); // 5,200 + 5,000 (capped) > 10,000
    buffer.drain();
    expect(buffer.bytes).toBe(0);
  });
});
