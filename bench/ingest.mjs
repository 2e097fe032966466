// Ingest benchmark: how fast the real Flightlog server stores batches, next to the ceilings of
// the HTTP layer and of the database, measured in the same run with the same bodies.
//
// For each engine (PostgreSQL at BENCH_DATABASE_URL, skipped loudly when unreachable; then
// PGlite, whose commits are fsynced: DATA_DIR_DURABILITY=power-loss, the default; and, when
// BENCH_ENGINES names it, pglite-process-crash: PGlite with DATA_DIR_DURABILITY=process-crash,
// no fsync; pglite-thread: PGlite with PGLITE_THREAD=worker, the engine on a thread of its own
// rather than the server's event loop) it starts the built server as a child process on a fresh schema / data directory
// and creates an agent. For each body mix
//
//   large  1 trace + 20 llm_call events of ~400-character messages (~20.8 KB JSON, ~5.9 KB gzip)
//   small  1 trace + 1-3 llm_call events, what a client flushing every 250 ms sends
//
// it alternates its measurements of BENCH_SECONDS each, BENCH_ROUNDS times (A B C A B C):
//
//   service  autocannon, 16 connections, POST /v1/traces/batch with gzip bodies.
//   http     baseline (a), the ceiling of the HTTP layer: the same autocannon load and bodies to
//            a bare node:http server in a child process (bare-ingest-server.mjs) that inflates,
//            parses and answers 202.
//   db       baseline (b) on PostgreSQL, the ceiling of the database: the same rows written with
//            no HTTP, per batch ONE round trip, a single statement whose data-modifying CTEs
//            record the batch id in accepted_batches, upsert the trace and insert the events
//            (unnest arrays), as a named prepared statement over a pg.Pool of 8 with 8 concurrent
//            writers; (c) on PGlite, the same statement on an in-process PGlite (own data
//            directory, opened with the server's durability), 8 concurrent writers. Both on the
//            real schema (the server's migrations, run by openStore in a schema / data directory
//            of their own).
//   naive    baseline (d) on PostgreSQL only: the same autocannon load and bodies to the naive
//            server a user could write (naive-ingest-server.mjs: node:http + pg, no auth, no
//            validation, no limits), writing each batch with the db baseline's statement.
//
// Each run is charged the CPU time (from /proc) of the server that answered it and of
// PostgreSQL (every postgres process); the report gives CPU µs per batch of each and, on
// PostgreSQL, the service's own CPU per batch over the naive server's (target <= 1.5).
//
// Every request body and every baseline batch is built for one use only (fresh batch, trace and
// event ids), so no run measures a duplicate-key shortcut; bodies are built by worker threads
// before each run (ingest-bodies.mjs). Alternating spreads drift (table growth, checkpoints,
// autovacuum, CPU boost) over all sides. It reports the median of each side, the ratios
// service / db (target >= 0.8) and service / http, then latency at half the service's median
// rate (target p99 < 50 ms) two ways: an autocannon run with overallRate (autocannon releases
// each connection's per-second quota in a burst at the start of every second) and an evenly
// paced open-loop sender (latency counted from each request's scheduled time), and the server's
// peak resident memory per mix (VmHWM, reset before each mix; target < 250 MB on PostgreSQL,
// < 350 MB on PGlite, whose engine lives in the process). With both
// pglite and pglite-process-crash in one run it also prints what the fsync costs: the durable
// service's rate over the process-crash one, per mix. Figures are printed and written to
// bench/results/ingest-latest.json.
//
// It is a benchmark, not a test: nothing is asserted, anomalies (non-2xx, duplicates, errors,
// rows missing from the tables) are printed loudly. Bounded: BENCH_TIMEOUT_SECONDS (by default
// twice the planned time + 2 min) aborts the run; servers are stopped and schemas / data
// directories removed on every exit path.
//
// Env: BENCH_SECONDS (5), BENCH_ROUNDS (3), BENCH_WARMUP_SECONDS (1), BENCH_TIMEOUT_SECONDS,
//      BENCH_DATABASE_URL (postgres://postgres@127.0.0.1:5432/test), BENCH_ENGINES (postgres,pglite;
//      also pglite-process-crash, pglite-thread),
//      BENCH_MIXES (large,small), BENCH_SERVER_POOL_SIZE (the server's DATABASE_POOL_SIZE; its own
//      default when unset), BENCH_SERVER_NODE_ARGS (extra node flags for the server, e.g.
//      "--cpu-prof --cpu-prof-dir=/tmp/p"; the naive server gets them too), BENCH_SERVER_ENV (K=V,K=V: extra server environment,
//      e.g. INGEST_GROUP_MAX_BATCHES=1 to measure without group commit)
//
// Layout: ingest/config.mjs (settings, paths, the run's lifecycle), ingest/engine.mjs (one engine
// end to end), ingest/mix.mjs (one engine and mix: rounds, medians, ratios, half rate),
// ingest/http-load.mjs (autocannon and paced runs), ingest/db-baseline.mjs (baselines b and c),
// ingest/servers.mjs (the bare and naive servers), ingest/report.mjs.

import { existsSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { machineInfo, redactUrl, runBenchmark, writeJsonAtomic } from './support.mjs';
import { CFG, CLI, RESULTS_FILE, ROOT, lifecycle } from './ingest/config.mjs';
import { benchEngine } from './ingest/engine.mjs';
import { fsyncCost, report } from './ingest/report.mjs';
import { startBareServer } from './ingest/servers.mjs';

/**
 * @typedef {import('./ingest/engine.mjs').EngineResult} EngineResult
 * @typedef {import('./ingest/report.mjs').RunInfo} RunInfo
 */

async function main() {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run npm run build first`);
  // totalSeconds and pgliteFsyncCost are added once the engines have run
  const meta = /** @type {RunInfo} */ (machineInfo(ROOT));
  console.log(
    `Flightlog ingest benchmark: engines ${CFG.engines.join(', ')}; mixes ${CFG.mixes.join(', ')}; ` +
      `${CFG.rounds} rounds x ${CFG.seconds} s per side (+ ${CFG.warmupSeconds} s warm-up); ` +
      `planned ~${CFG.plannedSeconds} s, timeout ${CFG.timeoutSeconds} s`,
  );
  const started = performance.now();
  const bare = await startBareServer();
  /** @type {EngineResult[]} */
  const results = [];
  for (const engine of CFG.engines) results.push(await benchEngine(engine, bare));
  meta.totalSeconds = Math.round((performance.now() - started) / 100) / 10;
  meta.pgliteFsyncCost = fsyncCost(results);

  report(results, meta);
  writeJsonAtomic(RESULTS_FILE, {
    ...meta,
    config: { ...CFG, databaseUrl: redactUrl(CFG.databaseUrl) },
    engines: Object.fromEntries(results.map((r) => [r.engine, r])),
  });
  console.log(`\nwrote ${RESULTS_FILE} (total ${meta.totalSeconds} s)`);
}

await runBenchmark(lifecycle, main);
