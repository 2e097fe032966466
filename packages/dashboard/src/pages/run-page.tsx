import type { Event, Trace, TraceAnalysis } from '@flightlog/protocol';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { ApiError, readAnalysis, readTracePage, type RunSource } from '../api.js';
import { loadRun, withEvents } from '../run-loader.js';
import { CopyId } from '../components/copy-id.js';
import { JsonView } from '../components/json-view.js';
import { LiveIndicator, type LiveState } from '../components/live-indicator.js';
import { LockedPayload } from '../components/locked-payload.js';
import { Link } from '../components/link.js';
import { ProofState } from '../components/proof-state.js';
import { ShareControl } from '../components/share-control.js';
import { MarkdownView, safeHref } from '../components/markdown-view.js';
import { StatusBadge } from '../components/status-badge.js';
import { TimeAgo } from '../components/time-ago.js';
import { Waterfall } from '../components/waterfall.js';
import { formatCount, formatDecimal, formatDuration, formatUsd } from '../format.js';
import { isOlderSnapshot, openLiveStream } from '../live-stream.js';
import { agentPath, cameFromDashboard, navigate } from '../router.js';
import { firstFailure, layoutWaterfall, stepName } from '../waterfall-layout.js';

/** How long a shared running run waits between two reads of it (it has no live stream). */
const SHARED_POLL_MS = 3_000;

/**
 * A run: its header, waterfall, selected step and autopsy. As a member (`/runs/:id`) with links
 * to its agent, live updates from the agent's stream and the share control; from a share link
 * (`/shared/:token`) the same run read-only, and nothing that leads elsewhere.
 */
