import { Type, type Static } from '@sinclair/typebox';
import { Count, IsoDateTime, Milliseconds, Nullable, StringEnum } from './primitives.js';

/** The windows `GET /v1/agents/:id/stats` answers for: 24 hourly or 7 daily buckets. */
export const STATS_WINDOWS = ['24h', '7d'] as const;
export type StatsWindow = (typeof STATS_WINDOWS)[number];

/**
 * A sum of decimal strings, exact: no exponent, no float on the way. Its scale is the largest
 * of the values summed (`"0.10"` + `"0.2"` = `"0.30"`); `"0"` when nothing was summed.
 */
const DecimalSum = Type.String({ pattern: '^(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?$' });

const StatsFigures = {
  /** Runs that started in the span, whatever their status (running ones included). */
  runs: Count,
  /** Of those, the runs whose status is `errored` or `timeout`. */
  errored: Count,
  /** Median `durationMs` of the finished runs (not running, with a duration); null if none. */
  p50DurationMs: Nullable(Milliseconds),
  /** 95th percentile (interpolated) of the same durations; null if none. */
  p95DurationMs: Nullable(Milliseconds),
  /** Sum of the runs' `totalCostUsd`. */
  costUsd: DecimalSum,
  /** Sum of the runs' `totalLamports`. */
  lamports: DecimalSum,
};

export const StatsBucketSchema = Type.Object(
  {
    /** Start of the bucket (UTC, on the hour or at midnight); it spans one hour or one day. */
    start: IsoDateTime,
    ...StatsFigures,
  },
  { additionalProperties: false },
);

export const StatsTotalsSchema = Type.Object(StatsFigures, { additionalProperties: false });

/**
 * Body of `GET /v1/agents/:id/stats`: an agent's runs bucketed by `startedAt` over the window
 * that ends with the current hour (24h) or day (7d), UTC, oldest bucket first; every bucket is
 * present, empty ones with zeros. `totals` covers the whole window.
 */
export const AgentStatsSchema = Type.Object(
  {
    window: StringEnum(STATS_WINDOWS),
    /** Length of one bucket: 3600 (24h) or 86400 (7d). */
    bucketSeconds: Count,
    /** Start of the first bucket (inclusive). */
    from: IsoDateTime,
    /** End of the last bucket (exclusive): the next hour or the next midnight. */
    to: IsoDateTime,
    buckets: Type.Array(StatsBucketSchema),
    totals: StatsTotalsSchema,
  },
  { additionalProperties: false },
);

export type StatsBucket = Static<typeof StatsBucketSchema>;
export type StatsTotals = Static<typeof StatsTotalsSchema>;
export type AgentStats = Static<typeof AgentStatsSchema>;
