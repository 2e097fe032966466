// Retention sweep benchmark (issue 24, item 1): ingest throughput and latency of the real server
// while its lifecycle sweeper deletes a large amount of expired data, next to the same load with
// no sweep running, in the same server process and the same run.
//
// For each engine (PostgreSQL at BENCH_DATABASE_URL, skipped loudly when unreachable; PGlite with
// its default durability) it stages, before the server starts, one agent with
// BENCH_SWEEP_EVENTS events in runs of BENCH_EVENTS_PER_RUN, all started and last changed ten days
// ago, with retention off for that agent; then starts the built server (LIFECYCLE_SWEEP_MS=500,
// LIFECYCLE_SWEEP_ROWS default) and an ingest agent, and measures autocannon closed-loop ingest
// (BENCH_CONNECTIONS connections, the ingest benchmark's `small` mix: 1 trace + 1-3 llm_call
// events, gzip, every body used once) in windows of BENCH_SECONDS:
//
//   before   no sweep has anything to delete (its passes run and find nothing)
//   during   after the staged agent's retention is set to 1 day (admin API): the next pass
//            deletes every staged run; windows follow each other until the sweep has ended
//            (the `flightlog_lifecycle_runs_total{action="expired"}` counter moves at its end).
//            Only windows that ended before the sweep did count as `during`.
//   after    the sweep is over
//
// It reports batches/s and p99 of each window, the sweep's duration, and the ratios
// during / before+after (median of each side; the target: no more than 10 % lower).
// Figures are printed and written to bench/results/lifecycle-latest.json. A benchmark, not a
// test: nothing is asserted. Bounded by BENCH_TIMEOUT_SECONDS.
//
// Env: BENCH_SECONDS (5), BENCH_SWEEP_EVENTS (200000), BENCH_EVENTS_PER_RUN (20),
//      BENCH_CONNECTIONS (8), BENCH_ENGINES (postgres,pglite), BENCH_DATABASE_URL
//      BENCH_SWEEP_ROWS, BENCH_SWEEP_DUTY_PERCENT (the server's LIFECYCLE_SWEEP_ROWS and
//      LIFECYCLE_SWEEP_DUTY_PERCENT; its defaults when unset),
//      (postgres://postgres@127.0.0.1:5432/test), BENCH_TIMEOUT_SECONDS (900)

import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createBodyPool } from './ingest-bodies.mjs';
import {
  autocannon,
  createLifecycle,
  envNumber,
  machineInfo,
  median,
  reachable,
  redactUrl,
  request,
  startFlightlogServer,
  textTable,
  writeJsonAtomic,
} from './support.mjs';

/**
 * @typedef {import('./support.mjs').ServerHandle} ServerHandle
 * @typedef {import('@flightlog/server').StoreOptions} StoreOptions
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLI = join(ROOT, 'packages/server/dist/cli.js');
const CFG = {
  seconds: envNumber('BENCH_SECONDS', 5, 1, 600),
  sweepEvents: envNumber('BENCH_SWEEP_EVENTS', 200_000, 1_000, 100_000_000),
  eventsPerRun: envNumber('BENCH_EVENTS_PER_RUN', 20, 1, 100_000),
  connections: envNumber('BENCH_CONNECTIONS', 8, 1, 256),
  engines: (process.env.BENCH_ENGINES ?? 'postgres,pglite').split(',').map((e) => e.trim()),
  databaseUrl: process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
  timeoutSeconds: envNumber('BENCH_TIMEOUT_SECONDS', 900, 30, 86_400),
};
const lifecycle = createLifecycle({ timeoutSeconds: CFG.timeoutSeconds });
const { openStore } = /** @type {{ openStore: typeof import('@flightlog/server').openStore }} */ (
  await import(join(ROOT, 'packages/server/dist/store/open-store.js'))
);

const EXPIRED_AGENT = 'bench-expired';

/** Where an engine's data lives: a fresh PostgreSQL schema, or a PGlite data directory. */
/** @typedef {Pick<StoreOptions, 'databaseUrl' | 'databaseSchema' | 'dataDir'>} StoreLocation */

/** What was staged, and how long staging took. */
/** @typedef {{ runs: number, events: number, stageSec: number }} Staged */

