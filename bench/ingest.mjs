// Ingest benchmark: how fast the real Flightlog server stores batches, next to the ceilings of
// the HTTP layer and of the database, measured in the same run with the same bodies.
//
// For each engine (PostgreSQL at BENCH_DATABASE_URL, skipped loudly when unreachable; then
// PGlite, whose commits are fsynced: DATA_DIR_DURABILITY=power-loss, the default; and, when
// BENCH_ENGINES names it, pglite-process-crash: PGlite with DATA_DIR_DURABILITY=process-crash,
// no fsync) it starts the built server as a child process on a fresh schema / data directory
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
//      also pglite-process-crash),
//      BENCH_MIXES (large,small), BENCH_SERVER_POOL_SIZE (the server's DATABASE_POOL_SIZE; its own
//      default when unset), BENCH_SERVER_NODE_ARGS (extra node flags for the server, e.g.
//      "--cpu-prof --cpu-prof-dir=/tmp/p"; the naive server gets them too), BENCH_SERVER_ENV (K=V,K=V: extra server environment,
//      e.g. INGEST_GROUP_MAX_BATCHES=1 to measure without group commit)

import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { PGlite } from '@electric-sql/pglite';
import { monotonicFactory } from 'ulidx';
import { WRITE_BATCH, checkWritten, writeBatchParams } from './batch-statement.mjs';
import { MIXES, OneShotPool, createBatchMaker, createBodyPool } from './ingest-bodies.mjs';
import {
  autocannon,
  cpuMsOf,
  createLifecycle,
  envList,
  envNumber,
  machineInfo,
  median,
  percentiles,
  pidsNamed,
  reachable,
  redactUrl,
  request,
  runBenchmark,
  serverNodeArgs,
  spawnCli,
  startFlightlogServer,
  textTable,
  writeJsonAtomic,
} from './support.mjs';

/**
 * @typedef {import('./support.mjs').ChildHandle} ChildHandle
 * @typedef {import('./support.mjs').ServerHandle} ServerHandle
 * @typedef {import('./support.mjs').MachineInfo} MachineInfo
 * @typedef {import('./batch-statement.mjs').Batch} Batch
 * @typedef {import('./batch-statement.mjs').WrittenCounts} WrittenCounts
 * @typedef {import('./ingest-bodies.mjs').MixName} MixName
 * @typedef {import('./ingest-bodies.mjs').BodyPool} BodyPool
 * @typedef {import('@flightlog/server').DataDirDurability} DataDirDurability
 */

/**
 * What a `catch` may hold, as the failure messages here read it (a thrown non-object has no
 * `message`, and the message falls back to the value itself).
 * @typedef {{ message?: string, stack?: string } | null | undefined} Thrown
 */

/** @typedef {'postgres' | 'pglite' | 'pglite-process-crash'} Engine */

/**
 * The sides an engine's mix is measured on: the service, the naive server (d, PostgreSQL only),
 * the bare HTTP server (a) and the database baseline (b / c).
 * @typedef {keyof import('./ingest-bodies.mjs').SideRates} Side
 */

