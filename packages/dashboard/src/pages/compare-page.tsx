import type { Event, Trace } from '@flightlog/protocol';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { Link } from '../components/link.js';
import { StatusBadge } from '../components/status-badge.js';
import { formatDecimal, formatDuration, formatUsd } from '../format.js';
import { alignRuns, firstDivergence, MAX_ALIGNED_STEPS } from '../run-alignment.js';
import { loadRun } from '../run-loader.js';
import { runPath } from '../router.js';
import { stepName } from '../waterfall-layout.js';

interface LoadedRun {
  trace: Trace;
  events: Event[];
}

function useRun(traceId: string): { run: LoadedRun | null; error: string | null } {
  const [run, setRun] = useState<LoadedRun | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const abort = new AbortController();
    setRun(null);
    setError(null);
    loadRun({ kind: 'member', traceId }, abort.signal, () => {}).then(
      (loaded) => !abort.signal.aborted && setRun(loaded),
      (e: unknown) => !abort.signal.aborted && setError(e instanceof Error ? e.message : String(e)),
    );
    return () => abort.abort();
  }, [traceId]);
  return { run, error };
}

/** Two runs side by side: what differs in their totals, and where their steps part ways. */
export function ComparePage(props: { left: string; right: string }) {
  const left = useRun(props.left);
  const right = useRun(props.right);
  const steps = useMemo(
    () => (left.run && right.run ? alignRuns(left.run.events, right.run.events) : []),
    [left.run, right.run],
  );
  const divergence = firstDivergence(steps);

  if (left.error || right.error)
    return (
      <main>
        <p class="error-text">Could not load both runs: {left.error ?? right.error}</p>
      </main>
    );
  if (!left.run || !right.run)
    return (
      <main>
        <p class="muted">Loading…</p>
      </main>
    );
  const a = left.run.trace;
  const b = right.run.trace;
  const toolsOnlyIn = (x: Trace, y: Trace) =>
    x.toolsCalled.filter((tool) => !y.toolsCalled.includes(tool));
  const facts: Array<[string, string, string]> = [
    ['Status', a.status, b.status],
    ['Duration', formatDuration(a.durationMs), formatDuration(b.durationMs)],
    ['Events', a.eventCount.toLocaleString(), b.eventCount.toLocaleString()],
    ['Tokens', a.totalTokens.toLocaleString(), b.totalTokens.toLocaleString()],
    ['Cost', formatUsd(a.totalCostUsd), formatUsd(b.totalCostUsd)],
    ['Lamports', formatDecimal(a.totalLamports), formatDecimal(b.totalLamports)],
    [
      'Tools only in this run',
      toolsOnlyIn(a, b).join(', ') || '—',
      toolsOnlyIn(b, a).join(', ') || '—',
    ],
  ];

  return (
    <main class="compare">
      <nav class="crumbs">
        <Link href="/">Agents</Link> <span aria-hidden="true">/</span> <span>Compare two runs</span>
      </nav>
      <h1>Compare two runs</h1>
      <table class="grid compare-facts" aria-label="Totals compared">
        <thead>
          <tr>
            <th />
            <th>
              <Link href={runPath(a.id)}>{a.inputSummary || a.id}</Link>
            </th>
            <th>
              <Link href={runPath(b.id)}>{b.inputSummary || b.id}</Link>
            </th>
          </tr>
        </thead>
        <tbody>
          {facts.map(([label, x, y]) => (
            <tr key={label} class={x !== y ? 'differs' : ''} data-fact={label}>
              <th scope="row">{label}</th>
              <td class="num">{label === 'Status' ? <StatusBadge status={x} /> : x}</td>
              <td class="num">{label === 'Status' ? <StatusBadge status={y} /> : y}</td>
            </tr>
          ))}
        </tbody>
      </table>

      <h2 class="divergence" data-divergence={divergence}>
        {divergence < 0
          ? 'The runs took the same steps with the same outcomes.'
          : `They part ways at step ${divergence + 1}: ${describe(steps[divergence]!.left, steps[divergence]!.right)}`}
      </h2>
      {(left.run.events.length > MAX_ALIGNED_STEPS ||
        right.run.events.length > MAX_ALIGNED_STEPS) && (
        <p class="muted">
          The first {MAX_ALIGNED_STEPS.toLocaleString()} steps of each run are compared.
        </p>
      )}
      <ol class="aligned" aria-label="Steps side by side">
        {steps.map((step, index) => (
          <li
            key={index}
            class={`aligned-step ${step.differs ? 'differs' : ''} ${index === divergence ? 'divergence-step' : ''}`}
            data-index={index}
          >
            <StepCell event={step.left} />
            <StepCell event={step.right} />
          </li>
        ))}
      </ol>
    </main>
  );
}

function describe(left: Event | null, right: Event | null): string {
  if (left && !right) return `only the first run took “${stepName(left)}”`;
  if (!left && right) return `only the second run took “${stepName(right)}”`;
  if (left && right)
    return `“${stepName(left)}” ${left.status === 'error' ? 'failed' : 'succeeded'} in the first run and ${right.status === 'error' ? 'failed' : 'succeeded'} in the second${right.errorMessage ? ` (${right.errorMessage})` : left.errorMessage ? ` (${left.errorMessage})` : ''}`;
  return '';
}

function StepCell(props: { event: Event | null }) {
  const { event } = props;
  if (!event) return <div class="step-cell empty-cell">— not taken —</div>;
  return (
    <div class={`step-cell ${event.status === 'error' ? 'step-error' : ''}`}>
      <StatusBadge status={event.status} /> <span class="type">{event.type}</span> {stepName(event)}{' '}
      <span class="muted num">{formatDuration(event.durationMs)}</span>
      {event.errorMessage && <div class="error-text small">{event.errorMessage}</div>}
    </div>
  );
}