/**
 * The staged data: one agent, its runs and events ten days old, its retention off for now.
 * @param {StoreLocation} location
 * @returns {Promise<Staged>}
 */
async function stage(location) {
  const runs = Math.ceil(CFG.sweepEvents / CFG.eventsPerRun);
  const store = await openStore({ ...location, poolSize: 2 });
  const started = performance.now();
  try {
    await store.sql.query(
      `INSERT INTO agents (id, name, retention_days) VALUES ($1, 'expired', 0)`,
      [EXPIRED_AGENT],
    );
    // in slices, so that PGlite's memory stays flat
    const slice = Math.max(1, Math.floor(50_000 / CFG.eventsPerRun));
    for (let from = 1; from <= runs; from += slice) {
      const to = Math.min(runs, from + slice - 1);
      await store.sql.query(
        `INSERT INTO traces (id, agent_id, status, started_at, updated_at, input_summary, tags,
           event_count, total_tokens, total_cost_usd, total_lamports, chain_tx_count, tools_called)
         SELECT 'exp-' || lpad(g::text, 9, '0'), $1, 'completed', now() - interval '10 days',
                now() - interval '10 days', 'an old run', '{}', $4, 0, 0, 0, 0, '{}'
         FROM generate_series($2::int, $3::int) g`,
        [EXPIRED_AGENT, from, to, CFG.eventsPerRun],
      );
      await store.sql.query(
        `INSERT INTO events (id, trace_id, agent_id, sequence, type, started_at, status, payload,
                             payload_encrypted)
         SELECT 'exp-' || lpad(g::text, 9, '0') || '-' || s, 'exp-' || lpad(g::text, 9, '0'), $1, s,
                'llm_call', now() - interval '10 days', 'ok',
                json_build_object('provider', 'openai', 'model', 'gpt-4o-mini',
                  'input', json_build_object('messages', json_build_array(json_build_object(
                    'role', 'user', 'content', repeat('find the best route ', 10)))),
                  'output', json_build_object('content', repeat('route via orca ', 8))),
                false
         FROM generate_series($2::int, $3::int) g, generate_series(0, $4::int - 1) s`,
        [EXPIRED_AGENT, from, to, CFG.eventsPerRun],
      );
    }
    await store.sql.query('ANALYZE');
  } finally {
    await store.close();
  }
  return { runs, events: runs * CFG.eventsPerRun, stageSec: (performance.now() - started) / 1000 };
}

/** @param {ServerHandle} server */
async function expiredCounter(server) {
  const { text } = await request('GET', `${server.base}/metrics`);
  const match = /flightlog_lifecycle_runs_total\{action="expired"\} (\d+)/.exec(text);
  return match ? Number(match[1]) : 0;
}

/** @param {ServerHandle} server */
async function sweepSeconds(server) {
  const { text } = await request('GET', `${server.base}/metrics`);
  const part = (/** @type {string} */ name) =>
    Number(
      new RegExp(`flightlog_lifecycle_sweep_seconds_total\\{part="${name}"\\} ([\\d.e+-]+)`).exec(
        text,
      )?.[1] ?? 0,
    );
  return { work: part('work'), elapsed: part('elapsed') };
}

/** @typedef {import('./ingest-bodies.mjs').BodyPool} BodyPool */

/**
 * One measurement window of closed-loop ingest; `startedAt` and `endedAt` are epoch ms, to place
 * it before, during or after the sweep.
 * @typedef {object} IngestWindow
 * @property {number} startedAt
 * @property {number} endedAt
 * @property {number} batchesPerSec
 * @property {number} p50Ms
 * @property {number} p99Ms
 * @property {number} maxMs
 * @property {number} non2xx
 * @property {number} errors
 */

/**
 * @param {ServerHandle} server
 * @param {Record<string, string>} headers
 * @param {BodyPool} bodies
 * @returns {Promise<IngestWindow>}
 */