// ulidx's plain ulid() draws each random character from crypto separately (~50 us per id);
// the monotonic factory increments within a millisecond (~1 us): still unique, still ULIDs.
const ulid = monotonicFactory();

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLI = join(ROOT, 'packages/server/dist/cli.js');
const BARE_SERVER = join(ROOT, 'bench/bare-ingest-server.mjs');
const NAIVE_SERVER = join(ROOT, 'bench/naive-ingest-server.mjs');
const RESULTS_FILE = join(ROOT, 'bench/results/ingest-latest.json');

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
const CFG = /** @type {Config} */ ({
  seconds: envNumber('BENCH_SECONDS', 5, 1, 120),
  rounds: Math.round(envNumber('BENCH_ROUNDS', 3, 1, 20)),
  warmupSeconds: envNumber('BENCH_WARMUP_SECONDS', 1, 0, 60),
  databaseUrl: process.env.BENCH_DATABASE_URL?.trim() || 'postgres://postgres@127.0.0.1:5432/test',
  // envList lets only the allowed names through
  engines: /** @type {Engine[]} */ (
    envList('BENCH_ENGINES', 'postgres,pglite', ['postgres', 'pglite', 'pglite-process-crash'])
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
  targetRssBytes: { postgres: 250e6, pglite: 350e6, 'pglite-process-crash': 350e6 },
});
/** What one engine and mix take, in seconds, besides building bodies. */
const plannedMixSeconds =
  3 * CFG.warmupSeconds + 3 * CFG.rounds * CFG.seconds + 2 * CFG.seconds + 6;
CFG.plannedSeconds = Math.round(
  CFG.engines.length * (10 + CFG.mixes.length * plannedMixSeconds * 1.3),
);
CFG.timeoutSeconds = envNumber('BENCH_TIMEOUT_SECONDS', 2 * CFG.plannedSeconds + 120, 30, 7200);

const lifecycle = createLifecycle({ timeoutSeconds: CFG.timeoutSeconds });

// ---------------------------------------------------------------------------------------------
// The servers.

/**
 * @param {ServerHandle} server
 * @returns {Promise<import('@flightlog/protocol').CreatedAgent>}
 */
async function createAgent(server) {
  const { status, text } = await request('POST', `${server.base}/admin/v1/agents`, {
    headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
    body: '{}',
  });
  if (status !== 201) throw new Error(`agent creation answered ${status}: ${text}`);
  return JSON.parse(text);
}

/**
 * A server's batch counters and resident memory; none when /metrics does not answer 200.
 * @typedef {{ accepted?: number, duplicate?: number, rssBytes?: number }} ServerMetrics
 */

/**
 * @param {string} base
 * @returns {Promise<ServerMetrics>}
 */
async function scrapeMetrics(base) {
  const { status, text } = await request('GET', `${base}/metrics`);
  if (status !== 200) return {};
  const value = (/** @type {RegExp} */ pattern) => {
    const match = text.match(pattern);
    return match ? Number(match[1]) : undefined;
  };
  return {
    accepted: value(/^flightlog_batches_total\{outcome="accepted"\} (\S+)$/m) ?? 0,
    duplicate: value(/^flightlog_batches_total\{outcome="duplicate"\} (\S+)$/m) ?? 0,
    rssBytes: value(/^process_resident_memory_bytes (\S+)$/m),
  };
}

/**
 * Peak resident memory of a process (Linux: VmHWM), reset by `resetPeakRss`; null elsewhere.
 * @param {number | undefined} pid
 * @returns {number | null}
 */
function peakRss(pid) {
  try {
    const match = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : null;
  } catch {
    return null;
  }
}
/**
 * @param {number | undefined} pid
 * @returns {boolean}
 */
function resetPeakRss(pid) {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/**
 * A baseline server run as a child: its handle, and where it listens.
 * @typedef {ChildHandle & { base: string }} ChildServer
 */

/**
 * Baseline (d), PostgreSQL only: the naive node:http + pg server, writing to `schema`.
 * @param {string} schema
 * @param {string} agentId
 * @returns {Promise<ChildServer>}
 */
async function startNaiveServer(schema, agentId) {
  const naive = spawnCli(lifecycle, {
    cli: NAIVE_SERVER,
    cwd: ROOT,
    // the service's node flags (BENCH_SERVER_NODE_ARGS) for both, so that they compare
    nodeArgs: serverNodeArgs(),
    tag: 'naive-server',
    stdin: 'pipe',
    env: {
      NAIVE_DATABASE_URL: CFG.databaseUrl,
      NAIVE_SCHEMA: schema,
      NAIVE_AGENT_ID: agentId,
      NAIVE_POOL_SIZE: String(CFG.serverPoolSize ?? 10),
    },
  });
  const [, port] = await naive.waitFor(/"port":(\d+)/, 10_000);
  return { ...naive, base: `http://127.0.0.1:${port}` };
}

/** @returns {Promise<ChildServer>} */
async function startBareServer() {
  // no env of its own: spawnCli's type wants one, its code does without
  const bare = spawnCli(
    lifecycle,
    /** @type {Parameters<typeof spawnCli>[1]} */ ({
      cli: BARE_SERVER,
      cwd: ROOT,
      tag: 'bare-http',
      stdin: 'pipe',
    }),
  );
  const [, port] = await bare.waitFor(/"port":(\d+)/, 10_000);
  return { ...bare, base: `http://127.0.0.1:${port}` };
}

// ---------------------------------------------------------------------------------------------
// HTTP load: autocannon (closed loop, or overallRate), and an evenly paced open-loop sender.

/**
 * Where an HTTP side's load goes; `metrics` (the service's) counts what the server accepted.
 * @typedef {{ url: string, headers: Record<string, string>,
 *   metrics?: () => Promise<ServerMetrics> }} Target
 */

/**
 * The figures of a run that a table row shows; also those of a side's median.
 * @typedef {object} Figures
 * @property {number} batchesPerSec
 * @property {number} eventsPerSec
 * @property {number | null} p50Ms
 * @property {number | null} p99Ms
 */

/**
 * CPU of the server that answered a run and of PostgreSQL; null where not measured (no /proc,
 * no such process).
 * @typedef {{ server: number | null, postgres: number | null }} PerProcess
 */

/**
 * What every run reports: an HTTP side's, a database baseline's, a paced one's.
 * @typedef {object} RunFields
 * @property {number | null} maxMs
 * @property {number} ok batches that succeeded within the run
 * @property {number} errors
 * @property {number} [non2xx] HTTP runs only
 * @property {number} [timeouts] autocannon runs only
 * @property {PerProcess} [cpuUsPerBatch] µs per batch, set once the run is over
 * @typedef {Figures & RunFields} Run
 */

/**
 * An autocannon run of an HTTP side (`serverAccepted` / `serverDuplicates` with a `metrics`).
 * @typedef {Run & { non2xx: number, timeouts: number, statusCodes: Record<string, number>,
 *   durationSec: number, serverAccepted?: number, serverDuplicates?: number,
 *   bodiesBuiltDuringRun: number }} HttpRun
 */

/**
 * @param {Target} target
 * @param {BodyPool} bodies
 * @param {number} seconds
 * @param {{ overallRate?: number, eventsPerBatch: number }} load
 * @returns {Promise<HttpRun>}
 */
async function runAutocannon(target, bodies, seconds, { overallRate, eventsPerBatch }) {
  const before = target.metrics ? await target.metrics() : undefined;
  const result = await autocannon({
    url: target.url,
    method: 'POST',
    connections: CFG.connections,
    duration: seconds,
    timeout: 10,
    headers: target.headers,
    requests: [{ setupRequest: (req) => ({ ...req, body: bodies.next().gz }) }],
    ...(overallRate
      ? // autocannon corrects for coordinated omission with an interval of ceil(1 / rate) ms
        // (1 ms at these rates), which adds synthetic 1..n ms samples and drags p50 down.
        { overallRate, ignoreCoordinatedOmission: true }
      : {}),
  });
  await sleep(300); // let the requests cut off at the end of the run finish on the server
  const after = target.metrics ? await target.metrics() : undefined;
  const ok = result['2xx'];
  return {
    batchesPerSec: ok / result.duration,
    eventsPerSec: (ok * eventsPerBatch) / result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    maxMs: result.latency.max,
    ok,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes: Object.fromEntries(
      Object.entries(result.statusCodeStats ?? {}).map(([code, { count }]) => [code, count]),
    ),
    durationSec: result.duration,
    ...(after
      ? {
          // `before` is there when `after` is; a count /metrics left out makes this NaN
          serverAccepted:
            /** @type {number} */ (after.accepted) -
            /** @type {number} */ (/** @type {ServerMetrics} */ (before).accepted),
          serverDuplicates:
            /** @type {number} */ (after.duplicate) -
            /** @type {number} */ (/** @type {ServerMetrics} */ (before).duplicate),
        }
      : {}),
    bodiesBuiltDuringRun: bodies.madeDuringRun,
  };
}

/** @typedef {Run & { targetRate: number, non2xx: number, sent: number }} PacedRun */

/**
 * Open loop: request i is due at start + i / rate; latency runs from that due time.
 * @param {Target} target
 * @param {BodyPool} bodies
 * @param {number} seconds
 * @param {{ rate: number, eventsPerBatch: number }} load
 * @returns {Promise<PacedRun>}
 */
async function runPaced(target, bodies, seconds, { rate, eventsPerBatch }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CFG.connections });
  const url = new URL(target.url);
  /** @type {number[]} */
  const latencies = [];
  const tally = { ok: 0, non2xx: 0, errors: 0, sent: 0 };
  /** @type {Set<Promise<void>>} */
  const pending = new Set();
  const fire = (/** @type {number} */ due) => {
    const body = bodies.next().gz;
    tally.sent++;
    /** @type {Promise<void>} */
    const done = new Promise((resolve) => {
      const req = http.request(
        url,
        { method: 'POST', agent, headers: { ...target.headers, 'content-length': body.length } },
        (res) => {
          res.resume();
          res.on('end', () => {
            // a client's response always has a status code
            if (
              /** @type {number} */ (res.statusCode) >= 200 &&
              /** @type {number} */ (res.statusCode) < 300
            ) {
              tally.ok++;
              latencies.push(performance.now() - due);
            } else tally.non2xx++;
            resolve();
          });
          res.on('error', () => {
            tally.errors++;
            resolve();
          });
        },
      );
      req.setTimeout(10_000, () => req.destroy(new Error('timeout')));
      req.on('error', () => {
        tally.errors++;
        resolve();
      });
      req.end(body);
    });
    pending.add(done);
    done.then(() => pending.delete(done));
  };
  const interval = 1000 / rate;
  const start = performance.now();
  const end = start + seconds * 1000;
  let i = 0;
  for (;;) {
    const now = performance.now();
    let due = start + i * interval;
    while (due <= now && due < end) {
      fire(due);
      due = start + ++i * interval;
    }
    if (due >= end) break;
    await sleep(Math.max(0, due - performance.now()));
  }
  await Promise.race([Promise.all(pending), sleep(15_000)]);
  const elapsed = (performance.now() - start) / 1000;
  agent.destroy();
  const stats = percentiles(latencies);
  return {
    targetRate: rate,
    batchesPerSec: tally.ok / elapsed,
    eventsPerSec: (tally.ok * eventsPerBatch) / elapsed,
    p50Ms: stats.p50,
    p99Ms: stats.p99,
    maxMs: stats.max,
    ...tally,
  };
}

