import type { AgentStats, StatsBucket, StatsTotals, StatsWindow } from '@flightlog/protocol';
import type { SqlClient } from './sql-client.js';

/** How each window is cut: the unit it is truncated to, how many buckets, how long each is. */
const WINDOWS: Record<StatsWindow, { unit: 'hour' | 'day'; buckets: number; seconds: number }> = {
  '24h': { unit: 'hour', buckets: 24, seconds: 3_600 },
  '7d': { unit: 'day', buckets: 7, seconds: 86_400 },
};

/**
 * An agent's runs per bucket and over the whole window, in one statement:
 *
 * - `span` is the window: it ends with the current hour or day (UTC, whatever the session's
 *   zone: date_trunc's third argument) and starts $3 buckets of $4 seconds before that end. The
 *   length is in seconds, not a day interval, which a zone with summer time would stretch.
 * - `runs` reads the agent's runs that started in it (a range of the (agent_id, started_at)
 *   index) and numbers each one's bucket.
 * - every bucket comes from generate_series, so an empty one is a row of zeros; the grouping
 *   set () adds the totals row (bucket null), which sorts last.
 *
 * Sums stay numeric and travel as text, so they are exact whatever their size; percentile_cont
 * interpolates between the finished runs' durations (running runs have none yet).
 */
const AGENT_STATS = `
WITH span AS (
  SELECT date_trunc($2::text, now(), 'UTC') - make_interval(secs => $4::int * ($3::int - 1))
           AS first,
         date_trunc($2::text, now(), 'UTC') + make_interval(secs => $4::int) AS last
),
runs AS (
  SELECT floor(extract(epoch FROM t.started_at - s.first) / $4::int)::int AS bucket,
         t.status, t.duration_ms, t.total_cost_usd, t.total_lamports
  FROM traces t CROSS JOIN span s
  WHERE t.agent_id = $1 AND t.started_at >= s.first AND t.started_at < s.last
)
SELECT b.bucket,
       (SELECT first FROM span) AS "from",
       (SELECT last FROM span) AS "to",
       (SELECT first FROM span) + make_interval(secs => $4::int * b.bucket) AS start,
       count(r.bucket)::int AS runs,
       count(*) FILTER (WHERE r.status IN ('errored', 'timeout'))::int AS errored,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY r.duration_ms)
         FILTER (WHERE r.status <> 'running') AS "p50DurationMs",
       percentile_cont(0.95) WITHIN GROUP (ORDER BY r.duration_ms)
         FILTER (WHERE r.status <> 'running') AS "p95DurationMs",
       COALESCE(sum(r.total_cost_usd), 0)::text AS "costUsd",
       COALESCE(sum(r.total_lamports), 0)::text AS lamports
FROM generate_series(0, $3::int - 1) AS b(bucket)
LEFT JOIN runs r ON r.bucket = b.bucket
GROUP BY GROUPING SETS ((b.bucket), ())
ORDER BY b.bucket NULLS LAST`;

interface StatsRow extends StatsTotals {
  bucket: number | null;
  from: Date;
  to: Date;
  start: Date | null;
}

/** Aggregates over an agent's runs for the dashboard's charts. */
export class StatsStore {
  constructor(private readonly sql: SqlClient) {}

  /** The agent's runs in `window`, bucketed by startedAt (see AGENT_STATS). */
  async agentStats(agentId: string, window: StatsWindow): Promise<AgentStats> {
    const { unit, buckets, seconds } = WINDOWS[window];
    const rows = await this.sql.query<StatsRow>(AGENT_STATS, [agentId, unit, buckets, seconds]);
    const totals = rows.find((row) => row.bucket === null);
    const first = rows[0];
    if (!totals || !first) throw new Error('the stats statement returned no totals row');
    return {
      window,
      bucketSeconds: seconds,
      from: first.from.toISOString(),
      to: first.to.toISOString(),
      buckets: rows
        .filter((row) => row.bucket !== null)
        .map((row): StatsBucket => ({ start: (row.start as Date).toISOString(), ...figures(row) })),
      totals: figures(totals),
    };
  }
}

function figures(row: StatsRow): StatsTotals {
  return {
    runs: row.runs,
    errored: row.errored,
    p50DurationMs: row.p50DurationMs,
    p95DurationMs: row.p95DurationMs,
    costUsd: row.costUsd,
    lamports: row.lamports,
  };
}
