import type { Event, FieldError } from '@flightlog/protocol';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { EVENT_PAGE_MAX_BYTES, MAX_EVENT_PAGE_SIZE, badCursor } from '../read/trace-reader.js';
import type { EventPosition } from '../store/event-pages.js';
import type { ExportPosition, ExportStore } from '../store/export-store.js';
import { encodePageCursor } from '../store/page-cursor.js';
import { decodeCursor } from '../store/trace-store.js';

/**
 * Export (issue 24, item 3): an agent's runs as NDJSON, one line per run,
 * `{"trace": Trace, "events": Event[], "cursor": string}`, the trace and its events exactly as
 * the read API returns them (encrypted payloads as stored: the envelope), runs oldest first (by
 * start, then id). Memory stays bounded whatever the agent holds: runs are read a page at a
 * time, events too (a run of 20,000 events is written in pieces, never held whole), and a line
 * is handed on in chunks the caller writes at its reader's pace.
 */

/** Runs per statement: at most 50 × 3 texts of 64 KiB read at once. */
export const EXPORT_TRACES_PER_PAGE = 50;
/**
 * Events of each run of a page read together (eventHeads): runs of up to this many events cost
 * no statement of their own; longer ones go on a page of MAX_EVENT_PAGE_SIZE events at a time.
 */
export const EXPORT_HEAD_EVENTS = 20;
/** Characters gathered before they are handed on: few writes for small runs, little held. */
const CHUNK_CHARS = 64 * 1024;

/** The query of an export, as the route validated it (dates by their schema). */
export interface ExportQuery {
  since?: string | undefined;
  until?: string | undefined;
  cursor?: string | undefined;
}

/** Which runs an export holds: started in [since, until), after the cursor's run. */
export interface ExportRange {
  since?: string;
  until?: string;
  after?: ExportPosition;
}

export type ExportRangeOutcome =
  { kind: 'range'; range: ExportRange } | { kind: 'invalid'; errors: FieldError[] };

/**
 * The range of an export's query: since (inclusive) and until (exclusive) on the runs' start,
 * and the cursor of the last line a client received. A cursor this service did not write, or
 * a range that ends before it starts, is named by its field.
 */
export function exportRange(query: ExportQuery): ExportRangeOutcome {
  const errors: FieldError[] = [];
  const after = query.cursor === undefined ? undefined : decodeExportCursor(query.cursor);
  if (query.cursor !== undefined && after === undefined) errors.push(badCursor());
  if (
    query.since !== undefined &&
    query.until !== undefined &&
    Date.parse(query.until) < Date.parse(query.since)
  )
    errors.push({ pointer: '/querystring/until', detail: 'must not be earlier than since' });
  if (errors.length > 0) return { kind: 'invalid', errors };
  return {
    kind: 'range',
    range: {
      ...(query.since !== undefined ? { since: query.since } : {}),
      ...(query.until !== undefined ? { until: query.until } : {}),
      ...(after ? { after } : {}),
    },
  };
}

/** A line's cursor: its run's place (start to the microsecond, id), opaque to clients. */
export function encodeExportCursor([startedAt, id]: ExportPosition): string {
  return encodePageCursor(startedAt, id);
}

export function decodeExportCursor(cursor: string): ExportPosition | undefined {
  return decodeCursor(cursor);
}

/** The reads an export makes. */
export type ExportSource = Pick<ExportStore, 'tracePage' | 'eventHeads' | 'eventPage'>;

export interface ExportOptions {
  /** Once aborted, the export stops before its next read, throwing the signal's reason. */
  signal?: AbortSignal;
}

/**
 * The NDJSON of the agent's runs in `range`, in chunks of whole or partial lines (each line
 * ends with `\n`). A consumer that pulls the next chunk only when it has written the last one
 * (a stream's backpressure) keeps the export at its reader's pace; one that stops pulling stops
 * the reads. Every read is one statement of its own, after a turn of the event loop: other
 * requests are served between them, also on PGlite, whose statements all run on this thread.
 */
export async function* exportLines(
  source: ExportSource,
  agentId: string,
  range: ExportRange,
  options: ExportOptions = {},
): AsyncGenerator<string, void, undefined> {
  const read = async <T>(work: () => Promise<T>): Promise<T> => {
    await nextTurn();
    options.signal?.throwIfAborted();
    return work();
  };
  const out = new Chunks();
  let after = range.after;
  for (;;) {
    const page = await read(() =>
      source.tracePage(agentId, {
        ...(range.since !== undefined ? { since: range.since } : {}),
        ...(range.until !== undefined ? { until: range.until } : {}),
        ...(after ? { after } : {}),
        limit: EXPORT_TRACES_PER_PAGE,
      }),
    );
    let next = 0;
    while (next < page.length) {
      const heads = await read(() =>
        source.eventHeads(
          page.slice(next).map((run) => run.trace.id),
          { perTrace: EXPORT_HEAD_EVENTS, maxBytes: EVENT_PAGE_MAX_BYTES },
        ),
      );
      for (const head of heads) {
        const run = page[next++];
        if (!run) break;
        out.push(`{"trace":${JSON.stringify(run.trace)},"events":[`);
        out.pushEvents(head.events, false);
        let written = head.events.length > 0;
        let more: EventPosition | null = head.next;
        while (more) {
          if (out.full) yield out.take();
          const after: EventPosition = more;
          const events = await read(() =>
            source.eventPage(run.trace.id, {
              after,
              limit: MAX_EVENT_PAGE_SIZE,
              maxBytes: EVENT_PAGE_MAX_BYTES,
            }),
          );
          out.pushEvents(events.events, written);
          written ||= events.events.length > 0;
          more = events.next;
        }
        out.push(`],"cursor":"${encodeExportCursor(run.position)}"}\n`);
        if (out.full) yield out.take();
      }
    }
    const last = page[page.length - 1];
    if (page.length < EXPORT_TRACES_PER_PAGE || !last) break;
    after = last.position;
  }
  if (!out.empty) yield out.take();
}

/** Text gathered until a chunk is worth handing on. */
class Chunks {
  private parts: string[] = [];
  private chars = 0;

  get full(): boolean {
    return this.chars >= CHUNK_CHARS;
  }

  get empty(): boolean {
    return this.chars === 0;
  }

  push(text: string): void {
    this.parts.push(text);
    this.chars += text.length;
  }

  /** Events as the read API returns them, comma-separated (after earlier ones when `after`). */
  pushEvents(events: readonly Event[], after: boolean): void {
    events.forEach((event, i) => this.push((after || i > 0 ? ',' : '') + JSON.stringify(event)));
  }

  take(): string {
    const chunk = this.parts.join('');
    this.parts = [];
    this.chars = 0;
    return chunk;
  }
}