async function ingestWindow(server, headers, bodies) {
  await bodies.fill(Math.ceil(1500 * CFG.seconds));
  const started = Date.now();
  const result = await autocannon({
    url: `${server.base}/v1/traces/batch`,
    method: 'POST',
    connections: CFG.connections,
    duration: CFG.seconds,
    timeout: 10,
    headers,
    requests: [{ setupRequest: (req) => ({ ...req, body: bodies.next().gz }) }],
  });
  return {
    startedAt: started,
    endedAt: Date.now(),
    batchesPerSec: result['2xx'] / result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    maxMs: result.latency.max,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

/**
 * A window with where it fell: `sweep-ended` is the window in which the sweep ended (counted
 * neither during nor without).
 * @typedef {IngestWindow & { phase: 'before' | 'during' | 'sweep-ended' | 'after' }} PhasedWindow
 */

/** Medians over windows; a side is only summarised when it has windows, so never null. */
/** @typedef {{ batchesPerSec: number, p99Ms: number }} Medians */

/**
 * One engine's result; `ratio` (during / without) only when some window fell within the sweep.
 * @typedef {object} EngineSummary
 * @property {string} engine
 * @property {Staged} staged
 * @property {number} sweepSeconds under load, from the retention change to the counter's move
 * @property {number} sweepWorkSeconds in the sweep's statements
 * @property {number} sweepPassSeconds in its passes
 * @property {PhasedWindow[]} windows
 * @property {Medians} withoutSweep
 * @property {Medians | null} duringSweep
 * @property {{ throughput: number, p99: number }} [ratio]
 */

/**
 * @param {string} engine
 * @returns {Promise<EngineSummary | undefined>} undefined when the engine is skipped
 */
async function runEngine(engine) {
  const mark = lifecycle.mark();
  /** @type {StoreLocation} */
  let location;
  if (engine === 'postgres') {
    const url = new URL(CFG.databaseUrl);
    if (!(await reachable(url.hostname, Number(url.port || 5432)))) {
      console.error(`!!! SKIPPED postgres: ${redactUrl(CFG.databaseUrl)} is unreachable`);
      return undefined;
    }
    const schema = `bench_lc_${randomBytes(5).toString('hex')}`;
    location = { databaseUrl: CFG.databaseUrl, databaseSchema: schema };
    lifecycle.onCleanup(async () => {
      const client = new pg.Client({ connectionString: CFG.databaseUrl });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await client.end();
    });
  } else {
    const dir = mkdtempSync(join(os.tmpdir(), 'flightlog-bench-lc-'));
    location = { dataDir: dir };
    lifecycle.onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  }
  console.log(`\n== ${engine}: staging ${CFG.sweepEvents} expired events`);
  const staged = await stage(location);
  console.log(
    `   staged ${staged.runs} runs / ${staged.events} events in ${staged.stageSec.toFixed(1)} s`,
  );
  const server = await startFlightlogServer(lifecycle, {
    cli: CLI,
    cwd: ROOT,
    tag: `server-${engine}`,
    env: {
      ...(location.databaseUrl
        ? { DATABASE_URL: location.databaseUrl, DATABASE_SCHEMA: location.databaseSchema }
        : { DATA_DIR: location.dataDir }),
      LIFECYCLE_SWEEP_MS: '500',
      ...(process.env.BENCH_SWEEP_ROWS
        ? { LIFECYCLE_SWEEP_ROWS: process.env.BENCH_SWEEP_ROWS }
        : {}),
      ...(process.env.BENCH_SWEEP_DUTY_PERCENT
        ? { LIFECYCLE_SWEEP_DUTY_PERCENT: process.env.BENCH_SWEEP_DUTY_PERCENT }
        : {}),
      ANALYSIS_WORKER: 'off',
    },
  });
  const admin = {
    authorization: `Bearer ${server.adminToken}`,
    'content-type': 'application/json',
  };
  const created = await request('POST', `${server.base}/admin/v1/agents`, {
    headers: admin,
    body: '{}',
  });
  const { agentId, apiKey } = /** @type {{ agentId: string, apiKey: string }} */ (
    JSON.parse(created.text)
  );
  const bodies = createBodyPool({ mix: 'small', agentId });
  const headers = {
    authorization: `Bearer ${apiKey}`,
    'content-type': 'application/json',
    'content-encoding': 'gzip',
  };
  /** @type {PhasedWindow[]} */
  const windows = [];
  try {
    await ingestWindow(server, headers, bodies); // warm-up, not counted
    for (let i = 0; i < 3; i++)
      windows.push({ phase: 'before', ...(await ingestWindow(server, headers, bodies)) });
    const patched = await request(
      'PATCH',
      `${server.base}/admin/v1/agents/${EXPIRED_AGENT}/lifecycle`,
      { headers: admin, body: JSON.stringify({ retentionDays: 1 }) },
    );
    if (patched.status !== 200)
      throw new Error(`retention not set: ${patched.status} ${patched.text}`);
    const sweepFrom = Date.now();
    const sweepTimeBefore = await sweepSeconds(server);
    /** @type {number | undefined} */
    let sweepEnded;
    while (sweepEnded === undefined) {
      const window = await ingestWindow(server, headers, bodies);
      const done = (await expiredCounter(server)) >= staged.runs;
      if (done) sweepEnded = Date.now();
      windows.push({ phase: done ? 'sweep-ended' : 'during', ...window });
      if (Date.now() - sweepFrom > CFG.timeoutSeconds * 500)
        throw new Error('the sweep did not end');
    }
    // the counter is read after each window: the end is known to that window's precision
    for (let i = 0; i < 3; i++)
      windows.push({ phase: 'after', ...(await ingestWindow(server, headers, bodies)) });
    // the passes' own account of their statements' time
    const sweepTime = await sweepSeconds(server);
    const without = windows.filter((w) => w.phase === 'before' || w.phase === 'after');
    const during = windows.filter((w) => w.phase === 'during');
    /** @type {EngineSummary} */
    const summary = {
      engine,
      staged,
      sweepSeconds: (sweepEnded - sweepFrom) / 1000,
      sweepWorkSeconds: sweepTime.work - sweepTimeBefore.work,
      sweepPassSeconds: sweepTime.elapsed - sweepTimeBefore.elapsed,
      windows,
      // three windows before and three after: never empty
      withoutSweep: {
        batchesPerSec: /** @type {number} */ (median(without.map((w) => w.batchesPerSec))),
        p99Ms: /** @type {number} */ (median(without.map((w) => w.p99Ms))),
      },
      duringSweep: during.length
        ? {
            batchesPerSec: /** @type {number} */ (median(during.map((w) => w.batchesPerSec))),
            p99Ms: /** @type {number} */ (median(during.map((w) => w.p99Ms))),
          }
        : null,
    };
    if (summary.duringSweep)
      summary.ratio = {
        throughput: summary.duringSweep.batchesPerSec / summary.withoutSweep.batchesPerSec,
        p99: summary.duringSweep.p99Ms / summary.withoutSweep.p99Ms,
      };
    else
      console.error(
        `!!! ${engine}: the sweep ended within the first window (${summary.sweepSeconds} s): ` +
          'raise BENCH_SWEEP_EVENTS to measure ingest during it',
      );
    return summary;
  } finally {
    await bodies.close();
    await lifecycle.runCleanupsFrom(mark);
  }
}

/** @type {EngineSummary[]} */
const results = [];
for (const engine of CFG.engines) {
  const result = await runEngine(engine);
  if (result) results.push(result);
}
for (const r of results) {
  console.log(
    `\n${r.engine}: sweep of ${r.staged.events} events (${r.staged.runs} runs) took ` +
      `${r.sweepSeconds.toFixed(1)} s under load (passes: ${r.sweepPassSeconds.toFixed(1)} s, ` +
      `of which ${r.sweepWorkSeconds.toFixed(1)} s in statements)`,
  );
  console.log(
    textTable([
      ['window', 'phase', 'batches/s', 'p50 ms', 'p99 ms', 'max ms', 'non-2xx'],
      ...r.windows.map((w, i) => [
        String(i + 1),
        w.phase,
        w.batchesPerSec.toFixed(0),
        String(w.p50Ms),
        String(w.p99Ms),
        String(w.maxMs),
        String(w.non2xx + w.errors),
      ]),
    ]),
  );
  if (r.ratio)
    console.log(
      `during / without: throughput ${(r.ratio.throughput * 100).toFixed(0)} %, ` +
        // a ratio is only set with a duringSweep
        `p99 ${/** @type {Medians} */ (r.duringSweep).p99Ms} ms vs ${r.withoutSweep.p99Ms} ms`,
    );
}
writeJsonAtomic(join(ROOT, 'bench/results/lifecycle-latest.json'), {
  config: CFG,
  machine: machineInfo(ROOT),
  results,
});
await lifecycle.runCleanups();
process.exit(0);
