// What every part of the live-stream benchmark shares: its settings (env, see live.mjs), paths and
// the run's lifecycle.

import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createLifecycle, envNumber } from '../support.mjs';

/** @typedef {import('../support.mjs').Lifecycle} Lifecycle */

/**
 * What a `catch` may hold, as far as the failure messages here read it (a thrown non-object
 * has no `message`, and the message falls back to the value itself).
 * @typedef {{ message?: string, stack?: string } | null | undefined} Thrown
 */

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** The entry point: run with BARE_FLAG it is the bare SSE server child. */
export const ENTRY = join(ROOT, 'bench/live.mjs');
export const CLI = join(ROOT, 'packages/server/dist/cli.js');
export const RESULTS_FILE = join(ROOT, 'bench/results/live-latest.json');
export const BARE_FLAG = '--bare-sse-server';

export const CFG = {
  seconds: envNumber('BENCH_SECONDS', 10, 1, 60),
  warmupSeconds: envNumber('BENCH_WARMUP_SECONDS', 2, 0, 30),
  rate: envNumber('BENCH_RATE', 200, 1, 2000),
  agents: Math.round(envNumber('BENCH_AGENTS', 50, 1, 500)),
  idleStreams: Math.round(envNumber('BENCH_IDLE_STREAMS', 5000, 10, 20_000)),
  idleUsers: 10,
  idleAgents: 10,
  idleWarmup: 200,
  eventsPerBatch: Math.round(envNumber('BENCH_EVENTS_PER_BATCH', 20, 0, 200)),
  timeoutSeconds: envNumber('BENCH_TIMEOUT_SECONDS', 330, 60, 3600),
  databaseUrl: process.env.BENCH_DATABASE_URL?.trim() || 'postgres://postgres@127.0.0.1:5432/test',
  redisUrl: process.env.BENCH_REDIS_URL?.trim() || 'redis://127.0.0.1:6379',
  buses: (process.env.BENCH_BUSES?.trim() || 'memory,redis')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean),
  replayDepth: 1000,
  replayConnections: 3,
  replaySenders: 16,
  settleMs: 2_000,
  targets: { p99Ms: 50, replayMs: 250, idleKiB: 30 },
};

// Every child, socket and temporary resource is released on every exit path. Made by
// startLifecycle() (the bare server child has none); typed as always there, as nothing that
// needs a cleanup runs before it is made.
export let lifecycle = /** @type {Lifecycle} */ (/** @type {unknown} */ (undefined));

/** @returns {Lifecycle} */
export function startLifecycle() {
  lifecycle = createLifecycle({ timeoutSeconds: CFG.timeoutSeconds });
  return lifecycle;
}

/** @param {unknown} error */
export const messageOf = (error) => String(/** @type {Thrown} */ (error)?.message ?? error);
