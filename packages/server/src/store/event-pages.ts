import { isIdentifier, type Event } from '@flightlog/protocol';
import { decodePageCursor, encodePageCursor } from './page-cursor.js';
import type { SqlExecutor } from './sql-client.js';
import { EVENT_COLUMNS, eventFromRow, type EventRow } from './trace-rows.js';

/**
 * Reading a trace's events under a byte budget. A trace may hold 20,000 events of any size, so
 * no read loads them all: first the keys and sizes of at most `limit` events (small rows; the
 * payloads stay in the database, only their lengths are computed), then the full rows of the
 * prefix that fits the budget.
 */

/** Where an event sits in a trace's order: its sequence (as text, it is a bigint) and id. */
export type EventPosition = [sequence: string, id: string];

export interface EventKey {
  id: string;
  sequence: string;
  /** Bytes of the payload and error message as stored: what loading the event costs. */
  bytes: number;
}

const KEY_COLUMNS = `e.id, e.sequence::text AS sequence,
  (octet_length(e.payload::text) + coalesce(octet_length(e.error_message), 0))::int AS bytes`;

/**
 * Keys of up to `limit` events of a trace, by sequence then id: after `after` ascending, or from
 * the end descending. `e.sequence >= $2` lets the (trace_id, sequence) index start at the cursor.
 */
export function eventKeys(
  sql: SqlExecutor,
  traceId: string,
  options: { limit: number; after?: EventPosition; newestFirst?: boolean },
): Promise<EventKey[]> {
  const order = options.newestFirst ? 'e.sequence DESC, e.id DESC' : 'e.sequence, e.id';
  return sql.query<EventKey>(
    `SELECT ${KEY_COLUMNS} FROM events e
     WHERE e.trace_id = $1
       AND ($2::bigint IS NULL OR (e.sequence >= $2::bigint AND (e.sequence, e.id) > ($2::bigint, $3::text)))
     ORDER BY ${order}
     LIMIT $4`,
    [traceId, options.after?.[0] ?? null, options.after?.[1] ?? null, options.limit],
  );
}

/** The longest prefix of `keys` within `maxBytes`; never empty when `keys` is not (one event larger than the budget is still read alone). */
export function withinBytes(keys: EventKey[], maxBytes: number): EventKey[] {
  let total = 0;
  let end = 0;
  while (end < keys.length) {
    const next = keys[end] as EventKey;
    if (end > 0 && total + next.bytes > maxBytes) break;
    total += next.bytes;
    end++;
  }
  return keys.slice(0, end);
}

/** The full events of `keys`, by sequence then id. */
export async function eventsOf(
  sql: SqlExecutor,
  traceId: string,
  keys: EventKey[],
): Promise<Event[]> {
  if (keys.length === 0) return [];
  const rows = await sql.query<EventRow>(
    `SELECT ${EVENT_COLUMNS} FROM events e
     WHERE e.trace_id = $1 AND e.id = ANY($2::text[])
     ORDER BY e.sequence, e.id`,
    [traceId, keys.map((k) => k.id)],
  );
  return rows.map(eventFromRow);
}

/** One page of a trace's events after `after` (from the first without it), and where the next starts. */
export interface EventPage {
  events: Event[];
  /** The last event's position when more events follow it; null on the page with the last one. */
  next: EventPosition | null;
}

/**
 * At most `limit` events of a trace after `after`, by sequence then id, and no more than
 * `maxBytes` of them (one larger event alone): what the read API and the export page through.
 */
export async function eventPage(
  sql: SqlExecutor,
  traceId: string,
  page: { limit: number; maxBytes: number; after?: EventPosition },
): Promise<EventPage> {
  const keys = await eventKeys(sql, traceId, {
    limit: page.limit + 1,
    ...(page.after ? { after: page.after } : {}),
  });
  const kept = withinBytes(keys.slice(0, page.limit), page.maxBytes);
  const last = kept[kept.length - 1];
  return {
    events: await eventsOf(sql, traceId, kept),
    next: kept.length < keys.length && last ? [last.sequence, last.id] : null,
  };
}