// ---------------------------------------------------------------------------------------------
// Database baselines (b) and (c): one statement, one round trip per batch.

/**
 * A database baseline, (b) or (c): `write` is the one statement for a batch, `query` any SQL on
 * the same database.
 * @typedef {object} Baseline
 * @property {string} kind
 * @property {(agentId: string, batch: Batch) => Promise<void>} write
 * @property {(sql: string, params: unknown[]) => Promise<{ rows: unknown[] }>} query
 * @property {() => Promise<void> | undefined} close
 */

/**
 * @param {string} schema
 * @returns {Promise<Baseline>}
 */
async function openPostgresBaseline(schema) {
  const pool = new pg.Pool({
    connectionString: CFG.databaseUrl,
    max: CFG.dbConnections,
    options: `-c TimeZone=UTC -c search_path="${schema}"`,
    application_name: 'flightlog-bench-baseline',
  });
  pool.on('error', () => {});
  return {
    kind: `one statement per batch (data-modifying CTEs), pg.Pool of ${CFG.dbConnections}`,
    async write(agentId, batch) {
      const { rows } = await pool.query({
        name: 'flightlog-bench-write-batch',
        text: WRITE_BATCH,
        values: writeBatchParams(agentId, batch),
      });
      checkWritten(rows, batch);
    },
    query: (sql, params) => pool.query(sql, params),
    close: () => pool.end(),
  };
}

/** The DATA_DIR_DURABILITY an engine of this benchmark runs PGlite with. */
const durabilityOf = (/** @type {Engine} */ engine) =>
  engine === 'pglite-process-crash' ? 'process-crash' : 'power-loss';

/**
 * @param {string} dataDir
 * @param {DataDirDurability} durability
 * @returns {Promise<Baseline>}
 */
async function openPgliteBaseline(dataDir, durability) {
  const { openPgliteDataDir, PGLITE_EXTENSIONS } = await import('@flightlog/server');
  // the server's extensions: its migrations index text with pg_trgm
  const db = await openPgliteDataDir(dataDir, durability, { extensions: PGLITE_EXTENSIONS });
  await db.exec(`SET TIME ZONE 'UTC'`);
  return {
    kind: `one statement per batch (data-modifying CTEs), in-process PGlite (${durability})`,
    async write(agentId, batch) {
      const { rows } = await db.query(WRITE_BATCH, writeBatchParams(agentId, batch));
      checkWritten(/** @type {WrittenCounts[]} */ (rows), batch);
    },
    query: (sql, params) => db.query(sql, params),
    close: () => (db.closed ? undefined : db.close()),
  };
}

/** @typedef {Run & { itemsBuiltDuringRun: number }} DbRun */

/**
 * BENCH_SECONDS of `dbConnections` concurrent writers, each one batch at a time.
 * @param {Baseline} baseline
 * @param {string} agentId
 * @param {import('./ingest-bodies.mjs').OneShotPool<Batch>} items
 * @param {number} seconds
 * @returns {Promise<DbRun>}
 */
async function runDbBaseline(baseline, agentId, items, seconds) {
  /** @type {number[]} */
  const latencies = [];
  let ok = 0;
  let events = 0;
  let errors = 0;
  /** @type {unknown} */
  let firstError;
  const start = performance.now();
  const deadline = start + seconds * 1000;
  const writer = async () => {
    while (performance.now() < deadline) {
      const batch = items.next();
      const t0 = performance.now();
      try {
        await baseline.write(agentId, batch);
        const t1 = performance.now();
        if (t1 <= deadline) {
          ok++;
          events += batch.item.events.length;
          latencies.push(t1 - t0);
        }
      } catch (error) {
        errors++;
        firstError ??= error;
      }
    }
  };
  await Promise.all(Array.from({ length: CFG.dbConnections }, writer));
  if (firstError)
    console.error(
      `!!! BASELINE WRITE FAILED (${errors}x): ${/** @type {Thrown} */ (firstError)?.message}`,
    );
  const stats = percentiles(latencies);
  return {
    batchesPerSec: ok / seconds,
    eventsPerSec: events / seconds,
    p50Ms: stats.p50,
    p99Ms: stats.p99,
    maxMs: stats.max,
    ok,
    errors,
    itemsBuiltDuringRun: items.madeDuringRun,
  };
}

