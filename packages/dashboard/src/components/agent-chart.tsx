import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import type { AgentStats } from '@flightlog/protocol';
import { readAgentStats } from '../api.js';
import { formatDecimal, formatDuration, formatUsd } from '../format.js';

type Window = '24h' | '7d';

/**
 * An agent's last 24 hours or 7 days at a glance: runs and failed runs per bucket (a uPlot
 * chart), and the window's totals: error rate, p50/p95 duration, spend in USD and lamports. The
 * server aggregates them in one query; nothing here pages through runs.
 */
export function AgentChart(props: { agentId: string }) {
  const [window, setWindow] = useState<Window>('24h');
  const [stats, setStats] = useState<AgentStats | null>(null);
  const [error, setError] = useState<string | null>(null);
  const box = useRef<HTMLDivElement>(null);

  useEffect(() => {
    const abort = new AbortController();
    setError(null);
    readAgentStats(props.agentId, window, abort.signal).then(
      (answer) => setStats(answer),
      (e: unknown) => !abort.signal.aborted && setError(e instanceof Error ? e.message : String(e)),
    );
    return () => abort.abort();
  }, [props.agentId, window]);

  useEffect(() => {
    const element = box.current;
    if (!stats || !element) return undefined;
    const style = getComputedStyle(document.documentElement);
    const color = (name: string) => style.getPropertyValue(name).trim();
    const xs = stats.buckets.map((b) => Date.parse(b.start) / 1000);
    const bars = uPlot.paths.bars!({ size: [0.7, 24] });
    const chart = new uPlot(
      {
        width: Math.max(320, element.clientWidth),
        height: 120,
        legend: { show: false },
        cursor: { y: false },
        axes: [
          { stroke: color('--muted'), grid: { show: false }, ticks: { stroke: color('--border') } },
          { stroke: color('--muted'), grid: { stroke: color('--border') }, size: 40 },
        ],
        series: [
          {},
          {
            label: 'runs',
            stroke: color('--bar'),
            fill: color('--bar'),
            paths: bars,
            points: { show: false },
          },
          {
            label: 'failed',
            stroke: color('--err'),
            fill: color('--err'),
            paths: bars,
            points: { show: false },
          },
        ],
      },
      [xs, stats.buckets.map((b) => b.runs), stats.buckets.map((b) => b.errored)],
      element,
    );
    const resize = () => chart.setSize({ width: Math.max(320, element.clientWidth), height: 120 });
    addEventListener('resize', resize);
    return () => {
      removeEventListener('resize', resize);
      chart.destroy();
    };
  }, [stats]);

  const totals = stats?.totals;
  const errorRate =
    totals && totals.runs > 0 ? `${((100 * totals.errored) / totals.runs).toFixed(1)} %` : '—';
  return (
    <section class="agent-chart" aria-label="Last runs at a glance">
      <div class="toolbar">
        <h2>Last {window === '24h' ? '24 hours' : '7 days'}</h2>
        <div class="segmented" role="group" aria-label="Chart window">
          {(['24h', '7d'] as const).map((w) => (
            <button
              type="button"
              key={w}
              class="button"
              aria-pressed={w === window}
              onClick={() => setWindow(w)}
            >
              {w}
            </button>
          ))}
        </div>
      </div>
      {error && <p class="error-text">Could not load the chart: {error}</p>}
      {totals && (
        <dl class="totals" data-runs={totals.runs}>
          <div>
            <dt>runs</dt>
            <dd>{totals.runs.toLocaleString()}</dd>
          </div>
          <div>
            <dt>error rate</dt>
            <dd>{errorRate}</dd>
          </div>
          <div>
            <dt>p50 / p95</dt>
            <dd>
              {formatDuration(totals.p50DurationMs)} / {formatDuration(totals.p95DurationMs)}
            </dd>
          </div>
          <div>
            <dt>spend</dt>
            <dd>{formatUsd(totals.costUsd)}</dd>
          </div>
          <div>
            <dt>lamports</dt>
            <dd>{formatDecimal(totals.lamports)}</dd>
          </div>
        </dl>
      )}
      <div ref={box} class="chart" role="img" aria-label="Runs and failed runs per bucket" />
    </section>
  );
}
