import type { Event, Trace } from '@flightlog/protocol';
import { readTracePage, type RunSource } from './api.js';

/** `current` with those of `more` it does not hold yet (by id); `current` itself when none. */
export function withEvents(current: Event[], more: readonly Event[]): Event[] {
  const known = new Set(current.map((e) => e.id));
  const added = more.filter((e) => !known.has(e.id));
  return added.length === 0 ? current : [...current, ...added];
}

/**
 * Reads a run and all its events page by page, telling `onPage` each page's events (to be
 * merged with what the page may already hold from its live stream, never to replace it).
 */
export async function loadRun(
  source: RunSource,
  signal: AbortSignal,
  onPage: (trace: Trace, pageEvents: Event[]) => void,
): Promise<{ trace: Trace; events: Event[] }> {
  let cursor: string | null = null;
  let events: Event[] = [];
  let trace: Trace | undefined;
  do {
    const page = await readTracePage(source, cursor, signal);
    trace = page.trace;
    events = events.concat(page.events);
    onPage(trace, page.events);
    cursor = page.nextCursor;
  } while (cursor && !signal.aborted);
  return { trace, events };
}
