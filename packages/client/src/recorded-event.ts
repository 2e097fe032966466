import type { EventStatus, EventType, Trace } from '@flightlog/protocol';

/**
 * An event as the client keeps it between recording and flushing: times as epoch milliseconds
 * and the payload as the client's own JSON-ready copy, read when the event was recorded, so what
 * is sent is the payload as it was then (the host may change or reuse its object afterwards).
 * The wire JSON (ISO dates, the serialised and maybe encrypted payload) is made at flush time,
 * off the host's hot path.
 */
export interface RecordedEvent {
  id: string;
  traceId: string;
  sequence: number;
  type: EventType;
  startedAtMs: number;
  endedAtMs: number | null;
  durationMs: number | null;
  status: EventStatus;
  errorMessage: string | null;
  parentEventId: string | null;
  /**
   * The payload as it was when the event was recorded: a copy of plain objects, arrays and JSON
   * primitives (see `snapshotPayload`), never the host's object.
   */
  payload: object;
  /**
   * The payload's JSON size as estimated when recorded (by characters: cheap on the hot path);
   * the exact UTF-8 size is measured when it is serialised at flush time.
   */
  payloadBytes: number;
  /** Estimated bytes of the event on the wire, payload included. */
  bytes: number;
}

/** A trace whose snapshot the buffer can take at flush time: a session. */
export interface SnapshotSource {
  readonly traceId: string;
  /** The full trace as it stands now (aggregates folded). */
  snapshot(): Trace;
  /** Estimated bytes of the snapshot on the wire. */
  snapshotBytes(): number;
}

/** One trace's part of a flush: its latest snapshot and the events recorded since the last one. */
export interface DrainedItem {
  trace: Trace;
  events: RecordedEvent[];
}