/** The first events of one trace of {@link eventHeads}. */
export interface EventHead {
  events: Event[];
  /** Where the trace's next events start when more follow (page on with {@link eventPage}). */
  next: EventPosition | null;
}

/**
 * The first events of each of several traces, in two statements whatever their number: at most
 * `perTrace` events of each trace (by sequence, then id), and no more than `maxBytes` of them
 * all, in the order given (one event larger than the budget is read alone). A head for each
 * trace the budget reached, in order: at least the first; the traces after them are not read
 * (ask again for those). Where a trace holds a handful of events, as most runs do, a page of
 * runs costs as much as one page of events instead of a page of statements per run.
 *
 * The first statement reads the keys and sizes of at most `perTrace + 1` events per trace
 * (the extra one only tells that more follow): each a range of the (trace_id, sequence) index.
 */
export async function eventHeads(
  sql: SqlExecutor,
  traceIds: readonly string[],
  options: { perTrace: number; maxBytes: number },
): Promise<EventHead[]> {
  if (traceIds.length === 0) return [];
  const rows = await sql.query<EventKey & { n: number }>(
    `SELECT k.n::int AS n, k.id, k.sequence, k.bytes
     FROM unnest($1::text[]) WITH ORDINALITY AS u(trace_id, n)
     CROSS JOIN LATERAL (
       SELECT u.n, ${KEY_COLUMNS} FROM events e
       WHERE e.trace_id = u.trace_id
       ORDER BY e.sequence, e.id
       LIMIT $2
     ) k
     ORDER BY k.n, k.sequence::bigint, k.id`,
    [traceIds, options.perTrace + 1],
  );
  const keysOf: EventKey[][] = traceIds.map(() => []);
  for (const { n, ...key } of rows) keysOf[n - 1]?.push(key);
  const budget = keysOf.flatMap((keys) => keys.slice(0, options.perTrace));
  const fits = withinBytes(budget, options.maxBytes).length;
  const loaded: { keys: EventKey[]; next: EventPosition | null }[] = [];
  let offset = 0;
  for (const keys of keysOf) {
    const head = keys.slice(0, options.perTrace);
    // a trace with events that the budget did not reach: it and those after it wait
    if (head.length > 0 && offset >= fits) break;
    const within = Math.max(0, Math.min(head.length, fits - offset));
    const last = head[within - 1];
    loaded.push({
      keys: head.slice(0, within),
      next: keys.length > within && last ? [last.sequence, last.id] : null,
    });
    offset += head.length;
  }
  const events = await eventsOfTraces(
    sql,
    loaded.flatMap((head) => head.keys),
  );
  return loaded.map((head) => ({
    // an event deleted between the two statements is left out, as eventsOf does
    events: head.keys.flatMap((key) => events.get(key.id) ?? []),
    next: head.next,
  }));
}

/** The full events of `keys`, of any traces, by id. */
async function eventsOfTraces(sql: SqlExecutor, keys: EventKey[]): Promise<Map<string, Event>> {
  if (keys.length === 0) return new Map();
  const rows = await sql.query<EventRow>(
    `SELECT ${EVENT_COLUMNS} FROM events e WHERE e.id = ANY($1::text[])`,
    [keys.map((k) => k.id)],
  );
  return new Map(rows.map((row) => [row.id, eventFromRow(row)]));
}

export function encodeEventCursor([sequence, id]: EventPosition): string {
  return encodePageCursor(sequence, id);
}

export function decodeEventCursor(cursor: string): EventPosition | undefined {
  // at most 15 digits: within a bigint, so never a database error
  return decodePageCursor(cursor, (sequence) => /^\d{1,15}$/.test(sequence), isIdentifier);
}
