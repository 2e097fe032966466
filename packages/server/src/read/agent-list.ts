import { isIdentifier, type AgentList, type FieldError } from '@flightlog/protocol';
import { decodePageCursor, encodePageCursor } from '../store/page-cursor.js';
import type { Store } from '../store/open-store.js';
import { badCursor, parseLimit } from './trace-reader.js';

/** Agents per page of `GET /v1/agents`: a user may have a role on 10,000 agents or more. */
export const DEFAULT_AGENT_PAGE_SIZE = 100;
export const MAX_AGENT_PAGE_SIZE = 500;

/** A cursor's first part names its list, so a cursor of another list is refused here. */
const LIST = 'agents';

export type AgentListOutcome =
  { kind: 'page'; page: AgentList } | { kind: 'invalid'; errors: FieldError[] };

/**
 * One page of the agents `userId` has a role on, by agent id, with their role, trace count and
 * newest trace: the dashboard's first page. Only memberships are read, so another user's agents
 * never appear, and a user with none gets an empty page.
 */
export async function listAgents(
  store: Store,
  userId: string,
  query: { limit?: string | undefined; cursor?: string | undefined },
): Promise<AgentListOutcome> {
  const errors: FieldError[] = [];
  const limit = parseLimit(query.limit, DEFAULT_AGENT_PAGE_SIZE, MAX_AGENT_PAGE_SIZE, errors);
  const after =
    query.cursor === undefined
      ? undefined
      : decodePageCursor(query.cursor, (list) => list === LIST, isIdentifier)?.[1];
  if (query.cursor !== undefined && after === undefined) errors.push(badCursor());
  if (errors.length > 0) return { kind: 'invalid', errors };

  // one more row than the page tells whether another page follows
  const rows = await store.agents.listForMember(userId, after, limit + 1);
  const agents = rows.slice(0, limit);
  const last = agents.at(-1);
  const nextCursor =
    rows.length > limit && last !== undefined ? encodePageCursor(LIST, last.agentId) : null;
  return { kind: 'page', page: { agents, nextCursor } };
}