/** Batches, their announced events and the stored events of `agentId` (server's tables). */
const STORED_SQL = `SELECT
  (SELECT count(*) FROM accepted_batches WHERE agent_id = $1)::int AS batches,
  (SELECT coalesce(sum(event_count), 0) FROM accepted_batches WHERE agent_id = $1)::int AS announced,
  (SELECT count(*) FROM events WHERE agent_id = $1)::int AS events`;

/** @typedef {{ batches: number, announced: number, events: number }} StoredRows */

/**
 * @param {Engine} engine
 * @param {ServerEnv} serverEnv
 * @param {string} agentId
 * @returns {Promise<StoredRows>}
 */
async function countServerRows(engine, serverEnv, agentId) {
  if (engine === 'postgres') {
    const client = new pg.Client({
      connectionString: CFG.databaseUrl,
      options: `-c search_path="${serverEnv.DATABASE_SCHEMA}"`,
    });
    await client.connect();
    try {
      return /** @type {StoredRows} */ ((await client.query(STORED_SQL, [agentId])).rows[0]);
    } finally {
      await client.end();
    }
  }
  const db = await PGlite.create(serverEnv.DATA_DIR);
  try {
    // aggregates: always one row
    return /** @type {StoredRows} */ ((await db.query(STORED_SQL, [agentId])).rows[0]);
  } finally {
    await db.close();
  }
}

// ---------------------------------------------------------------------------------------------
// One engine and mix: A B C rounds, then half rate.

/**
 * One figure per side of an engine: the naive side runs on PostgreSQL only.
 * @template T
 * @typedef {Record<Exclude<Side, 'naive'>, T> & { naive?: T }} BySide
 */

/** @typedef {HttpRun | DbRun} SideRun a run of one side: HTTP, or the database baseline */

/**
 * One round: a run of every side of the engine, back to back.
 * @typedef {{ round: number } & BySide<SideRun>} Round
 */

/** The sides of an engine: the naive server (d) writes to PostgreSQL only. */
/** @type {(engine: Engine) => Side[]} */
const sidesOf = (engine) =>
  engine === 'postgres' ? ['service', 'naive', 'http', 'db'] : ['service', 'http', 'db'];

/**
 * CPU ms so far of the processes a side's run is charged with: the server that answered it
 * (service or naive), and PostgreSQL (every process named postgres, with its exited children:
 * the postmaster carries a closed backend's time on; none for PGlite, which runs inside the
 * server). Linux /proc; null elsewhere.
 */
/**
 * @param {number | undefined} serverPid
 * @param {Engine} engine
 * @returns {PerProcess} CPU ms so far
 */
function cpuSnapshot(serverPid, engine) {
  // PGlite's engine runs inside the server: its CPU is the server's
  const pids = engine === 'postgres' ? pidsNamed('postgres') : [];
  return {
    server: serverPid === undefined ? null : cpuMsOf(serverPid),
    postgres:
      pids.length === 0
        ? null
        : pids.reduce((total, pid) => total + (cpuMsOf(pid, { children: true }) ?? 0), 0),
  };
}

/**
 * The median over rounds of the service's CPU per batch over the naive server's, of `key`.
 * @param {Round[]} rounds of PostgreSQL, which has a naive side
 * @param {keyof PerProcess} key
 * @returns {number | null}
 */
function pairedCpuRatio(rounds, key) {
  // a figure not measured (null, undefined) makes a ratio that is not finite, left out below
  const ratios = rounds
    .map(
      (r) =>
        /** @type {number} */ (r.service.cpuUsPerBatch?.[key]) /
        /** @type {number} */ (/** @type {SideRun} */ (r.naive).cpuUsPerBatch?.[key]),
    )
    .filter((ratio) => Number.isFinite(ratio));
  return ratios.length > 0 ? median(ratios) : null;
}

/**
 * CPU µs per batch between two snapshots, per process.
 * @param {PerProcess} before
 * @param {PerProcess} after
 * @param {number} batches
 * @returns {PerProcess}
 */
function cpuPerBatch(before, after, batches) {
  const per = (/** @type {keyof PerProcess} */ key) =>
    before[key] === null || after[key] === null || batches === 0
      ? null
      : ((after[key] - before[key]) * 1000) / batches;
  return { server: per('server'), postgres: per('postgres') };
}

/**
 * A side's medians over its rounds.
 * @typedef {Figures & { cpuUsPerBatch: PerProcess }} SideSummary
 */

/**
 * @param {SideRun[]} runs one or more
 * @returns {SideSummary}
 */
function summarise(runs) {
  const cpu = (/** @type {keyof PerProcess} */ key) => {
    const values = runs.map((r) => r.cpuUsPerBatch?.[key]).filter((v) => typeof v === 'number');
    return values.length > 0 ? median(values) : null;
  };
  return {
    cpuUsPerBatch: { server: cpu('server'), postgres: cpu('postgres') },
    // the median of one or more numbers is a number
    batchesPerSec: /** @type {number} */ (median(runs.map((r) => r.batchesPerSec))),
    eventsPerSec: /** @type {number} */ (median(runs.map((r) => r.eventsPerSec))),
    p50Ms: median(runs.map((r) => r.p50Ms)),
    p99Ms: median(runs.map((r) => r.p99Ms)),
  };
}

const fmtMs = (/** @type {number | null | undefined} */ ms) =>
  ms === null || ms === undefined ? '   n/a' : `${ms.toFixed(1).padStart(6)} ms`;
/**
 * @param {string} kind
 * @param {Run} r
 */
function fmtRun(kind, r) {
  const bad = (r.non2xx ?? 0) + (r.errors ?? 0) + (r.timeouts ?? 0);
  return (
    `${kind.padEnd(8)} ${r.batchesPerSec.toFixed(1).padStart(8)} batches/s ` +
    `${Math.round(r.eventsPerSec).toString().padStart(7)} events/s  ` +
    `p50 ${fmtMs(r.p50Ms)}  p99 ${fmtMs(r.p99Ms)}` +
    (bad ? `  !!! ${bad} FAILED` : '')
  );
}

/**
 * @param {string} label
 * @param {HttpRun} r
 * @returns {string[]}
 */
