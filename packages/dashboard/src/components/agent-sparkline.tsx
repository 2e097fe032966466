import { useEffect, useRef, useState } from 'preact/hooks';
import type { AgentStats } from '@flightlog/protocol';
import { readAgentStats } from '../api.js';

/**
 * An agent's last 24 hours in a table row: runs per hour as small bars (failed ones in red) and
 * its error rate. Read only once the row is in view, so a page of 100 agents asks for the few a
 * person can see.
 */
export function AgentSparkline(props: { agentId: string }) {
  const [stats, setStats] = useState<AgentStats | null>(null);
  const box = useRef<HTMLSpanElement>(null);
  useEffect(() => {
    const element = box.current;
    if (!element) return undefined;
    const abort = new AbortController();
    const observer = new IntersectionObserver((entries) => {
      if (!entries.some((entry) => entry.isIntersecting)) return;
      observer.disconnect();
      readAgentStats(props.agentId, '24h', abort.signal).then(setStats, () => {});
    });
    observer.observe(element);
    return () => {
      observer.disconnect();
      abort.abort();
    };
  }, [props.agentId]);

  const buckets = stats?.buckets ?? [];
  const most = Math.max(1, ...buckets.map((b) => b.runs));
  const total = stats?.totals;
  return (
    <span ref={box} class="sparkline" data-runs-24h={total?.runs}>
      <svg
        width="96"
        height="20"
        viewBox="0 0 96 20"
        role="img"
        aria-label={`${total?.runs ?? 0} runs in 24 h`}
      >
        {buckets.map((b, i) => {
          const h = (18 * b.runs) / most;
          const e = (18 * b.errored) / most;
          return (
            <g key={b.start}>
              <rect x={i * 4} y={20 - h} width="3" height={h} class="spark-runs" />
              {e > 0 && <rect x={i * 4} y={20 - e} width="3" height={e} class="spark-errors" />}
            </g>
          );
        })}
      </svg>
      <span class="muted small">
        {total
          ? total.runs > 0
            ? `${((100 * total.errored) / total.runs).toFixed(0)} % failed`
            : 'idle'
          : ''}
      </span>
    </span>
  );
}
