import { useEffect, useState } from 'preact/hooks';

/** What the runs list is narrowed to; each is in the page's address, so it can be shared. */
export interface RunFilters {
  status: string;
  tag: string;
  /** ISO instants (the read API's `from`, inclusive, and `to`, exclusive). */
  from: string;
  to: string;
  q: string;
}

export const RUN_FILTER_KEYS = ['status', 'tag', 'from', 'to', 'q'] as const;

/** The dashboard's pages, each with a URL that can be shared and reloaded. */
export type Route =
  | { page: 'agents' }
  | { page: 'new-agent' }
  | { page: 'agent-settings'; agentId: string }
  | { page: 'runs'; agentId: string; filters: RunFilters }
  | { page: 'run'; traceId: string }
  /** A run's public page, from its share link: no sign-in. */
  | { page: 'shared'; token: string }
  | { page: 'compare'; left: string; right: string }
  | { page: 'auth-callback' }
  | { page: 'not-found' };

export function parseRoute(url: URL): Route {
  const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts.length === 0) return { page: 'agents' };
  // the page that creates an agent; the runs of an agent whose id is `new` (only the admin API
  // or the CLI could choose that id) are not reachable from this address
  if (parts[0] === 'agents' && parts[1] === 'new' && parts.length === 2)
    return { page: 'new-agent' };
  if (parts[0] === 'agents' && parts[2] === 'settings' && parts.length === 3)
    return { page: 'agent-settings', agentId: parts[1]! };
  if (parts[0] === 'agents' && parts.length === 2)
    return {
      page: 'runs',
      agentId: parts[1]!,
      filters: {
        status: url.searchParams.get('status') ?? '',
        tag: url.searchParams.get('tag') ?? '',
        from: url.searchParams.get('from') ?? '',
        to: url.searchParams.get('to') ?? '',
        q: url.searchParams.get('q') ?? '',
      },
    };
  if (parts[0] === 'auth' && parts[1] === 'callback' && parts.length === 2)
    return { page: 'auth-callback' };
  if (parts[0] === 'runs' && parts.length === 2) return { page: 'run', traceId: parts[1]! };
  if (parts[0] === 'shared' && parts.length === 2) return { page: 'shared', token: parts[1]! };
  const [left, right] = [url.searchParams.get('a'), url.searchParams.get('b')];
  if (parts[0] === 'compare' && parts.length === 1 && left && right)
    return { page: 'compare', left, right };
  return { page: 'not-found' };
}

export function agentPath(agentId: string, filters: Partial<RunFilters> = {}): string {
  const query = new URLSearchParams();
  for (const key of RUN_FILTER_KEYS) if (filters[key]) query.set(key, filters[key]);
  const search = query.toString();
  return `/agents/${encodeURIComponent(agentId)}${search ? `?${search}` : ''}`;
}
export const newAgentPath = '/agents/new';
export const agentSettingsPath = (agentId: string) =>
  `/agents/${encodeURIComponent(agentId)}/settings`;
export const runPath = (traceId: string) => `/runs/${encodeURIComponent(traceId)}`;
export const comparePath = (left: string, right: string) =>
  `/compare?${new URLSearchParams({ a: left, b: right })}`;

const listeners = new Set<() => void>();

/** Pages reached inside the dashboard are marked so, so `Esc` goes back only within it. */
export const cameFromDashboard = () =>
  (history.state as { inApp?: boolean } | null)?.inApp === true;

export function navigate(path: string, replace = false): void {
  if (replace) history.replaceState(history.state, '', path);
  else history.pushState({ inApp: true }, '', path);
  for (const listener of listeners) listener();
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(new URL(location.href)));
  useEffect(() => {
    const update = () => setRoute(parseRoute(new URL(location.href)));
    listeners.add(update);
    addEventListener('popstate', update);
    return () => {
      listeners.delete(update);
      removeEventListener('popstate', update);
    };
  }, []);
  return route;
}

/** A link that navigates in the page (a modified click still opens a new tab). */
export function onLinkClick(event: MouseEvent, path: string): void {
  if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey)
    return;
  event.preventDefault();
  navigate(path);
}
