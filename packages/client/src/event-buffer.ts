import { BATCH_LIMITS } from '@flightlog/protocol';
import type { DrainedItem, RecordedEvent, SnapshotSource } from './recorded-event.js';

interface Entry {
  source: SnapshotSource;
  events: RecordedEvent[];
  /** What the snapshot was last charged (its size, capped); re-charged when it changes. */
  snapshotBytes: number;
}

/**
 * What was recorded since the last flush: per trace, the events and the fact that its snapshot
 * changed. Bytes are accounted as events arrive (estimated wire JSON), so the client knows when
 * the next event would pass `maxBufferBytes`, and a drained buffer always fits the service's
 * batch limits (at most 1,000 traces, at most 10,000 events per trace). Each trace's snapshot
 * goes out once per flush, at its size when drained: it is charged when the trace enters the
 * buffer and charged again by the difference whenever it changes (new tool names, an output
 * summary), so a snapshot that grows is not under-counted. One snapshot is charged at most half
 * the buffer: a trace with hundreds of long tool names can have a snapshot larger than the whole
 * buffer, which would otherwise force a flush (re-sending that snapshot) for every event.
 */
export class EventBuffer {
  private readonly entries = new Map<SnapshotSource, Entry>();
  private byteCount = 0;
  private eventTotal = 0;

  /** The most one trace's snapshot is charged (see the class comment). */
  private readonly maxSnapshotCharge: number;

  constructor(readonly maxBytes: number) {
    this.maxSnapshotCharge = Math.floor(maxBytes / 2);
  }

  get bytes(): number {
    return this.byteCount;
  }

  get eventCount(): number {
    return this.eventTotal;
  }

  isEmpty(): boolean {
    return this.entries.size === 0;
  }

  /**
   * Whether adding `bytes` more for `source` would pass a limit, so the buffer must be flushed
   * first. Never true for an empty buffer: one event larger than the buffer travels alone.
   */
  mustFlushBefore(source: SnapshotSource, bytes: number): boolean {
    if (this.entries.size === 0) return false;
    const entry = this.entries.get(source);
    if (entry === undefined) {
      if (this.entries.size >= BATCH_LIMITS.maxItems) return true;
      return this.byteCount + bytes + this.chargeOf(source) > this.maxBytes;
    }
    if (entry.events.length >= BATCH_LIMITS.maxEventsPerItem) return true;
    const growth = this.chargeOf(source) - entry.snapshotBytes;
    return this.byteCount + bytes + growth > this.maxBytes;
  }

  /** True once the buffer holds `maxBytes` or more. */
  isFull(): boolean {
    return this.byteCount >= this.maxBytes;
  }

  add(source: SnapshotSource, event: RecordedEvent): void {
    const entry = this.entryOf(source);
    entry.events.push(event);
    this.byteCount += event.bytes;
    this.eventTotal += 1;
    this.recharge(entry);
  }

  /** The trace's snapshot changed (started, ended): it goes out with the next flush. */
  touch(source: SnapshotSource): void {
    this.recharge(this.entryOf(source));
  }

  /** Charges the difference when the snapshot's size moved since it was last charged. */
  private recharge(entry: Entry): void {
    const now = this.chargeOf(entry.source);
    if (now !== entry.snapshotBytes) {
      this.byteCount += now - entry.snapshotBytes;
      entry.snapshotBytes = now;
    }
  }

  /** Takes everything: one item per trace with its snapshot as of now. */
  drain(): DrainedItem[] {
    const items: DrainedItem[] = [];
    for (const entry of this.entries.values()) {
      items.push({ trace: entry.source.snapshot(), events: entry.events });
    }
    this.entries.clear();
    this.byteCount = 0;
    this.eventTotal = 0;
    return items;
  }

  private chargeOf(source: SnapshotSource): number {
    return Math.min(source.snapshotBytes(), this.maxSnapshotCharge);
  }

  private entryOf(source: SnapshotSource): Entry {
    let entry = this.entries.get(source);
    if (entry === undefined) {
      entry = { source, events: [], snapshotBytes: this.chargeOf(source) };
      this.entries.set(source, entry);
      this.byteCount += entry.snapshotBytes;
    }
    return entry;
  }
}