function checkHttpRun(label, r) {
  const problems = [];
  if (r.non2xx > 0) problems.push(`${r.non2xx} non-2xx responses ${JSON.stringify(r.statusCodes)}`);
  if (r.errors > 0) problems.push(`${r.errors} connection errors`);
  if (r.timeouts > 0) problems.push(`${r.timeouts} timeouts`);
  if ((r.serverDuplicates ?? 0) > 0)
    problems.push(`${r.serverDuplicates} batches answered as duplicates by the server`);
  if (r.serverAccepted !== undefined && r.serverAccepted < r.ok)
    problems.push(`server counted ${r.serverAccepted} accepted batches for ${r.ok} 2xx answers`);
  return problems.map((p) => `${label}: ${p}`);
}

/**
 * What a mix is measured with: one engine's servers and baseline.
 * @typedef {object} MixContext
 * @property {Engine} engine
 * @property {ServerHandle} server
 * @property {ChildServer} bare
 * @property {ChildServer | undefined} naive
 * @property {string} apiKey
 * @property {string} agentId
 * @property {Baseline} baseline
 * @property {string} baselineAgentId
 * @property {(warning: string) => void} warn
 */

/**
 * The service over the baselines, by median batches/s (and CPU per batch against naive).
 * @typedef {object} Ratios
 * @property {number} serviceVsDb
 * @property {number} [serviceVsNaive]
 * @property {number | null} [serverCpuVsNaive]
 * @property {number | null} [postgresCpuVsNaive]
 * @property {number} serviceVsHttp
 * @property {number} dbVsHttp
 */

/**
 * @typedef {object} HalfRate the service's latency at half its median rate
 * @property {number} rate
 * @property {HttpRun & { targetRate: number }} autocannon
 * @property {PacedRun} paced
 * @property {{ autocannon: boolean, paced: boolean }} meetsP99Target
 */

/**
 * One engine and mix, as written to the results file.
 * @typedef {object} MixResult
 * @property {MixName} mix
 * @property {string} description
 * @property {Round[]} rounds
 * @property {number} bodyJsonBytes
 * @property {number} bodyGzipBytes
 * @property {BySide<SideSummary>} median
 * @property {Ratios} ratios
 * @property {boolean} meetsRatioTarget
 * @property {HalfRate} halfRate
 * @property {number | null} serverRssPeakBytes
 * @property {number | null} serverRssAtEndBytes
 * @property {boolean | null} meetsRssTarget
 */

/**
 * A mix that failed; no `median` tells it from a MixResult.
 * @typedef {{ mix: MixName, error: string, median?: undefined }} FailedMix
 */

/**
 * @param {MixContext} ctx
 * @param {MixName} mixName
 * @returns {Promise<MixResult>}
 */
async function benchMix(ctx, mixName) {
  const mix = MIXES[mixName];
  const { engine, server, bare, naive, apiKey, agentId, baseline, baselineAgentId, warn } = ctx;
  const sides = sidesOf(engine);
  // the rest is filled in below, before it is returned
  const result = /** @type {MixResult} */ ({
    mix: mixName,
    description: mix.description,
    rounds: /** @type {Round[]} */ ([]),
  });
  const headers = {
    'content-type': 'application/json',
    'content-encoding': 'gzip',
  };
  const targets = {
    service: {
      url: `${server.base}/v1/traces/batch`,
      headers: { ...headers, authorization: `Bearer ${apiKey}` },
      metrics: () => scrapeMetrics(server.base),
    },
    http: { url: `${bare.base}/v1/traces/batch`, headers },
    ...(naive ? { naive: { url: `${naive.base}/v1/traces/batch`, headers } } : {}),
  };
  /** @type {Partial<Record<Side, number>>} */
  const pidOf = { service: server.child.pid, naive: naive?.child.pid };
  const bodies = createBodyPool({ mix: mixName, agentId });
  const makeBatch = createBatchMaker({ ulid, mix: mixName, agentId: baselineAgentId });
  const items = new OneShotPool(makeBatch);
  try {
    const sample = Array.from({ length: 60 }, () => bodies.make());
    result.bodyJsonBytes = Math.round(sample.reduce((s, b) => s + b.jsonBytes, 0) / 60);
    result.bodyGzipBytes = Math.round(sample.reduce((s, b) => s + b.gz.length, 0) / 60);
    const estimate = { ...mix.initialRates };
    const poolFor = (/** @type {number} */ rate, /** @type {number} */ seconds) =>
      Math.ceil(rate * seconds * 1.5) + 4 * CFG.connections;
    const ensureAlive = () => {
      if (!server.alive())
        throw new Error(`server died during the run:\n${server.output.lines.join('\n')}`);
    };
    const options = { eventsPerBatch: mix.meanEvents };
    /**
     * One run of `side`, charged its CPU; `label` (none for a warm-up) names it in warnings.
     * @param {Side} side
     * @param {number} seconds
     * @param {string} [label]
     * @returns {Promise<SideRun>}
     */
    const run = async (side, seconds, label) => {
      let r;
      const cpuBefore = cpuSnapshot(pidOf[side], engine);
      if (side === 'db') {
        await items.fill(poolFor(estimate.db, seconds));
        r = await runDbBaseline(baseline, baselineAgentId, items, seconds);
        items.drain();
        if (r.errors > 0) warn(`${mixName} ${label} db baseline: ${r.errors} failed writes`);
      } else {
        await bodies.fill(poolFor(estimate[side], seconds));
        // the naive side runs only where there is a naive server
        r = await runAutocannon(/** @type {Target} */ (targets[side]), bodies, seconds, options);
        bodies.drain();
        ensureAlive();
        for (const w of checkHttpRun(`${mixName} ${label} ${side}`, r)) warn(w);
      }
      // the batches of the run's own window (a baseline writer's last write may end past it)
      r.cpuUsPerBatch = cpuPerBatch(
        cpuBefore,
        cpuSnapshot(pidOf[side], engine),
        Math.round(r.batchesPerSec * seconds),
      );
      estimate[side] = Math.max(estimate[side], r.batchesPerSec);
      return r;
    };

    const rssReset = resetPeakRss(server.child.pid);
    if (CFG.warmupSeconds > 0)
      for (const side of sides)
        console.log(`   ${mixName} warm-up  ${fmtRun(side, await run(side, CFG.warmupSeconds))}`);
    for (let round = 1; round <= CFG.rounds; round++) {
      // every side of the engine, filled in just below
      const entry = /** @type {Round} */ ({ round });
      for (const side of sides) {
        entry[side] = await run(side, CFG.seconds, `round ${round}`);
        console.log(
          `   ${mixName} round ${round}  ${fmtRun(side, /** @type {SideRun} */ (entry[side]))}`,
        );
      }
      result.rounds.push(entry);
    }
    // a round has every side of the engine, and so has the median
    result.median = /** @type {BySide<SideSummary>} */ (
      Object.fromEntries(
        sides.map((side) => [
          side,
          summarise(result.rounds.map((r) => /** @type {SideRun} */ (r[side]))),
        ]),
      )
    );
    const { service, http: bareHttp, db, naive: naiveSide } = result.median;
    result.ratios = {
      serviceVsDb: service.batchesPerSec / db.batchesPerSec,
      ...(naiveSide
        ? {
            serviceVsNaive: service.batchesPerSec / naiveSide.batchesPerSec,
            // Item 1's figure: the service's own CPU per batch over the naive server's, the
            // median of the rounds' ratios (the two run back to back in each round; CPU per
            // batch drifts by a quarter between rounds on this virtual machine).
            serverCpuVsNaive: pairedCpuRatio(result.rounds, 'server'),
            postgresCpuVsNaive: pairedCpuRatio(result.rounds, 'postgres'),
          }
        : {}),
      serviceVsHttp: service.batchesPerSec / bareHttp.batchesPerSec,
      dbVsHttp: db.batchesPerSec / bareHttp.batchesPerSec,
    };
    result.meetsRatioTarget = result.ratios.serviceVsDb >= CFG.targetRatio;

    const rate = Math.max(1, Math.round(service.batchesPerSec / 2));
    await bodies.fill(poolFor(rate, CFG.seconds));
    const ac = await runAutocannon(targets.service, bodies, CFG.seconds, {
      ...options,
      overallRate: rate,
    });
    bodies.drain();
    ensureAlive();
    for (const w of checkHttpRun(`${mixName} half-rate autocannon`, ac)) warn(w);
    console.log(`   ${mixName} half-rate ${rate}/s autocannon  ${fmtRun('service', ac)}`);
    await bodies.fill(poolFor(rate, CFG.seconds));
    const paced = await runPaced(targets.service, bodies, CFG.seconds, { ...options, rate });
    bodies.drain();
    ensureAlive();
    if (paced.non2xx + paced.errors > 0)
      warn(`${mixName} half-rate paced: ${paced.non2xx} non-2xx, ${paced.errors} errors`);
    console.log(`   ${mixName} half-rate ${rate}/s paced       ${fmtRun('service', paced)}`);
    result.halfRate = {
      rate,
      autocannon: { ...ac, targetRate: rate },
      paced,
      meetsP99Target: {
        autocannon: ac.p99Ms !== null && ac.p99Ms < CFG.targetP99Ms,
        paced: paced.p99Ms !== null && paced.p99Ms < CFG.targetP99Ms,
      },
    };
    const end = await scrapeMetrics(server.base);
    const peak = peakRss(server.child.pid);
    result.serverRssPeakBytes = rssReset && peak ? peak : null;
    result.serverRssAtEndBytes = end.rssBytes ?? null;
    const rss = result.serverRssPeakBytes ?? result.serverRssAtEndBytes;
    result.meetsRssTarget = rss === null ? null : rss < CFG.targetRssBytes[engine];
    return result;
  } finally {
    await bodies.close();
  }
}

