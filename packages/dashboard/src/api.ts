import type {
  AgentList,
  AgentStats,
  Event,
  StatsWindow,
  Trace,
  TraceAnalysis,
  TraceList,
} from '@flightlog/protocol';
import { RUN_FILTER_KEYS, type RunFilters } from './router.js';
import { currentToken } from './session.js';

/** A refusal of the API, as its problem document says it. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Listeners told when the server no longer accepts the token (expired, revoked). */
const unauthorizedListeners = new Set<() => void>();
export function onUnauthorized(listener: () => void): () => void {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
}

export function getJson<T>(path: string, signal?: AbortSignal): Promise<T> {
  return getJsonAs<T>(path, currentToken(), signal);
}

/** A read of the API with `token` (the signed-in user's, or a share link's). */
async function getJsonAs<T>(path: string, token: string | null, signal?: AbortSignal): Promise<T> {
  const response = await fetch(path, {
    headers: { accept: 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    ...(signal ? { signal } : {}),
  });
  if (response.status === 401) for (const listener of unauthorizedListeners) listener();
  if (!response.ok) throw await apiError(response);
  return (await response.json()) as T;
}

/** The refusal a response stands for, with its problem document's detail. */
async function apiError(response: Response): Promise<ApiError> {
  let detail = response.statusText;
  try {
    const problem = (await response.json()) as { detail?: unknown; title?: unknown };
    if (typeof problem.detail === 'string') detail = problem.detail;
    else if (typeof problem.title === 'string') detail = problem.title;
  } catch {
    // not a problem document: the status text says enough
  }
  return new ApiError(response.status, detail);
}

/** A request of the API with the signed-in user's token; `undefined` for a `204`. */
export async function sendJson<T>(
  method: string,
  path: string,
  body?: unknown,
  signal?: AbortSignal,
): Promise<T> {
  const token = currentToken();
  const response = await fetch(path, {
    method,
    headers: {
      accept: 'application/json',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    ...(signal ? { signal } : {}),
  });
  if (response.status === 401) for (const listener of unauthorizedListeners) listener();
  if (!response.ok) throw await apiError(response);
  if (response.status === 204) return undefined as T;
  return (await response.json()) as T;
}

/**
 * A page of the runs list. A search may stop before the page is full (`searchedTo` set, with a
 * `nextCursor`): its runs are every match among those searched so far, maybe none.
 */
export type TracesPage = TraceList;

export interface TracePage {
  trace: Trace;
  events: Event[];
  nextCursor: string | null;
}

export const listAgents = (signal?: AbortSignal) => getJson<AgentList>('/v1/agents', signal);

export function listTraces(
  agentId: string,
  query: Partial<RunFilters> & { cursor?: string | null; limit?: number },
  signal?: AbortSignal,
): Promise<TracesPage> {
  const params = new URLSearchParams();
  for (const key of RUN_FILTER_KEYS) if (query[key]) params.set(key, query[key]);
  if (query.cursor) params.set('cursor', query.cursor);
  params.set('limit', String(query.limit ?? 50));
  return getJson(`/v1/agents/${encodeURIComponent(agentId)}/traces?${params}`, signal);
}

/** Where a run page reads its run from: the read API as a member, or a share link. */
export type RunSource = { kind: 'member'; traceId: string } | { kind: 'shared'; token: string };

/** A small first page paints at once; the rest comes in pages of the most the API gives. */
function pageQuery(cursor: string | null, limit?: number): URLSearchParams {
  const params = new URLSearchParams({ limit: String(limit ?? (cursor ? 1000 : 200)) });
  if (cursor) params.set('cursor', cursor);
  return params;
}

export function readTracePage(
  source: RunSource,
  cursor: string | null,
  signal?: AbortSignal,
  limit?: number,
): Promise<TracePage> {
  const query = pageQuery(cursor, limit);
  // a share link's token goes as the credential, never in an address
  if (source.kind === 'shared') return getJsonAs(`/v1/shared/trace?${query}`, source.token, signal);
  return getJson(`/v1/traces/${encodeURIComponent(source.traceId)}?${query}`, signal);
}

export const readAnalysis = (source: RunSource, signal?: AbortSignal) =>
  source.kind === 'shared'
    ? getJsonAs<TraceAnalysis>('/v1/shared/analysis', source.token, signal)
    : getJson<TraceAnalysis>(`/v1/traces/${encodeURIComponent(source.traceId)}/analysis`, signal);

/** A run's public link, as the API answers sharing it. */
export interface ShareLink {
  shareToken: string;
  path: string;
}

export const shareRun = (traceId: string) =>
  sendJson<ShareLink>('POST', `/v1/traces/${encodeURIComponent(traceId)}/share`, {});

export const unshareRun = (traceId: string) =>
  sendJson<undefined>('DELETE', `/v1/traces/${encodeURIComponent(traceId)}/share`);

export const readAgentStats = (agentId: string, window: StatsWindow, signal?: AbortSignal) =>
  getJson<AgentStats>(`/v1/agents/${encodeURIComponent(agentId)}/stats?window=${window}`, signal);
