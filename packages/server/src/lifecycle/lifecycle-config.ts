/**
 * Settings of the data lifecycle (issue 24): when abandoned runs end, how long runs are kept, how
 * long a deleted run's id stays refused, and how the background sweeper paces its work. Read from
 * the environment with the rest of the configuration (config.ts).
 */
export interface LifecycleConfig {
  /**
   * A running run with no batch for this long becomes `timeout` (`RUN_TIMEOUT_MS`); 0 never
   * times runs out. An agent's own setting (admin API) wins.
   */
  runTimeoutMs: number;
  /** Runs inactive for longer are deleted (`RETENTION_DAYS`); undefined keeps them forever. */
  retentionDays: number | undefined;
  /** How long a deleted run's id is refused to its agent's batches (`DELETED_RUN_TOMBSTONE_MS`). */
  tombstoneMs: number;
  /** Pause between two passes of the sweeper (`LIFECYCLE_SWEEP_MS`); 0 turns it off. */
  sweepIntervalMs: number;
  /**
   * Rows one statement of the sweeper (or of a deletion) touches at most
   * (`LIFECYCLE_SWEEP_ROWS`): each is a short transaction of its own, between which ingest runs.
   */
  sweepRows: number;
  /**
   * The share of the store's time the sweeper takes at most, in percent
   * (`LIFECYCLE_SWEEP_DUTY_PERCENT`): after each statement it waits in proportion (pacer.ts).
   * Undefined: 10 on PGlite (one engine for everything), 50 on PostgreSQL.
   */
  sweepDutyPercent: number | undefined;
}

export const RUN_TIMEOUT_MAX_MS = 30 * 24 * 3_600_000;
export const RETENTION_MAX_DAYS = 36_500;

type Env = Record<string, string | undefined>;

/** A bad value, named by its variable; config.ts turns it into its ConfigError. */
export class LifecycleConfigError extends Error {}

function whole(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw))
    throw new LifecycleConfigError(`${name} must be a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max)
    throw new LifecycleConfigError(`${name} must be between ${min} and ${max}, got ${value}`);
  return value;
}

export function lifecycleConfig(env: Env): LifecycleConfig {
  const retention = env.RETENTION_DAYS?.trim();
  return {
    runTimeoutMs: whole(env, 'RUN_TIMEOUT_MS', 3_600_000, 0, RUN_TIMEOUT_MAX_MS),
    retentionDays:
      retention === undefined || retention === ''
        ? undefined
        : whole(env, 'RETENTION_DAYS', 0, 1, RETENTION_MAX_DAYS),
    tombstoneMs: whole(env, 'DELETED_RUN_TOMBSTONE_MS', 86_400_000, 60_000, 365 * 86_400_000),
    sweepIntervalMs: whole(env, 'LIFECYCLE_SWEEP_MS', 60_000, 0, 86_400_000),
    sweepRows: whole(env, 'LIFECYCLE_SWEEP_ROWS', 1_000, 10, 100_000),
    sweepDutyPercent:
      env.LIFECYCLE_SWEEP_DUTY_PERCENT?.trim() === undefined ||
      env.LIFECYCLE_SWEEP_DUTY_PERCENT.trim() === ''
        ? undefined
        : whole(env, 'LIFECYCLE_SWEEP_DUTY_PERCENT', 0, 1, 100),
  };
}