// ---------------------------------------------------------------------------------------------
// One engine end to end.

/**
 * The real schema for the baseline: the server's migrations, through openStore.
 * @param {Engine} engine
 * @param {string} tag
 * @returns {Promise<Baseline>}
 */
async function openBaseline(engine, tag) {
  const { openStore } = await import('@flightlog/server');
  if (engine === 'postgres') {
    const schema = `bench_${tag}_base`;
    const store = await openStore({
      databaseUrl: CFG.databaseUrl,
      databaseSchema: schema,
      poolSize: 1,
    });
    await store.close();
    return openPostgresBaseline(schema);
  }
  const dir = mkdtempSync(join(os.tmpdir(), 'flightlog-bench-base-'));
  lifecycle.onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  const store = await openStore({ dataDir: dir, dataDirDurability: durabilityOf(engine) });
  await store.close();
  return openPgliteBaseline(dir, durabilityOf(engine));
}

/**
 * The server's environment: where its database is, and BENCH_SERVER_ENV.
 * @typedef {Record<string, string | undefined>} ServerEnv
 */

/**
 * One engine, as written to the results file: every field but `engine` may be missing, as
 * where it was skipped or failed.
 * @typedef {object} EngineResult
 * @property {Engine} engine
 * @property {string} [skipped] why it did not run
 * @property {string} [error] what stopped it
 * @property {Record<string, MixResult | FailedMix>} [mixes] by mix name
 * @property {string[]} [warnings]
 * @property {string[]} [schemas] PostgreSQL: the server's, then the baseline's
 * @property {string} [baselineKind]
 * @property {number[]} [loadAvgBefore]
 * @property {number[]} [loadAvgAfter]
 * @property {number} [serverStartMs]
 * @property {number | null} [serverAcceptedTotal]
 * @property {number | null} [serverDuplicatesTotal]
 * @property {{ code: number | null, signal: NodeJS.Signals | null }} [serverExit]
 * @property {Record<string, number>} [serverLog] its output lines by message
 * @property {string[]} [serverOutputTail]
 * @property {StoredRows} [serverStored]
 * @property {number} [baselineEventsStored]
 */

/**
 * @param {Engine} engine
 * @param {ChildServer} bare
 * @returns {Promise<EngineResult>}
 */
