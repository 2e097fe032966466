import type { Event, FieldError, Trace, TraceStatus } from '@flightlog/protocol';
import type { Store } from '../store/open-store.js';
import { decodeEventCursor, type EventPosition } from '../store/event-pages.js';
import { decodeCursor, type TracePage } from '../store/trace-store.js';

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 200;

export const DEFAULT_EVENT_PAGE_SIZE = 500;
export const MAX_EVENT_PAGE_SIZE = 1000;
/** Payload bytes per page of events: what one read may load, whatever the trace holds. */
export const EVENT_PAGE_MAX_BYTES = 1024 * 1024;

export type TraceOutcome =
  | { kind: 'found'; trace: Trace; events: Event[]; nextCursor: string | null }
  | { kind: 'not-found' }
  | { kind: 'invalid'; errors: FieldError[] };

/**
 * A trace and one page of its events, when the user has a role on the trace's agent. Without a
 * cursor the page starts at the first event; a page holds at most `limit` events and about
 * EVENT_PAGE_MAX_BYTES of them, so no request loads a whole trace.
 */
export async function readTrace(
  store: Store,
  userId: string,
  traceId: string,
  query: EventPageQuery = {},
  shareLinks?: CurrentShareToken,
): Promise<TraceOutcome> {
  const page = eventPageOf(query);
  if ('errors' in page) return { kind: 'invalid', errors: page.errors };
  const found = await store.traces.traceForMember(userId, traceId, page);
  if (!found) return { kind: 'not-found' };
  // the team sees the run's current public link (the store keeps only its hash and sealed copy)
  const shareToken = shareLinks ? await shareLinks.currentToken(traceId) : null;
  return { kind: 'found', ...found, trace: { ...found.trace, shareToken } };
}

/** Where a run's current share token is read from (sharing/share-links.ts). */
export interface CurrentShareToken {
  currentToken(traceId: string): Promise<string | null>;
}

/** The query of a page of a run's events. */
export interface EventPageQuery {
  limit?: string | undefined;
  cursor?: string | undefined;
}

/**
 * The page a query asks for (at most `limit` events, about EVENT_PAGE_MAX_BYTES of them, after
 * the cursor's event), or what is wrong with it.
 */
export function eventPageOf(
  query: EventPageQuery,
): { limit: number; maxBytes: number; after?: EventPosition } | { errors: FieldError[] } {
  const errors: FieldError[] = [];
  const limit = parseLimit(query.limit, DEFAULT_EVENT_PAGE_SIZE, MAX_EVENT_PAGE_SIZE, errors);
  const after = query.cursor === undefined ? undefined : decodeEventCursor(query.cursor);
  if (query.cursor !== undefined && after === undefined) errors.push(badCursor());
  if (errors.length > 0) return { errors };
  return { limit, maxBytes: EVENT_PAGE_MAX_BYTES, ...(after ? { after } : {}) };
}

/** A list's `limit` query parameter: `fallback` when absent; else an error in `errors`. */
export function parseLimit(
  text: string | undefined,
  fallback: number,
  max: number,
  errors: FieldError[],
): number {
  if (text === undefined) return fallback;
  const limit = Number(text);
  if (!/^\d+$/.test(text) || limit < 1 || limit > max)
    errors.push({
      pointer: '/querystring/limit',
      detail: `must be a whole number from 1 to ${max}`,
    });
  return limit;
}

/** The field error of a cursor this endpoint did not write. */
export function badCursor(): FieldError {
  return { pointer: '/querystring/cursor', detail: 'is not a cursor returned by this endpoint' };
}

export type ListOutcome =
  | { kind: 'page'; page: TracePage }
  | { kind: 'not-found' }
  | { kind: 'invalid'; errors: FieldError[] };

/** The runs list's query string, as the route validated it (dates and text by their schemas). */
export interface ListQuery {
  status?: TraceStatus | undefined;
  tag?: string | undefined;
  from?: string | undefined;
  to?: string | undefined;
  q?: string | undefined;
  limit?: string | undefined;
  cursor?: string | undefined;
}

/**
 * One page of an agent's traces, newest first, narrowed by every filter given; "not found" for
 * agents the user cannot see. A cursor carries only the position, so the client sends the same
 * filters with it; the pages of one filtered walk then hold each matching run exactly once.
 */
export async function listTraces(
  store: Store,
  userId: string,
  agentId: string,
  query: ListQuery,
): Promise<ListOutcome> {
  const errors: FieldError[] = [];
  const limit = parseLimit(query.limit, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, errors);
  const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
  if (query.cursor !== undefined && after === undefined) errors.push(badCursor());
  // A range that ends before it starts is a mistake, not a question with no answer (compared to
  // the millisecond: a range within one millisecond is asked as given).
  if (
    query.from !== undefined &&
    query.to !== undefined &&
    Date.parse(query.to) < Date.parse(query.from)
  )
    errors.push({ pointer: '/querystring/to', detail: 'must not be earlier than from' });
  if (errors.length > 0) return { kind: 'invalid', errors };

  if ((await store.agents.roleOf(userId, agentId)) === undefined) return { kind: 'not-found' };
  const page = await store.traces.listTraces(agentId, {
    ...(query.status ? { status: query.status } : {}),
    ...(query.tag !== undefined ? { tag: query.tag } : {}),
    ...(query.from !== undefined ? { from: query.from } : {}),
    ...(query.to !== undefined ? { to: query.to } : {}),
    // an empty search box searches for nothing in particular: every run
    ...(query.q ? { text: query.q } : {}),
    limit,
    ...(after ? { after } : {}),
  });
  return { kind: 'page', page };
}
