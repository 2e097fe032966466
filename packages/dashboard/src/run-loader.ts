import type { Event, Trace } from '@flightlog/protocol';
import { readTracePage } from './api.js';

/** Reads a run and all its events page by page, telling `onPage` what it has so far. */
export async function loadRun(
  traceId: string,
  signal: AbortSignal,
  onPage: (trace: Trace, events: Event[]) => void,
): Promise<{ trace: Trace; events: Event[] }> {
  let cursor: string | null = null;
  let events: Event[] = [];
  let trace: Trace | undefined;
  do {
    const page = await readTracePage(traceId, cursor, signal);
    trace = page.trace;
    events = events.concat(page.events);
    onPage(trace, events);
    cursor = page.nextCursor;
  } while (cursor && !signal.aborted);
  return { trace, events };
}
