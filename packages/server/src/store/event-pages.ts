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

export function encodeEventCursor([sequence, id]: EventPosition): string {
  return encodePageCursor(sequence, id);
}

export function decodeEventCursor(cursor: string): EventPosition | undefined {
  // at most 15 digits: within a bigint, so never a database error
  return decodePageCursor(cursor, (sequence) => /^\d{1,15}$/.test(sequence), isIdentifier);
}