export function RunPage(props: { source: RunSource }) {
  const { source } = props;
  const shared = source.kind === 'shared';
  // what the page reads again when it changes
  const sourceKey = source.kind === 'shared' ? `shared:${source.token}` : source.traceId;
  const [trace, setTrace] = useState<Trace | null>(null);
  const [events, setEvents] = useState<Event[]>([]);
  const [error, setError] = useState<{ status?: number; message: string } | null>(null);
  const [selected, setSelected] = useState<string | null>(null);
  const [analysis, setAnalysis] = useState<TraceAnalysis | null>(null);
  const [live, setLive] = useState<LiveState | null>(null);
  // every page of the run's events is in (what a downloaded proof needs)
  const [complete, setComplete] = useState(false);

  // the run and all its events, page by page
  useEffect(() => {
    const abort = new AbortController();
    setTrace(null);
    setEvents([]);
    setError(null);
    setSelected(null);
    setComplete(false);
    loadRun(source, abort.signal, (page, pageEvents) => {
      if (abort.signal.aborted) return;
      setTrace(page);
      // merged: the live stream may have brought some of these (or later ones) already
      setEvents((current) => withEvents(current, pageEvents));
    })
      .then(({ events: all }) => {
        if (abort.signal.aborted) return;
        setComplete(true);
        // a failed run opens at its first failing step
        const failure = firstFailure(all);
        if (failure) setSelected(failure.id);
      })
      .catch((e: unknown) => {
        if (abort.signal.aborted) return;
        setError({
          message: e instanceof Error ? e.message : String(e),
          ...(e instanceof ApiError ? { status: e.status } : {}),
        });
      });
    return () => abort.abort();
    // (sourceKey stands for source: a new object each render, the same run)
  }, [sourceKey]);

  // a running run updates live: its agent's stream, this run's messages (a finished one does not
  // change, and its agent's replay is not worth reading for it)
  const agentId = trace?.agentId;
  const traceId = trace?.id;
  const running = trace?.status === 'running';
  useEffect(() => {
    if (!agentId || !running || shared) return undefined;
    return openLiveStream(agentId, {
      onState: (state) => setLive(state),
      onItem: (item) => {
        if (item.trace.id !== traceId) return;
        setTrace((current) =>
          current && isOlderSnapshot(item.trace, current) ? current : item.trace,
        );
        // nothing new (a replayed batch): the same array, so nothing is laid out again
        if (item.events.length > 0) setEvents((current) => withEvents(current, item.events));
      },
    });
  }, [agentId, traceId, running, shared]);

  // A shared running run has no stream of its own: every few seconds the page asks for its
  // snapshot alone (one event), and reads the run again only when the snapshot changed.
  const snapshotKey = trace ? `${trace.eventCount}|${trace.status}|${trace.durationMs}` : '';
  useEffect(() => {
    if (!running || !shared) return undefined;
    const abort = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const read = () => {
      timer = setTimeout(() => {
        readTracePage(source, null, abort.signal, 1)
          .then(async (probe) => {
            const probeKey = `${probe.trace.eventCount}|${probe.trace.status}|${probe.trace.durationMs}`;
            if (probeKey === snapshotKey || abort.signal.aborted) return;
            await loadRun(source, abort.signal, (page, pageEvents) => {
              if (abort.signal.aborted) return;
              setTrace((current) => (current && isOlderSnapshot(page, current) ? current : page));
              setEvents((current) => withEvents(current, pageEvents));
            });
          })
          .then(read, (e: unknown) => {
            if (abort.signal.aborted) return;
            // unshared meanwhile: the page says so instead of showing a run it no longer may
            if (e instanceof ApiError && e.status === 404)
              setError({ status: 404, message: e.message });
            else read();
          });
      }, SHARED_POLL_MS);
    };
    read();
    return () => {
      abort.abort();
      clearTimeout(timer);
    };
    // (sourceKey stands for source: a new object each render, the same run)
  }, [sourceKey, running, shared, snapshotKey]);

  // the autopsy, once the run has finished; polled while pending
  const finished = trace !== null && trace.status !== 'running';
  useEffect(() => {
    if (!finished) return undefined;
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const poll = () => {
      readAnalysis(source).then(
        (answer) => {
          if (stopped) return;
          setAnalysis(answer);
          if (answer.status === 'pending') timer = setTimeout(poll, 2000);
        },
        () => {
          if (!stopped) timer = setTimeout(poll, 5000);
        },
      );
    };
    poll();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
    // (sourceKey stands for source: a new object each render, the same run)
  }, [sourceKey, finished]);

  const rows = useMemo(() => layoutWaterfall(events), [events]);

  // Esc goes back where the person came from (the runs list, a comparison)
  const agentOfRun = shared ? undefined : trace?.agentId;
  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      if (
        event.key !== 'Escape' ||
        (event.target as HTMLElement | null)?.closest('input, textarea')
      )
        return;
      if (cameFromDashboard() && !shared) history.back();
      else if (agentOfRun) navigate(agentPath(agentOfRun));
    };
    addEventListener('keydown', onKey);
    return () => removeEventListener('keydown', onKey);
  }, [agentOfRun, shared]);
  const selectedEvent = events.find((e) => e.id === selected) ?? null;
  const failure = useMemo(() => firstFailure(events), [events]);

  if (error)
    return (
      <main>
        <p class="error-text">
          {error.status === 404
            ? shared
              ? 'This link shares nothing: it was never valid, or the run was unshared or deleted.'
              : 'No such run, or you have no access to it.'
            : `Could not load the run: ${error.message}`}
        </p>
        {!shared && <Link href="/">Back to agents</Link>}
      </main>
    );
  if (!trace)
    return (
      <main>
        <p class="muted">Loading…</p>
      </main>
    );

  return (
    <main class="run">
      {shared ? (
        <nav class="crumbs">
          <span class="shared-label">Shared run, read-only</span> <span aria-hidden="true">/</span>{' '}
          <CopyId id={trace.id} />
        </nav>
      ) : (
        <nav class="crumbs">
          <Link href="/">Agents</Link> <span aria-hidden="true">/</span>{' '}
          <Link href={agentPath(trace.agentId)}>{trace.agentId}</Link>{' '}
          <span aria-hidden="true">/</span> <CopyId id={trace.id} />
          <ShareControl
            traceId={trace.id}
            shareToken={trace.shareToken ?? null}
            onChange={(shareToken) =>
              setTrace((current) => (current ? { ...current, shareToken } : current))
            }
          />
        </nav>
      )}
      <header class="run-header">
        <h1>
          <StatusBadge status={trace.status} />{' '}
          <span class="summary-text">{trace.inputSummary || trace.id}</span>
          {running && live && <LiveIndicator state={live} />}
        </h1>
        <p class="facts">
          <span>
            started <TimeAgo iso={trace.startedAt} />
          </span>
          <span>{formatDuration(trace.durationMs)}</span>
          <span>{formatCount(trace.eventCount, 'event')}</span>
          <span>{formatCount(trace.totalTokens, 'token')}</span>
          <span>{formatUsd(trace.totalCostUsd)}</span>
          <span>{formatDecimal(trace.totalLamports)} lamports</span>
          {trace.chainTxCount > 0 && <span>{formatCount(trace.chainTxCount, 'transaction')}</span>}
        </p>
        {trace.errorMessage && <p class="error-text">{trace.errorMessage}</p>}
        {trace.outputSummary && <p class="output">{trace.outputSummary}</p>}
        {trace.tags.length > 0 && (
          <p class="tags">
            {trace.tags.map((tag) => (
              <span class="tag" key={tag}>
                {tag}
              </span>
            ))}
          </p>
        )}
      </header>

      <section class="waterfall-section">
        <div class="toolbar">
          <h2>Steps</h2>
          {failure && (
            <button type="button" class="button danger" onClick={() => setSelected(failure.id)}>
              ✕ First failure: {stepName(failure)}
            </button>
          )}
        </div>
        {rows.length === 0 ? (
          <p class="muted">No events yet.</p>
        ) : (
          <Waterfall rows={rows} selected={selected} onSelect={setSelected} />
        )}
      </section>

      {selectedEvent && <EventDetail event={selectedEvent} />}

      <ProofState trace={trace} events={events} complete={complete} />

      <section class="autopsy">
        <h2>
          Autopsy{' '}
          {analysis && (
            <span class="muted small">
              {analysis.status}
              {analysis.analyzer ? ` · ${analysis.analyzer}` : ''}
            </span>
          )}
        </h2>
        {!finished && <p class="muted">The autopsy is written once the run has finished.</p>}
        {finished && !analysis && <p class="muted">Loading…</p>}
        {analysis?.status === 'pending' && <p class="muted">Being written…</p>}
        {analysis?.status === 'failed' && <p class="error-text">The analysis failed.</p>}
        {analysis?.autopsy && <MarkdownView source={analysis.autopsy} />}
      </section>
    </main>
  );
}