async function benchEngine(engine, bare) {
  const mark = lifecycle.mark();
  /** @type {EngineResult & Required<Pick<EngineResult, 'mixes' | 'warnings'>>} */
  const result = { engine, mixes: {}, warnings: [] };
  const warn = (/** @type {string} */ w) => {
    console.error(`  !!! WARNING ${engine}: ${w}`);
    result.warnings.push(w);
  };
  try {
    const tag = randomBytes(4).toString('hex');
    /** @type {ServerEnv} */
    let serverEnv;
    if (engine === 'postgres') {
      const url = new URL(CFG.databaseUrl);
      const port = Number(url.port || 5432);
      if (!(await reachable(url.hostname, port))) {
        const reason = `PostgreSQL at ${url.hostname}:${port} is unreachable`;
        console.log(`\n${'!'.repeat(78)}\n!!! SKIPPING POSTGRESQL: ${reason}\n${'!'.repeat(78)}`);
        return { engine, skipped: reason };
      }
      const schemas = [`bench_${tag}`, `bench_${tag}_base`];
      result.schemas = schemas;
      lifecycle.onCleanup(async () => {
        const client = new pg.Client({ connectionString: CFG.databaseUrl });
        await client.connect();
        try {
          for (const s of schemas) await client.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
        } finally {
          await client.end();
        }
      });
      serverEnv = { DATABASE_URL: CFG.databaseUrl, DATABASE_SCHEMA: schemas[0] };
    } else {
      const dir = mkdtempSync(join(os.tmpdir(), 'flightlog-bench-server-'));
      lifecycle.onCleanup(() => rmSync(dir, { recursive: true, force: true }));
      serverEnv = { DATA_DIR: dir, DATA_DIR_DURABILITY: durabilityOf(engine) };
    }
    if (CFG.serverPoolSize) serverEnv.DATABASE_POOL_SIZE = String(CFG.serverPoolSize);
    Object.assign(serverEnv, CFG.serverEnv);
    const baseline = await openBaseline(engine, tag);
    lifecycle.onCleanup(() => baseline.close());
    result.baselineKind = baseline.kind;
    const baselineAgentId = `bench-baseline-${ulid()}`;
    await baseline.query('INSERT INTO agents (id, name) VALUES ($1, $2)', [
      baselineAgentId,
      'bench baseline',
    ]);

    result.loadAvgBefore = os.loadavg().map((x) => Math.round(x * 100) / 100);
    console.log(`\n== ${engine}: starting server (load average ${result.loadAvgBefore.join(' ')})`);
    const t0 = performance.now();
    const server = await startFlightlogServer(lifecycle, { cli: CLI, cwd: ROOT, env: serverEnv });
    result.serverStartMs = Math.round(performance.now() - t0);
    const { agentId, apiKey } = await createAgent(server);
    const naive =
      engine === 'postgres'
        ? await startNaiveServer(
            /** @type {[string, string]} */ (result.schemas)[1],
            baselineAgentId,
          )
        : undefined;
    const ctx = { engine, server, bare, naive, apiKey, agentId, baseline, baselineAgentId, warn };
    for (const mix of CFG.mixes) {
      try {
        result.mixes[mix] = await benchMix(ctx, mix);
      } catch (error) {
        console.error(
          `\n!!! ${engine} ${mix} FAILED: ${/** @type {Thrown} */ (error)?.stack ?? error}`,
        );
        result.mixes[mix] = { mix, error: String(/** @type {Thrown} */ (error)?.message ?? error) };
        if (!server.alive()) break;
      }
    }

    result.loadAvgAfter = os.loadavg().map((x) => Math.round(x * 100) / 100);
    const end = await scrapeMetrics(server.base).catch(() => /** @type {ServerMetrics} */ ({}));
    result.serverAcceptedTotal = end.accepted ?? null;
    result.serverDuplicatesTotal = end.duplicate ?? null;
    const exit = await server.stop();
    result.serverExit = exit;
    result.serverLog = server.output.byMessage;
    if (exit.code !== 0) warn(`server exited with code ${exit.code} signal ${exit.signal}`);
    if (server.output.count > 0) result.serverOutputTail = server.output.lines.slice(-10);
    // What the server says it accepted must be in its tables (read once the server is stopped).
    const stored = await countServerRows(engine, serverEnv, agentId);
    result.serverStored = stored;
    if (end.accepted !== undefined && stored.batches !== end.accepted)
      warn(`server stored ${stored.batches} batches for ${end.accepted} accepted`);
    if (stored.events !== stored.announced)
      warn(`server stored ${stored.events} events of ${stored.announced} accepted`);
    // count(*): always one row
    const [{ n }] = /** @type {[{ n: number }]} */ (
      (
        await baseline.query('SELECT count(*)::int AS n FROM events WHERE agent_id = $1', [
          baselineAgentId,
        ])
      ).rows
    );
    result.baselineEventsStored = n;
    return result;
  } catch (error) {
    console.error(
      `\n!!! ${engine.toUpperCase()} BENCHMARK FAILED: ${
        /** @type {Thrown} */ (error)?.stack ?? error
      }`,
    );
    return { ...result, error: String(/** @type {Thrown} */ (error)?.message ?? error) };
  } finally {
    await lifecycle.runCleanupsFrom(mark);
  }
}

// ---------------------------------------------------------------------------------------------
// Report.

const n = (/** @type {number | null | undefined} */ x, digits = 1) =>
  x === null || x === undefined ? 'n/a' : x.toFixed(digits);
const mb = (/** @type {number | null | undefined} */ bytes) =>
  bytes ? `${(bytes / 1e6).toFixed(0)} MB` : 'n/a';
const met = (/** @type {boolean | null | undefined} */ ok) =>
  ok === null || ok === undefined ? 'n/a' : ok ? 'met' : 'MISSED';

/**
 * What PGlite's fsync costs one mix: batches/s durable (power-loss) and process-crash, of the
 * service (with its p50) and of baseline (c).
 * @typedef {{ powerLoss: number, processCrash: number, ratio: number }} RateCost
 * @typedef {object} FsyncCost
 * @property {RateCost & { p50Ms: { powerLoss: number | null, processCrash: number | null } }}
 *   service
 * @property {RateCost} db
 */

/**
 * What PGlite's fsync costs: per mix, the durable service's median rate over the process-crash
 * one (and the same for baseline c), when both ran.
 */
/**
 * @param {EngineResult[]} results
 * @returns {Record<string, FsyncCost> | undefined} by mix name
 */
function fsyncCost(results) {
  const durable = results.find((r) => r.engine === 'pglite')?.mixes ?? {};
  const fast = results.find((r) => r.engine === 'pglite-process-crash')?.mixes ?? {};
  /** @type {Record<string, FsyncCost>} */
  const cost = {};
  for (const [mix, m] of Object.entries(durable)) {
    const f = fast[mix];
    if (!m.median || !f?.median) continue;
    cost[mix] = {
      service: {
        powerLoss: m.median.service.batchesPerSec,
        processCrash: f.median.service.batchesPerSec,
        ratio: m.median.service.batchesPerSec / f.median.service.batchesPerSec,
        p50Ms: { powerLoss: m.median.service.p50Ms, processCrash: f.median.service.p50Ms },
      },
      db: {
        powerLoss: m.median.db.batchesPerSec,
        processCrash: f.median.db.batchesPerSec,
        ratio: m.median.db.batchesPerSec / f.median.db.batchesPerSec,
      },
    };
  }
  return Object.keys(cost).length > 0 ? cost : undefined;
}

