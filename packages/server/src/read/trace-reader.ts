import type { Event, FieldError, Trace, TraceStatus } from '@flightlog/protocol';
import type { Store } from '../store/open-store.js';
import { decodeCursor, type TracePage } from '../store/trace-store.js';

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 200;

/** A trace and its events, when the user has a role on the trace's agent. */
export function readTrace(
  store: Store,
  userId: string,
  traceId: string,
): Promise<{ trace: Trace; events: Event[] } | undefined> {
  return store.traces.traceForMember(userId, traceId);
}

export type ListOutcome =
  | { kind: 'page'; page: TracePage }
  | { kind: 'not-found' }
  | { kind: 'invalid'; errors: FieldError[] };

/** One page of an agent's traces, newest first; "not found" for agents the user cannot see. */
export async function listTraces(
  store: Store,
  userId: string,
  agentId: string,
  query: {
    status?: TraceStatus | undefined;
    limit?: string | undefined;
    cursor?: string | undefined;
  },
): Promise<ListOutcome> {
  const errors: FieldError[] = [];
  let limit = DEFAULT_PAGE_SIZE;
  if (query.limit !== undefined) {
    limit = Number(query.limit);
    if (!/^\d+$/.test(query.limit) || limit < 1 || limit > MAX_PAGE_SIZE)
      errors.push({
        pointer: '/querystring/limit',
        detail: `must be a whole number from 1 to ${MAX_PAGE_SIZE}`,
      });
  }
  const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
  if (query.cursor !== undefined && after === undefined)
    errors.push({
      pointer: '/querystring/cursor',
      detail: 'is not a cursor returned by this endpoint',
    });
  if (errors.length > 0) return { kind: 'invalid', errors };

  if ((await store.agents.roleOf(userId, agentId)) === undefined) return { kind: 'not-found' };
  const page = await store.traces.listTraces(agentId, {
    ...(query.status ? { status: query.status } : {}),
    limit,
    ...(after ? { after } : {}),
  });
  return { kind: 'page', page };
}
