import type { Trace } from '@flightlog/protocol';
import { useEffect, useRef, useState } from 'preact/hooks';
import { listTraces } from '../api.js';
import { Link } from '../components/link.js';
import { LiveIndicator, type LiveState } from '../components/live-indicator.js';
import { StatusBadge } from '../components/status-badge.js';
import { TimeAgo } from '../components/time-ago.js';
import { exactTime, formatDecimal, formatDuration, formatRelative, formatUsd } from '../format.js';
import { isOlderSnapshot, openLiveStream } from '../live-stream.js';
import {
  agentSettingsPath,
  comparePath,
  navigate,
  runPath,
  RUN_FILTER_KEYS,
  type RunFilters,
} from '../router.js';
import { FilterBar, matches } from '../components/filter-bar.js';
import { AgentChart } from '../components/agent-chart.js';

/** Newest first, as the read API pages them. */
const newerFirst = (a: Trace, b: Trace) =>
  b.startedAt === a.startedAt ? (a.id < b.id ? 1 : -1) : b.startedAt < a.startedAt ? -1 : 1;

export function RunsPage(props: { agentId: string; filters: RunFilters }) {
  const { agentId, filters } = props;
  const filterKey = JSON.stringify(filters);
  const [rows, setRows] = useState<Trace[]>([]);
  const [nextCursor, setNextCursor] = useState<string | null>(null);
  // set while a search has read only part of the runs: how far back it has searched so far
  const [searchedTo, setSearchedTo] = useState<string | null>(null);
  const [loadingMore, setLoadingMore] = useState(false);
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<string | null>(null);
  const [live, setLive] = useState<{ state: LiveState; detail?: string }>({ state: 'connecting' });
  const [paused, setPaused] = useState(false);
  const [held, setHeld] = useState<Trace[]>([]);
  // two runs picked to be compared, the older pick first
  const [picked, setPicked] = useState<string[]>([]);
  const pausedRef = useRef(paused);
  pausedRef.current = paused;
  // a row never moves under the pointer: new runs wait while it is over the list
  const hoverRef = useRef(false);
  // the row `j`/`k` move to and `Enter` opens
  const [cursorRow, setCursorRow] = useState(-1);
  const cursorRef = useRef(cursorRow);
  const moreRef = useRef<string | null>(null);
  moreRef.current = nextCursor;
  const searchedToRef = useRef<string | null>(null);
  searchedToRef.current = searchedTo;
  const loadingMoreRef = useRef(false);

  // the first page, again whenever the agent or the filter changes
  useEffect(() => {
    const abort = new AbortController();
    setRows([]);
    setHeld([]);
    setLoading(true);
    setError(null);
    setNextCursor(null);
    setSearchedTo(null);
    listTraces(agentId, filters, abort.signal).then(
      (page) => {
        setRows(page.traces);
        setNextCursor(page.nextCursor);
        setSearchedTo(page.searchedTo);
        setLoading(false);
        const remembered = (history.state as { cursorTraceId?: string } | null)?.cursorTraceId;
        const at = page.traces.findIndex((row) => row.id === remembered);
        cursorRef.current = at;
        setCursorRow(at);
      },
      (e: unknown) => {
        if (abort.signal.aborted) return;
        setError(e instanceof Error ? e.message : String(e));
        setLoading(false);
      },
    );
    return () => abort.abort();
    // the filters by value: a new object for the same filters reads nothing again
  }, [agentId, filterKey]);

  // the agent's live stream: a new run appears at the top, a running one updates in place
  useEffect(() => {
    if (loading || error) return undefined;
    return openLiveStream(agentId, {
      onState: (state, detail) => setLive(detail === undefined ? { state } : { state, detail }),
      // updates were missed: the first page again, merged (rows already shown keep their place)
      onResync: () =>
        void listTraces(agentId, filters).then(
          (page) =>
            setRows((current) => {
              const fresh = new Map(page.traces.map((row) => [row.id, row]));
              const kept = current.map((row) => fresh.get(row.id) ?? row);
              const known = new Set(kept.map((row) => row.id));
              return [...kept, ...page.traces.filter((row) => !known.has(row.id))].sort(newerFirst);
            }),
          () => {},
        ),
      onItem: ({ trace }) => {
        if (!matches(trace, filters)) {
          // it left the filters (or never was in them): it goes from the list
          setRows((current) => current.filter((row) => row.id !== trace.id));
          return;
        }
        setRows((current) => {
          const at = current.findIndex((row) => row.id === trace.id);
          if (at >= 0) {
            if (isOlderSnapshot(trace, current[at]!)) return current;
            const next = current.slice();
            next[at] = trace;
            return next;
          }
          // a run older than what the list holds belongs to a later page (the replay on
          // connect): older than the last loaded row, or, when a search stopped part way, than
          // where it stopped (the rows it found may all be much newer)
          const last = current[current.length - 1];
          const edge = searchedToRef.current;
          if (moreRef.current !== null) {
            if (edge !== null ? trace.startedAt < edge : last && newerFirst(trace, last) > 0)
              return current;
          }
          if (pausedRef.current || hoverRef.current) {
            setHeld((waiting) => [trace, ...waiting.filter((row) => row.id !== trace.id)]);
            return current;
          }
          return [...current, trace].sort(newerFirst);
        });
      },
    });
  }, [agentId, filterKey, loading, error]);

  const filtered = RUN_FILTER_KEYS.some((key) => filters[key]);

  const showHeld = () => {
    setRows((current) => {
      const ids = new Set(current.map((row) => row.id));
      return [...current, ...held.filter((row) => !ids.has(row.id))].sort(newerFirst);
    });
    setHeld([]);
  };
  const resume = () => {
    setPaused(false);
    showHeld();
  };

  // keys act on what is shown now, however fast they come: read through refs, not a closure
  const rowsRef = useRef(rows);
  rowsRef.current = rows;
  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      const target = event.target as HTMLElement | null;
      if (target?.closest('input, textarea, select, button')) return;
      const shown = rowsRef.current;
      let at = cursorRef.current;
      if (event.key === 'j') at = Math.min(shown.length - 1, at + 1);
      else if (event.key === 'k') at = Math.max(0, at - 1);
      else if (event.key === 'Enter' && shown[at]) {
        // coming back (Esc, the browser's Back) puts the cursor on this row again
        history.replaceState(
          { ...(history.state as object | null), cursorTraceId: shown[at]!.id },
          '',
        );
        return navigate(runPath(shown[at]!.id));
      } else return;
      cursorRef.current = at;
      setCursorRow(at);
    };
    addEventListener('keydown', onKey);
    return () => removeEventListener('keydown', onKey);
  }, []);
  useEffect(() => {
    if (cursorRow >= 0)
      document.querySelectorAll('tbody tr')[cursorRow]?.scrollIntoView({ block: 'nearest' });
  }, [cursorRow]);

  const loadMore = () => {
    if (!nextCursor || loadingMoreRef.current) return;
    loadingMoreRef.current = true;
    setLoadingMore(true);
    const done = () => {
      loadingMoreRef.current = false;
      setLoadingMore(false);
    };
    void listTraces(agentId, { ...filters, cursor: nextCursor }).then(
      (page) => {
        setRows((current) => {
          const ids = new Set(current.map((row) => row.id));
          return [...current, ...page.traces.filter((row) => !ids.has(row.id))];
        });
        setNextCursor(page.nextCursor);
        setSearchedTo(page.searchedTo);
        done();
      },
      (e: unknown) => {
        setError(e instanceof Error ? e.message : String(e));
        done();
      },
    );
  };
  // a search that stopped part way (each page reads a bounded share of the runs): more may match
  const searchedBack = nextCursor !== null && searchedTo !== null;

  return (
    <main>
      <nav class="crumbs">
        <Link href="/">Agents</Link> <span aria-hidden="true">/</span> <span>{agentId}</span>{' '}
        <span aria-hidden="true">·</span> <Link href={agentSettingsPath(agentId)}>Settings</Link>
      </nav>
      <AgentChart agentId={agentId} />
      <div class="toolbar">
        <h1>Runs</h1>
        <LiveIndicator state={live.state} />
        {picked.length === 2 && (
          <button
            type="button"
            class="button primary"
            onClick={() => navigate(comparePath(picked[0]!, picked[1]!))}
          >
            Compare the 2 picked runs
          </button>
        )}
        <button
          type="button"
          class="button"
          aria-pressed={paused}
          onClick={() => (paused ? resume() : setPaused(true))}
        >
          {paused ? `Resume${held.length ? ` (${held.length} new)` : ''}` : 'Pause'}
        </button>
        {/* in the toolbar, not above the list: telling it must not move the rows under the pointer */}
        <span class="held-note" role="status">
          {!paused && held.length > 0
            ? `${held.length} new ${held.length === 1 ? 'run' : 'runs'}: shown when the pointer leaves the list`
            : ''}
        </span>
      </div>
      <FilterBar agentId={agentId} filters={filters} />
      {live.state === 'interrupted' && (
        <div class="banner warning" role="status">
          Live stream interrupted{live.detail === 'warning' ? '' : ' (reconnecting)'}: new runs will
          appear when delivery resumes.
        </div>
      )}
      {live.state === 'ended' && (
        <div class="banner warning" role="status">
          Live updates stopped:{' '}
          {live.detail === 'signed-out'
            ? 'sign in again'
            : 'you no longer have access to this agent'}
          .
        </div>
      )}
      {paused && held.length > 0 && (
        <div class="banner info" role="status">
          {held.length} new {held.length === 1 ? 'run' : 'runs'} arrived while paused.
        </div>
      )}
      {error && <p class="error-text">Could not load runs: {error}</p>}
      {loading && <p class="muted">Loading…</p>}
      {!loading && !error && rows.length === 0 && !searchedBack && (
        <section class="empty">
          <h2>{filtered ? 'No runs match these filters' : 'No runs yet'}</h2>
          <p>
            Runs appear here live as the agent sends them. Point the client at this server:{' '}
            <code>{`new FlightlogClient({ apiKey, ingestUrl: '${location.origin}' })`}</code>
          </p>
        </section>
      )}
      {rows.length > 0 && (
        <table class="grid runs" aria-label="Runs">
          <thead>
            <tr>
              <th class="pick">
                <span class="visually-hidden">Pick to compare</span>
              </th>
              <th>Status</th>
              <th>Started</th>
              <th class="num">Duration</th>
              <th>Input</th>
              <th class="num">Events</th>
              <th class="num">Tokens</th>
              <th class="num">Cost</th>
              <th class="num">Lamports</th>
              <th>Tools</th>
            </tr>
          </thead>
          <tbody
            onMouseEnter={() => (hoverRef.current = true)}
            onMouseLeave={() => {
              hoverRef.current = false;
              if (!pausedRef.current) showHeld();
            }}
          >
            {rows.map((trace, index) => (
              <tr
                key={trace.id}
                data-trace-id={trace.id}
                class={`${trace.status === 'errored' ? 'row-error' : ''} ${index === cursorRow ? 'cursor-row' : ''}`}
              >
                <td class="pick">
                  <input
                    type="checkbox"
                    aria-label={`Pick ${trace.inputSummary || trace.id} to compare`}
                    checked={picked.includes(trace.id)}
                    onChange={(event) => {
                      const on = (event.target as HTMLInputElement).checked;
                      setPicked((current) =>
                        on
                          ? [...current.filter((id) => id !== trace.id), trace.id].slice(-2)
                          : current.filter((id) => id !== trace.id),
                      );
                    }}
                  />
                </td>
                <td>
                  <StatusBadge status={trace.status} />
                </td>
                <td>
                  <TimeAgo iso={trace.startedAt} />
                </td>
                <td class="num">{formatDuration(trace.durationMs)}</td>
                <td class="summary">
                  <Link href={runPath(trace.id)}>{trace.inputSummary || trace.id}</Link>
                  {trace.errorMessage && <div class="error-text small">{trace.errorMessage}</div>}
                </td>
                <td class="num" data-field="eventCount">
                  {trace.eventCount.toLocaleString()}
                </td>
                <td class="num">{trace.totalTokens.toLocaleString()}</td>
                <td class="num">{formatUsd(trace.totalCostUsd)}</td>
                <td class="num">{formatDecimal(trace.totalLamports)}</td>
                <td class="tools">{trace.toolsCalled.join(', ')}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {searchedBack && (
        <SearchEdge
          searchedTo={searchedTo}
          found={rows.length}
          loading={loadingMore}
          onSearchOlder={loadMore}
        />
      )}
      {nextCursor && !searchedBack && (
        <button type="button" class="button more" onClick={loadMore}>
          Older runs
        </button>
      )}
    </main>
  );
}

/**
 * Where a search stopped: each page of a search reads a bounded share of the agent's runs (the
 * server's rule, so that no search holds up other users), so a page may end before it is full,
 * even with no runs. Never "no runs match" then: say how far back it has looked, and go on on
 * request. The note is a live region, so each step is announced; the button stays in place
 * (never disabled: focus stays on it) while the next step loads.
 */
function SearchEdge(props: {
  searchedTo: string;
  found: number;
  loading: boolean;
  onSearchOlder: () => void;
}) {
  const { searchedTo, found, loading } = props;
  return (
    <section class={`search-edge${found === 0 ? ' empty' : ''}`} aria-label="Search progress">
      <p id="search-edge-note" role="status">
        {loading ? (
          'Searching older runs…'
        ) : (
          <>
            {found === 0 ? 'No matching runs so far. ' : ''}Searched runs back to{' '}
            <time dateTime={searchedTo}>{exactTime(searchedTo)}</time> ({formatRelative(searchedTo)}
            ); older runs are not searched yet.
          </>
        )}
      </p>
      <button
        type="button"
        class="button"
        aria-describedby="search-edge-note"
        aria-busy={loading}
        onClick={props.onSearchOlder}
      >
        Search older
      </button>
    </section>
  );
}