function EventDetail(props: { event: Event }) {
  const { event } = props;
  const p = event.payload as Record<string, unknown>;
  const field = (label: string, value: unknown) =>
    value === undefined || value === null || value === '' ? null : (
      <>
        <dt>{label}</dt>
        <dd>{typeof value === 'string' ? value : JSON.stringify(value)}</dd>
      </>
    );
  const explorer =
    event.type === 'chain_tx' && typeof p.signature === 'string'
      ? safeHref(
          `https://explorer.solana.com/tx/${encodeURIComponent(p.signature)}${p.network === 'mainnet' ? '' : '?cluster=devnet'}`,
        )
      : undefined;
  return (
    <section class="event-detail" aria-label="Selected step">
      <h2>
        <StatusBadge status={event.status} /> {event.type} · {stepName(event)}
      </h2>
      <dl>
        {field('Event', event.id)}
        {field('Sequence', String(event.sequence))}
        {field('Started', event.startedAt)}
        {field('Duration', formatDuration(event.durationMs))}
        {field('Error', event.errorMessage)}
        {event.type === 'llm_call' && !event.payloadEncrypted && (
          <>
            {field('Model', p.model)}
            {field('Provider', p.provider)}
            {field('Tokens', (p.usage as { totalTokens?: unknown } | undefined)?.totalTokens)}
            {field(
              'Cost',
              typeof p.costUsd === 'string'
                ? formatUsd(p.costUsd)
                : p.costUsd === undefined
                  ? undefined
                  : `$${String(p.costUsd)}`,
            )}
          </>
        )}
        {event.type === 'chain_tx' && !event.payloadEncrypted && (
          <>
            {field('Signature', p.signature)}
            {field(
              'Lamports',
              typeof p.lamports === 'string' ? formatDecimal(p.lamports) : p.lamports,
            )}
            {field('Network', p.network)}
          </>
        )}
        {event.type === 'x402_payment' && !event.payloadEncrypted && (
          <>
            {field('Resource', p.resource)}
            {field('Amount', p.amount)}
            {field('Asset', p.asset)}
            {field('Settled', p.settled === undefined ? undefined : String(p.settled))}
          </>
        )}
        {event.type === 'mcp_call' && !event.payloadEncrypted && (
          <>
            {field('Server', p.server)}
            {field('Method', p.method)}
            {field('Tool', p.tool)}
          </>
        )}
      </dl>
      {explorer && (
        <p>
          <a href={explorer} target="_blank" rel="noopener noreferrer">
            View the transaction in the Solana explorer
          </a>
        </p>
      )}
      {event.payloadEncrypted ? (
        <LockedPayload envelope={event.payload} />
      ) : event.type === 'llm_call' ? (
        <>
          {(p.input as { messages?: unknown } | undefined)?.messages !== undefined && (
            <JsonView label="messages" value={(p.input as { messages: unknown }).messages} />
          )}
          {p.output !== undefined && <JsonView label="output" value={p.output} />}
          <JsonView label="payload" value={p} open={false} />
        </>
      ) : event.type === 'tool_call' || event.type === 'mcp_call' ? (
        <>
          {p.input !== undefined && <JsonView label="input" value={p.input} />}
          {p.output !== undefined && <JsonView label="output" value={p.output} />}
          <JsonView label="payload" value={p} open={false} />
        </>
      ) : (
        <JsonView value={p} />
      )}
    </section>
  );
}