/**
 * This run's machine, time and fsync costs, as written to the results file.
 * @typedef {MachineInfo & { totalSeconds: number, pgliteFsyncCost?: Record<string, FsyncCost> }}
 *   RunInfo
 */

/**
 * @param {EngineResult[]} results
 * @param {RunInfo} meta
 */
function report(results, meta) {
  /** @type {(string | number)[][]} */
  const rows = [['engine', 'mix', 'run', 'batches/s', 'events/s', 'p50 ms', 'p99 ms', 'failed']];
  /** @type {string[]} */
  const notes = [];
  for (const r of results) {
    if (r.skipped) {
      notes.push(`${r.engine}: SKIPPED (${r.skipped})`);
      continue;
    }
    for (const m of Object.values(r.mixes ?? {})) {
      if (!m.median) {
        notes.push(`${r.engine} ${m.mix}: FAILED (${m.error})`);
        continue;
      }
      const row = (
        /** @type {string} */ label,
        /** @type {Figures} */ x,
        /** @type {string | number} */ bad = '',
      ) =>
        rows.push([
          r.engine,
          m.mix,
          label,
          n(x.batchesPerSec),
          n(x.eventsPerSec, 0),
          n(x.p50Ms),
          n(x.p99Ms),
          bad,
        ]);
      const failed = (/** @type {Run} */ x) =>
        (x.non2xx ?? 0) + (x.errors ?? 0) + (x.timeouts ?? 0);
      const sides = sidesOf(r.engine);
      // a round, and the median, have every side of the engine
      for (const entry of m.rounds)
        for (const side of sides)
          row(
            `${side} round ${entry.round}`,
            /** @type {SideRun} */ (entry[side]),
            failed(/** @type {SideRun} */ (entry[side])),
          );
      for (const side of sides) row(`${side} MEDIAN`, /** @type {SideSummary} */ (m.median[side]));
      const cpu = (/** @type {Side} */ side, /** @type {keyof PerProcess} */ key) =>
        n(m.median[side]?.cpuUsPerBatch?.[key], 0);
      notes.push(
        `${r.engine} ${m.mix}: CPU µs per batch — ` +
          sides
            .map((side) =>
              side === 'http'
                ? undefined
                : `${side}: ${side === 'db' ? '' : `server ${cpu(side, 'server')}, `}PostgreSQL ${cpu(side, 'postgres')}`,
            )
            .filter(Boolean)
            .join('; ') +
          (m.ratios.serverCpuVsNaive
            ? `; service/naive: server CPU ${n(m.ratios.serverCpuVsNaive, 2)} (target <= 1.5: ${met(m.ratios.serverCpuVsNaive <= 1.5)}), ` +
              `PostgreSQL CPU ${n(m.ratios.postgresCpuVsNaive, 2)}, batches/s ${n(m.ratios.serviceVsNaive, 2)}`
            : ''),
      );
      const { autocannon: ac, paced, rate } = m.halfRate;
      row(`half rate ${rate}/s autocannon`, ac, failed(ac));
      row(`half rate ${rate}/s paced`, paced, failed(paced));
      notes.push(
        `${r.engine} ${m.mix}: service/db = ${n(m.ratios.serviceVsDb, 2)} (target >= ${CFG.targetRatio}: ${met(m.meetsRatioTarget)}), ` +
          `service/http = ${n(m.ratios.serviceVsHttp, 2)}, db/http = ${n(m.ratios.dbVsHttp, 2)}; ` +
          `half-rate p99 ${n(paced.p99Ms)} ms paced (target < ${CFG.targetP99Ms} ms: ${met(m.halfRate.meetsP99Target.paced)}), ` +
          `${n(ac.p99Ms)} ms autocannon; server RSS peak ${mb(m.serverRssPeakBytes)} (target < ${mb(CFG.targetRssBytes[r.engine])}: ${met(m.meetsRssTarget)})`,
      );
    }
    if (r.serverStored)
      notes.push(
        `${r.engine}: server accepted ${r.serverAcceptedTotal} batches (${r.serverDuplicatesTotal} duplicates), ` +
          `stored ${r.serverStored.batches} batches / ${r.serverStored.events} events; ` +
          `db baseline stored ${r.baselineEventsStored} events`,
      );
    if (r.error) notes.push(`${r.engine}: FAILED (${r.error})`);
    for (const w of r.warnings ?? []) notes.push(`${r.engine}: !!! ${w}`);
  }
  for (const [mix, c] of Object.entries(meta.pgliteFsyncCost ?? {}))
    notes.push(
      `PGlite ${mix}, fsync cost: service ${n(c.service.powerLoss)}/s durable (power-loss) vs ` +
        `${n(c.service.processCrash)}/s process-crash = ${n(c.service.ratio, 2)} ` +
        `(p50 ${n(c.service.p50Ms.powerLoss)} vs ${n(c.service.p50Ms.processCrash)} ms); ` +
        `baseline (c) ${n(c.db.powerLoss)}/s vs ${n(c.db.processCrash)}/s = ${n(c.db.ratio, 2)}`,
    );
  console.log(
    `\nFlightlog ingest benchmark — ${meta.date}, node ${meta.node}, ${meta.cpuModel} x ${meta.cores}\n` +
      `${CFG.rounds} rounds x ${CFG.seconds} s per side (service, http = bare node:http, db = one ` +
      `statement per batch on ${CFG.dbConnections} connections), ${CFG.connections} HTTP senders\n`,
  );
  console.log(rows.length > 1 ? textTable(rows, (c) => c < 3) : '(nothing measured)');
  console.log(`\n${notes.join('\n')}`);
  console.log(
    "\nhalf rate: autocannon overallRate sends each connection's per-second quota back to back at\n" +
      'the start of every second (bursts); "paced" spaces requests evenly and counts latency from\n' +
      "each request's scheduled time.",
  );
}

// ---------------------------------------------------------------------------------------------

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
