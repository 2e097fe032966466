// What every part of the ingest benchmark shares: its settings (env, see ingest.mjs), paths, the
// run's lifecycle and the names of engines and sides.

import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { monotonicFactory } from 'ulidx';
import { MIXES } from '../ingest-bodies.mjs';
import { createLifecycle, envList, envNumber } from '../support.mjs';

/**
 * @typedef {import('../ingest-bodies.mjs').MixName} MixName
 */

/**
 * What a `catch` may hold, as the failure messages here read it (a thrown non-object has no
 * `message`, and the message falls back to the value itself).
 * @typedef {{ message?: string, stack?: string } | null | undefined} Thrown
 */

/** @typedef {'postgres' | 'pglite' | 'pglite-process-crash' | 'pglite-thread'} Engine */

/**
 * The sides an engine's mix is measured on: the service, the naive server (d, PostgreSQL only),
 * the bare HTTP server (a) and the database baseline (b / c).
 * @typedef {keyof import('../ingest-bodies.mjs').SideRates} Side
 */

// ulidx's plain ulid() draws each random character from crypto separately (~50 us per id);
// the monotonic factory increments within a millisecond (~1 us): still unique, still ULIDs.
export const ulid = monotonicFactory();

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const CLI = join(ROOT, 'packages/server/dist/cli.js');
export const BARE_SERVER = join(ROOT, 'bench/bare-ingest-server.mjs');
export const NAIVE_SERVER = join(ROOT, 'bench/naive-ingest-server.mjs');
export const RESULTS_FILE = join(ROOT, 'bench/results/ingest-latest.json');

/**
 * @typedef {object} Config
 * @property {number} seconds
 * @property {number} rounds
 * @property {number} warmupSeconds
 * @property {string} databaseUrl
 * @property {Engine[]} engines
 * @property {MixName[]} mixes
 * @property {number | null} serverPoolSize
 * @property {Record<string, string>} serverEnv
 * @property {number} connections
 * @property {number} dbConnections
 * @property {number} targetRatio
 * @property {number} targetP99Ms
 * @property {Record<Engine, number>} targetRssBytes
 * @property {number} plannedSeconds
 * @property {number} timeoutSeconds
 */

// plannedSeconds and timeoutSeconds are set right below, from the rest
export const CFG = /** @type {Config} */ ({
  seconds: envNumber('BENCH_SECONDS', 5, 1, 120),
  rounds: Math.round(envNumber('BENCH_ROUNDS', 3, 1, 20)),
  warmupSeconds: envNumber('BENCH_WARMUP_SECONDS', 1, 0, 60),
  databaseUrl: process.env.BENCH_DATABASE_URL?.trim() || 'postgres://postgres@127.0.0.1:5432/test',
  // envList lets only the allowed names through
  engines: /** @type {Engine[]} */ (
    envList('BENCH_ENGINES', 'postgres,pglite', [
      'postgres',
      'pglite',
      'pglite-process-crash',
      'pglite-thread',
    ])
  ),
  mixes: /** @type {MixName[]} */ (envList('BENCH_MIXES', 'large,small', Object.keys(MIXES))),
  serverPoolSize: envNumber('BENCH_SERVER_POOL_SIZE', 0, 0, 1000) || null,
  // extra environment for the server, e.g. INGEST_GROUP_MAX_BATCHES=1 (group commit off)
  serverEnv: Object.fromEntries(
    (process.env.BENCH_SERVER_ENV ?? '')
      .split(',')
      .map((pair) => pair.trim())
      .filter((pair) => pair.includes('='))
      .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
  ),
  connections: 16,
  dbConnections: 8,
  targetRatio: 0.8,
  targetP99Ms: 50,
  targetRssBytes: {
    postgres: 250e6,
    pglite: 350e6,
    'pglite-process-crash': 350e6,
    'pglite-thread': 350e6,
  },
});
/** What one engine and mix take, in seconds, besides building bodies. */
const plannedMixSeconds =
  3 * CFG.warmupSeconds + 3 * CFG.rounds * CFG.seconds + 2 * CFG.seconds + 6;
CFG.plannedSeconds = Math.round(
  CFG.engines.length * (10 + CFG.mixes.length * plannedMixSeconds * 1.3),
);
CFG.timeoutSeconds = envNumber('BENCH_TIMEOUT_SECONDS', 2 * CFG.plannedSeconds + 120, 30, 7200);

export const lifecycle = createLifecycle({ timeoutSeconds: CFG.timeoutSeconds });

/** @param {unknown} error */
export const messageOf = (error) => String(/** @type {Thrown} */ (error)?.message ?? error);
