// Ingest benchmark: how fast the real Flightlog server stores batches, next to the fastest
// plain-SQL way of writing the same rows on the same database engine.
//
// For each engine (PostgreSQL at BENCH_DATABASE_URL, skipped loudly when unreachable; then
// PGlite) it starts the built server as a child process on a fresh schema / data directory,
// creates an agent, and alternates two measurements of BENCH_SECONDS each, BENCH_ROUNDS times:
//
//   service   autocannon, 16 connections, POST /v1/traces/batch with gzip bodies of 1 trace +
//             20 llm_call events (~20 KB of JSON). Every request carries a body built for it
//             alone (fresh batch, trace and event ids), so no duplicate-key shortcut is measured.
//   baseline  the same rows written without HTTP: 16 concurrent async senders, one transaction
//             per batch (claim accepted_batches row, upsert trace, insert 20 events with one
//             unnest statement, commit), through a pg.Pool of the server's size (PostgreSQL) or
//             an in-process PGlite on its own fresh data directory (PGlite). The statements are
//             the server's own (trace-store.ts) minus its SELECT ... FOR UPDATE of the trace.
//
// Alternating A B A B spreads drift (table growth, checkpoints, autovacuum, CPU boost) over both
// sides. It reports the median of each side and service/baseline throughput (target >= 0.7),
// then latency at half the service's median rate (target p99 < 50 ms) two ways: an autocannon
// run with overallRate (autocannon releases each connection's per-second quota in a burst at
// the start of every second) and an evenly paced open-loop sender (latency counted from each
// request's scheduled time). Figures are printed and written to bench/results/ingest-latest.json.
//
// It is a benchmark, not a test: nothing is asserted, anomalies (non-2xx, duplicates, errors)
// are printed loudly. Bounded: BENCH_TIMEOUT_SECONDS (default 300) aborts the run; servers are
// stopped and schemas / data directories removed on every exit path.
//
// Env: BENCH_SECONDS (5), BENCH_ROUNDS (3), BENCH_WARMUP_SECONDS (2), BENCH_TIMEOUT_SECONDS (300),
//      BENCH_DATABASE_URL (postgres://postgres@127.0.0.1:5432/test), BENCH_ENGINES (postgres,pglite),
//      BENCH_SERVER_NODE_ARGS (extra node flags for the server, e.g. "--cpu-prof --cpu-prof-dir=/tmp/p")

import { spawn, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import autocannon from 'autocannon';
import pg from 'pg';
import { PGlite } from '@electric-sql/pglite';
import { monotonicFactory } from 'ulidx';
import {
  SERVER_ENV_DROPPED,
  createItemFactory,
  envNumber,
  freePort,
  percentiles,
  reachable,
  request,
} from './support.mjs';

// ulidx's plain ulid() draws each random character from crypto separately (~50 us per id);
// the monotonic factory increments within a millisecond (~1 us): still unique, still ULIDs.
const ulid = monotonicFactory();

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLI = join(ROOT, 'packages/server/dist/cli.js');
const RESULTS_DIR = join(ROOT, 'bench/results');
const RESULTS_FILE = join(RESULTS_DIR, 'ingest-latest.json');

const CFG = {
  seconds: envNumber('BENCH_SECONDS', 5, 1, 120),
  rounds: Math.round(envNumber('BENCH_ROUNDS', 3, 1, 20)),
  warmupSeconds: envNumber('BENCH_WARMUP_SECONDS', 2, 0, 60),
  timeoutSeconds: envNumber('BENCH_TIMEOUT_SECONDS', 300, 30, 3600),
  databaseUrl: process.env.BENCH_DATABASE_URL?.trim() || 'postgres://postgres@127.0.0.1:5432/test',
  engines: (process.env.BENCH_ENGINES?.trim() || 'postgres,pglite')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean),
  connections: 16,
  poolSize: 10,
  eventsPerBatch: 20,
  targetRatio: 0.7,
  targetP99Ms: 50,
};

// ---------------------------------------------------------------------------------------------
// Lifecycle: every child and every temporary resource is released on every exit path.

const children = new Set();
const cleanups = [];
let cleaningUp;

function onCleanup(fn) {
  cleanups.push(fn);
  return fn;
}

async function runCleanups() {
  cleaningUp ??= (async () => {
    while (cleanups.length > 0) {
      const fn = cleanups.pop();
      try {
        await Promise.race([fn(), sleep(15_000, undefined, { ref: false })]);
      } catch (error) {
        console.error(`cleanup failed: ${error?.message ?? error}`);
      }
    }
  })();
  return cleaningUp;
}

/** Runs the cleanups registered after `mark`, newest first (an engine's own resources). */
async function runCleanupsFrom(mark) {
  const mine = cleanups.splice(mark);
  while (mine.length > 0) {
    const fn = mine.pop();
    try {
      await Promise.race([fn(), sleep(15_000, undefined, { ref: false })]);
    } catch (error) {
      console.error(`cleanup failed: ${error?.message ?? error}`);
    }
  }
}

process.on('exit', () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
});

async function abort(reason, code) {
  console.error(`\n!!! ${reason}: stopping servers and removing temporary data`);
  await runCleanups();
  process.exit(code);
}
process.once('SIGINT', () => void abort('interrupted', 130));
process.once('SIGTERM', () => void abort('terminated', 143));
const watchdog = setTimeout(
  () => void abort(`BENCHMARK TIMED OUT after ${CFG.timeoutSeconds} s`, 1),
  CFG.timeoutSeconds * 1000,
);
watchdog.unref();

// ---------------------------------------------------------------------------------------------
// Synthetic data: 1 trace + 20 llm_call events per batch, texts drawn from a fixed pool.

const makeItem = createItemFactory({ ulid, eventsPerBatch: CFG.eventsPerBatch });

function makeBody(agentId) {
  const json = JSON.stringify({ batchId: ulid(), items: [makeItem(agentId)] });
  return { json: json.length, gz: gzipSync(json) };
}

/**
 * Values used once each: filled before a run (so the load generator spends no CPU on data
 * during the measurement) and built on the spot if the run outpaces the estimate.
 */
class OneShotPool {
  constructor(make) {
    this.make = make;
    this.items = [];
    this.madeDuringRun = 0;
  }
  fill(n) {
    while (this.items.length < n) this.items.push(this.make());
    this.madeDuringRun = 0;
  }
  next() {
    const item = this.items.pop();
    if (item !== undefined) return item;
    this.madeDuringRun++;
    return this.make();
  }
  drain() {
    this.items = [];
  }
}

// ---------------------------------------------------------------------------------------------
// The server as a child process.

async function startServer(engineEnv) {
  const port = await freePort();
  const adminToken = randomBytes(24).toString('hex');
  const env = { ...process.env };
  for (const name of SERVER_ENV_DROPPED) delete env[name];
  Object.assign(env, engineEnv, {
    PORT: String(port),
    HOST: '127.0.0.1',
    ADMIN_TOKEN: adminToken,
    DATABASE_POOL_SIZE: String(CFG.poolSize),
    LOG_LEVEL: 'warn',
  });
  const nodeArgs = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, CLI, 'serve'], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  const output = { lines: [], count: 0 };
  const collect = (chunk) => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (!line.trim()) continue;
      output.count++;
      if (output.count <= 10) console.log(`    [server] ${line.slice(0, 300)}`);
      else if (output.count === 11) console.log('    [server] (further output not shown)');
      output.lines.push(line);
      if (output.lines.length > 50) output.lines.shift();
    }
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  const exited = new Promise((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  exited.then(() => children.delete(child));

  const base = `http://127.0.0.1:${port}`;
  const server = {
    base,
    adminToken,
    output,
    alive: () => child.exitCode === null && child.signalCode === null,
    /** Stops the server (SIGTERM, SIGKILL after 15 s); resolves to how it exited. */
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const result = await Promise.race([exited, sleep(15_000, undefined, { ref: false })]);
        if (!result) {
          console.error('!!! server did not stop within 15 s of SIGTERM: killing it');
          child.kill('SIGKILL');
        }
      }
      return exited;
    },
  };
  onCleanup(() => server.stop());

  const deadline = Date.now() + 30_000;
  for (;;) {
    if (!server.alive())
      throw new Error(`server exited during start-up:\n${output.lines.join('\n')}`);
    try {
      const { status } = await request('GET', `${base}/readyz`, { timeoutMs: 1_000 });
      if (status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error('server not ready after 30 s');
    await sleep(100);
  }
  return server;
}

async function createAgent(server) {
  const { status, text } = await request('POST', `${server.base}/admin/v1/agents`, {
    headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
    body: '{}',
  });
  if (status !== 201) throw new Error(`agent creation answered ${status}: ${text}`);
  return JSON.parse(text);
}

async function scrapeMetrics(server) {
  const { status, text } = await request('GET', `${server.base}/metrics`);
  if (status !== 200) return {};
  const value = (pattern) => {
    const match = text.match(pattern);
    return match ? Number(match[1]) : undefined;
  };
  return {
    accepted: value(/^flightlog_batches_total\{outcome="accepted"\} (\S+)$/m) ?? 0,
    duplicate: value(/^flightlog_batches_total\{outcome="duplicate"\} (\S+)$/m) ?? 0,
    rssBytes: value(/^process_resident_memory_bytes (\S+)$/m),
  };
}

// ---------------------------------------------------------------------------------------------
// Service measurements.

async function runAutocannon(server, apiKey, bodies, seconds, overallRate) {
  const before = await scrapeMetrics(server);
  const result = await autocannon({
    url: `${server.base}/v1/traces/batch`,
    method: 'POST',
    connections: CFG.connections,
    duration: seconds,
    timeout: 10,
    headers: {
      authorization: `Bearer ${apiKey}`,
      'content-type': 'application/json',
      'content-encoding': 'gzip',
    },
    requests: [{ setupRequest: (req) => ({ ...req, body: bodies.next().gz }) }],
    ...(overallRate
      ? // autocannon corrects for coordinated omission with an interval of ceil(1 / rate) ms
        // (1 ms at these rates), which adds synthetic 1..n ms samples and drags p50 down.
        { overallRate, ignoreCoordinatedOmission: true }
      : {}),
  });
  await sleep(300); // let the requests cut off at the end of the run finish on the server
  const after = await scrapeMetrics(server);
  const ok = result['2xx'];
  return {
    batchesPerSec: ok / result.duration,
    eventsPerSec: (ok * CFG.eventsPerBatch) / result.duration,
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
    serverAccepted: after.accepted - before.accepted,
    serverDuplicates: after.duplicate - before.duplicate,
    bodiesBuiltDuringRun: bodies.madeDuringRun,
  };
}

/** Open loop: request i is due at start + i / rate; latency runs from that due time. */
async function runPaced(server, apiKey, bodies, seconds, rate) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CFG.connections });
  const url = new URL(`${server.base}/v1/traces/batch`);
  const latencies = [];
  const tally = { ok: 0, non2xx: 0, errors: 0, sent: 0 };
  const pending = new Set();
  const fire = (due) => {
    const body = bodies.next().gz;
    tally.sent++;
    const done = new Promise((resolve) => {
      const req = http.request(
        url,
        {
          method: 'POST',
          agent,
          headers: {
            authorization: `Bearer ${apiKey}`,
            'content-type': 'application/json',
            'content-encoding': 'gzip',
            'content-length': body.length,
          },
        },
        (res) => {
          res.resume();
          res.on('end', () => {
            if (res.statusCode >= 200 && res.statusCode < 300) {
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
    eventsPerSec: (tally.ok * CFG.eventsPerBatch) / elapsed,
    p50Ms: stats.p50,
    p99Ms: stats.p99,
    maxMs: stats.max,
    ...tally,
  };
}

// ---------------------------------------------------------------------------------------------
// Baseline: the server's statements (store/trace-store.ts), one transaction per batch.

const CLAIM_BATCH = `INSERT INTO accepted_batches (agent_id, batch_id, trace_id, item_count, event_count)
VALUES ($1, $2, $3, $4, $5) ON CONFLICT (agent_id, batch_id) DO NOTHING RETURNING batch_id`;

const UPSERT_TRACE = `
INSERT INTO traces (
  id, agent_id, status, started_at, ended_at, duration_ms, input_summary, output_summary,
  error_message, tags, event_count, total_tokens, total_cost_usd, total_lamports, chain_tx_count,
  tools_called, anchor_signature, anchor_slot, merkle_proof, trace_hash, share_token)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)
ON CONFLICT (id) DO UPDATE SET
  status = EXCLUDED.status, started_at = EXCLUDED.started_at, ended_at = EXCLUDED.ended_at,
  duration_ms = EXCLUDED.duration_ms, input_summary = EXCLUDED.input_summary,
  output_summary = EXCLUDED.output_summary, error_message = EXCLUDED.error_message,
  tags = EXCLUDED.tags, event_count = EXCLUDED.event_count, total_tokens = EXCLUDED.total_tokens,
  total_cost_usd = EXCLUDED.total_cost_usd, total_lamports = EXCLUDED.total_lamports,
  chain_tx_count = EXCLUDED.chain_tx_count, tools_called = EXCLUDED.tools_called,
  anchor_signature = EXCLUDED.anchor_signature, anchor_slot = EXCLUDED.anchor_slot,
  merkle_proof = EXCLUDED.merkle_proof, trace_hash = EXCLUDED.trace_hash,
  share_token = COALESCE(EXCLUDED.share_token, traces.share_token),
  updated_at = now()
WHERE traces.agent_id = EXCLUDED.agent_id
  AND EXCLUDED.event_count >= traces.event_count
  AND NOT (EXCLUDED.status = 'running' AND traces.status <> 'running')
RETURNING id`;

const INSERT_EVENTS = `
INSERT INTO events (
  id, trace_id, agent_id, sequence, type, started_at, ended_at, duration_ms, status, payload,
  payload_encrypted, parent_event_id, error_message)
SELECT e.id, e.trace_id, $1, e.sequence, e.type, e.started_at, e.ended_at, e.duration_ms,
       e.status, e.payload, e.payload_encrypted, e.parent_event_id, e.error_message
FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::timestamptz[],
            $7::timestamptz[], $8::float8[], $9::text[], $10::json[], $11::boolean[],
            $12::text[], $13::text[])
  AS e(id, trace_id, sequence, type, started_at, ended_at, duration_ms, status, payload,
       payload_encrypted, parent_event_id, error_message)
ON CONFLICT (id) DO UPDATE SET
  sequence = EXCLUDED.sequence, type = EXCLUDED.type, started_at = EXCLUDED.started_at,
  ended_at = EXCLUDED.ended_at, duration_ms = EXCLUDED.duration_ms, status = EXCLUDED.status,
  payload = EXCLUDED.payload, payload_encrypted = EXCLUDED.payload_encrypted,
  parent_event_id = EXCLUDED.parent_event_id, error_message = EXCLUDED.error_message
WHERE events.agent_id = EXCLUDED.agent_id AND events.trace_id = EXCLUDED.trace_id
RETURNING id`;

function traceParams(t) {
  return [
    t.id,
    t.agentId,
    t.status,
    t.startedAt,
    t.endedAt,
    t.durationMs,
    t.inputSummary,
    t.outputSummary,
    t.errorMessage,
    t.tags,
    t.eventCount,
    t.totalTokens,
    t.totalCostUsd,
    t.totalLamports,
    t.chainTxCount,
    t.toolsCalled,
    null,
    null,
    null,
    null,
    null,
  ];
}

function eventParams(agentId, events) {
  const columns = Array.from({ length: 12 }, () => new Array(events.length));
  events.forEach((e, i) => {
    const values = [
      e.id,
      e.traceId,
      e.sequence,
      e.type,
      e.startedAt,
      e.endedAt,
      e.durationMs,
      e.status,
      JSON.stringify(e.payload),
      e.payloadEncrypted,
      e.parentEventId,
      e.errorMessage,
    ];
    values.forEach((v, c) => (columns[c][i] = v));
  });
  return [agentId, ...columns];
}

/** The three statements of one batch, on one transaction handle (pg client or PGlite tx). */
async function writeBatchSql(tx, agentId, { batchId, item }) {
  const claimed = await tx.query(CLAIM_BATCH, [
    agentId,
    batchId,
    item.trace.id,
    1,
    item.events.length,
  ]);
  if (claimed.rows.length !== 1) throw new Error(`batch ${batchId} was not new`);
  const trace = await tx.query(UPSERT_TRACE, traceParams(item.trace));
  if (trace.rows.length !== 1) throw new Error(`trace ${item.trace.id} was not written`);
  const events = await tx.query(INSERT_EVENTS, eventParams(agentId, item.events));
  if (events.rows.length !== item.events.length) throw new Error('events were not all written');
}

async function openPostgresBaseline(schema) {
  const pool = new pg.Pool({
    connectionString: CFG.databaseUrl,
    max: CFG.poolSize,
    options: `-c TimeZone=UTC -c search_path="${schema}"`,
    application_name: 'flightlog-bench-baseline',
  });
  pool.on('error', () => {});
  return {
    pool,
    async write(agentId, batch) {
      const client = await pool.connect();
      let broken;
      try {
        await client.query('BEGIN');
        await writeBatchSql(client, agentId, batch);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch((e) => (broken = e));
        throw error;
      } finally {
        client.release(broken);
      }
    },
    query: (sql, params) => pool.query(sql, params),
    close: () => pool.end(),
  };
}

async function openPgliteBaseline(dataDir) {
  const db = await PGlite.create(dataDir);
  await db.exec(`SET TIME ZONE 'UTC'`);
  return {
    async write(agentId, batch) {
      await db.transaction((tx) => writeBatchSql(tx, agentId, batch));
    },
    query: (sql, params) => db.query(sql, params),
    close: () => (db.closed ? undefined : db.close()),
  };
}

async function countServerEvents(engine, serverEnv, agentId) {
  const sql = 'SELECT count(*)::int AS n FROM events WHERE agent_id = $1';
  if (engine === 'postgres') {
    const client = new pg.Client({
      connectionString: CFG.databaseUrl,
      options: `-c search_path="${serverEnv.DATABASE_SCHEMA}"`,
    });
    await client.connect();
    try {
      return (await client.query(sql, [agentId])).rows[0].n;
    } finally {
      await client.end();
    }
  }
  const db = await PGlite.create(serverEnv.DATA_DIR);
  try {
    return (await db.query(sql, [agentId])).rows[0].n;
  } finally {
    await db.close();
  }
}

async function runBaseline(baseline, agentId, items, seconds) {
  const latencies = [];
  let ok = 0;
  let errors = 0;
  let firstError;
  const start = performance.now();
  const deadline = start + seconds * 1000;
  const sender = async () => {
    while (performance.now() < deadline) {
      const batch = items.next();
      const t0 = performance.now();
      try {
        await baseline.write(agentId, batch);
        const t1 = performance.now();
        if (t1 <= deadline) {
          ok++;
          latencies.push(t1 - t0);
        }
      } catch (error) {
        errors++;
        firstError ??= error;
      }
    }
  };
  await Promise.all(Array.from({ length: CFG.connections }, sender));
  if (firstError) console.error(`!!! BASELINE WRITE FAILED (${errors}x): ${firstError.message}`);
  const stats = percentiles(latencies);
  return {
    batchesPerSec: ok / seconds,
    eventsPerSec: (ok * CFG.eventsPerBatch) / seconds,
    p50Ms: stats.p50,
    p99Ms: stats.p99,
    maxMs: stats.max,
    ok,
    errors,
    itemsBuiltDuringRun: items.madeDuringRun,
  };
}

// ---------------------------------------------------------------------------------------------
// One engine end to end.

const median = (values) => {
  const sorted = values.filter((v) => v !== null && v !== undefined).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

function summarise(runs) {
  return {
    batchesPerSec: median(runs.map((r) => r.batchesPerSec)),
    eventsPerSec: median(runs.map((r) => r.eventsPerSec)),
    p50Ms: median(runs.map((r) => r.p50Ms)),
    p99Ms: median(runs.map((r) => r.p99Ms)),
  };
}

function fmtRun(kind, r) {
  const bad = (r.non2xx ?? 0) + (r.errors ?? 0) + (r.timeouts ?? 0);
  return (
    `${kind.padEnd(8)} ${r.batchesPerSec.toFixed(1).padStart(8)} batches/s ` +
    `${Math.round(r.eventsPerSec).toString().padStart(7)} events/s  ` +
    `p50 ${fmtMs(r.p50Ms)}  p99 ${fmtMs(r.p99Ms)}` +
    (bad ? `  !!! ${bad} FAILED` : '')
  );
}
const fmtMs = (ms) =>
  ms === null || ms === undefined ? '   n/a' : `${ms.toFixed(1).padStart(6)} ms`;

function checkServiceRun(label, r) {
  const problems = [];
  if (r.non2xx > 0) problems.push(`${r.non2xx} non-2xx responses ${JSON.stringify(r.statusCodes)}`);
  if (r.errors > 0) problems.push(`${r.errors} connection errors`);
  if (r.timeouts > 0) problems.push(`${r.timeouts} timeouts`);
  if (r.serverDuplicates > 0)
    problems.push(`${r.serverDuplicates} batches answered as duplicates by the server`);
  if (r.serverAccepted !== undefined && r.serverAccepted < r.ok)
    problems.push(`server counted ${r.serverAccepted} accepted batches for ${r.ok} 2xx answers`);
  for (const p of problems) console.error(`  !!! WARNING ${label}: ${p}`);
  return problems;
}

async function benchEngine(engine) {
  const mark = cleanups.length;
  const result = { engine, rounds: [], warnings: [] };
  try {
    let serverEnv;
    let baseline;
    let baselineAgentId;
    if (engine === 'postgres') {
      const url = new URL(CFG.databaseUrl);
      const port = Number(url.port || 5432);
      if (!(await reachable(url.hostname, port))) {
        const reason = `PostgreSQL at ${url.hostname}:${port} is unreachable`;
        console.log(`\n${'!'.repeat(78)}\n!!! SKIPPING POSTGRESQL: ${reason}\n${'!'.repeat(78)}`);
        return { engine, skipped: reason };
      }
      const tag = randomBytes(4).toString('hex');
      const schema = `bench_${tag}`;
      const baseSchema = `bench_${tag}_base`;
      result.schemas = [schema, baseSchema];
      onCleanup(async () => {
        const client = new pg.Client({ connectionString: CFG.databaseUrl });
        await client.connect();
        try {
          for (const s of [schema, baseSchema])
            await client.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
        } finally {
          await client.end();
        }
      });
      serverEnv = { DATABASE_URL: CFG.databaseUrl, DATABASE_SCHEMA: schema };
      const { openStore } = await import('@flightlog/server');
      const store = await openStore({
        databaseUrl: CFG.databaseUrl,
        databaseSchema: baseSchema,
        poolSize: 1,
      });
      await store.close();
      baseline = await openPostgresBaseline(baseSchema);
    } else if (engine === 'pglite') {
      const serverDir = mkdtempSync(join(os.tmpdir(), 'flightlog-bench-server-'));
      const baseDir = mkdtempSync(join(os.tmpdir(), 'flightlog-bench-base-'));
      onCleanup(() => {
        rmSync(serverDir, { recursive: true, force: true });
        rmSync(baseDir, { recursive: true, force: true });
      });
      serverEnv = { DATA_DIR: serverDir };
      const { openStore } = await import('@flightlog/server');
      const store = await openStore({ dataDir: baseDir });
      await store.close();
      baseline = await openPgliteBaseline(baseDir);
    } else {
      throw new Error(`unknown engine "${engine}"`);
    }
    onCleanup(() => baseline.close());
    baselineAgentId = `bench-baseline-${ulid()}`;
    await baseline.query('INSERT INTO agents (id, name) VALUES ($1, $2)', [
      baselineAgentId,
      'bench baseline',
    ]);

    result.loadAvgBefore = os.loadavg().map((x) => Math.round(x * 100) / 100);
    console.log(`\n== ${engine}: starting server (load average ${result.loadAvgBefore.join(' ')})`);
    const t0 = performance.now();
    const server = await startServer(serverEnv);
    result.serverStartMs = Math.round(performance.now() - t0);
    const { agentId, apiKey } = await createAgent(server);

    const bodies = new OneShotPool(() => makeBody(agentId));
    const items = new OneShotPool(() => ({ batchId: ulid(), item: makeItem(baselineAgentId) }));
    let serviceEstimate = 400;
    let baselineEstimate = 400;
    const poolFor = (rate, seconds) => Math.ceil(rate * seconds * 1.3) + 4 * CFG.connections;
    const ensureAlive = () => {
      if (!server.alive())
        throw new Error(`server died during the run:\n${server.output.lines.join('\n')}`);
    };

    const service = async (seconds, label) => {
      bodies.fill(poolFor(serviceEstimate, seconds));
      const r = await runAutocannon(server, apiKey, bodies, seconds);
      bodies.drain();
      ensureAlive();
      serviceEstimate = Math.max(serviceEstimate, r.batchesPerSec);
      result.warnings.push(...checkServiceRun(`${engine} ${label}`, r));
      return r;
    };
    const base = async (seconds) => {
      items.fill(poolFor(baselineEstimate, seconds));
      const r = await runBaseline(baseline, baselineAgentId, items, seconds);
      items.drain();
      baselineEstimate = Math.max(baselineEstimate, r.batchesPerSec);
      if (r.errors > 0) result.warnings.push(`baseline: ${r.errors} failed writes`);
      return r;
    };

    if (CFG.warmupSeconds > 0) {
      const ws = await service(CFG.warmupSeconds, 'warm-up');
      const wb = await base(CFG.warmupSeconds);
      console.log(`   warm-up  ${fmtRun('service', ws)}`);
      console.log(`   warm-up  ${fmtRun('baseline', wb)}`);
    }
    for (let round = 1; round <= CFG.rounds; round++) {
      const s = await service(CFG.seconds, `round ${round}`);
      console.log(`   round ${round}  ${fmtRun('service', s)}`);
      const b = await base(CFG.seconds);
      console.log(`   round ${round}  ${fmtRun('baseline', b)}`);
      result.rounds.push({ round, service: s, baseline: b });
    }
    result.median = {
      service: summarise(result.rounds.map((r) => r.service)),
      baseline: summarise(result.rounds.map((r) => r.baseline)),
    };
    result.ratio = result.median.service.batchesPerSec / result.median.baseline.batchesPerSec;
    result.meetsRatioTarget = result.ratio >= CFG.targetRatio;

    const half = Math.max(1, Math.round(result.median.service.batchesPerSec / 2));
    bodies.fill(poolFor(half, CFG.seconds));
    const ac = await runAutocannon(server, apiKey, bodies, CFG.seconds, half);
    bodies.drain();
    ensureAlive();
    result.warnings.push(...checkServiceRun(`${engine} half-rate autocannon`, ac));
    console.log(`   half-rate ${half}/s autocannon  ${fmtRun('service', ac)}`);
    bodies.fill(poolFor(half, CFG.seconds));
    const paced = await runPaced(server, apiKey, bodies, CFG.seconds, half);
    bodies.drain();
    ensureAlive();
    if (paced.non2xx + paced.errors > 0) {
      const w = `${engine} half-rate paced: ${paced.non2xx} non-2xx, ${paced.errors} errors`;
      console.error(`  !!! WARNING ${w}`);
      result.warnings.push(w);
    }
    console.log(`   half-rate ${half}/s paced       ${fmtRun('service', paced)}`);
    result.halfRate = {
      rate: half,
      autocannon: { ...ac, targetRate: half },
      paced,
      meetsP99Target: {
        autocannon: ac.p99Ms !== null && ac.p99Ms < CFG.targetP99Ms,
        paced: paced.p99Ms !== null && paced.p99Ms < CFG.targetP99Ms,
      },
    };

    result.loadAvgAfter = os.loadavg().map((x) => Math.round(x * 100) / 100);
    const end = await scrapeMetrics(server);
    result.serverRssBytes = end.rssBytes ?? null;
    result.serverAcceptedTotal = end.accepted;
    result.serverDuplicatesTotal = end.duplicate;
    const exit = await server.stop();
    result.serverOutputLines = server.output.count;
    result.serverExit = exit;
    if (exit.code !== 0) {
      const w = `server exited with code ${exit.code} signal ${exit.signal} on SIGTERM`;
      console.error(`  !!! WARNING ${engine}: ${w}`);
      result.warnings.push(w);
    }
    if (server.output.count > 0) result.serverOutputTail = server.output.lines.slice(-10);
    const [{ n: storedBaseline }] = (
      await baseline.query('SELECT count(*)::int AS n FROM events WHERE agent_id = $1', [
        baselineAgentId,
      ])
    ).rows;
    result.baselineEventsStored = storedBaseline;
    // What the server says it accepted must be in its tables (read once the server is stopped).
    result.serverEventsStored = await countServerEvents(engine, serverEnv, agentId);
    if (result.serverEventsStored !== end.accepted * CFG.eventsPerBatch) {
      const w = `server stored ${result.serverEventsStored} events for ${end.accepted} accepted batches`;
      console.error(`  !!! WARNING ${engine}: ${w}`);
      result.warnings.push(w);
    }
    return result;
  } catch (error) {
    console.error(`\n!!! ${engine.toUpperCase()} BENCHMARK FAILED: ${error?.stack ?? error}`);
    return { ...result, error: String(error?.message ?? error) };
  } finally {
    await runCleanupsFrom(mark);
  }
}

// ---------------------------------------------------------------------------------------------
// Report.

function table(rows) {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => String(r[c]).length)));
  return rows
    .map((r, i) => {
      const line = r
        .map((cell, c) =>
          c < 2 ? String(cell).padEnd(widths[c]) : String(cell).padStart(widths[c]),
        )
        .join('  ');
      return i === 0 ? `${line}\n${widths.map((w) => '-'.repeat(w)).join('  ')}` : line;
    })
    .join('\n');
}

function report(results, meta) {
  const n = (x, digits = 1) => (x === null || x === undefined ? 'n/a' : x.toFixed(digits));
  const rows = [['engine', 'run', 'batches/s', 'events/s', 'p50 ms', 'p99 ms', 'non-2xx/err']];
  const notes = [];
  for (const r of results) {
    if (r.skipped) {
      notes.push(`${r.engine}: SKIPPED (${r.skipped})`);
      continue;
    }
    if (r.error && !r.median) {
      notes.push(`${r.engine}: FAILED (${r.error})`);
      continue;
    }
    const row = (label, x, bad) =>
      rows.push([
        r.engine,
        label,
        n(x.batchesPerSec),
        n(x.eventsPerSec, 0),
        n(x.p50Ms),
        n(x.p99Ms),
        bad,
      ]);
    for (const { round, service, baseline } of r.rounds) {
      row(`service  round ${round}`, service, service.non2xx + service.errors + service.timeouts);
      row(`baseline round ${round}`, baseline, baseline.errors);
    }
    row('service  MEDIAN', r.median.service, '');
    row('baseline MEDIAN', r.median.baseline, '');
    if (r.halfRate) {
      const { autocannon: ac, paced, rate } = r.halfRate;
      row(`half rate ${rate}/s autocannon`, ac, ac.non2xx + ac.errors + ac.timeouts);
      row(`half rate ${rate}/s paced`, paced, paced.non2xx + paced.errors);
    }
    notes.push(
      `${r.engine}: service/baseline throughput = ${n(r.ratio, 2)} (target >= ${CFG.targetRatio}: ${r.meetsRatioTarget ? 'met' : 'NOT MET'})`,
    );
    if (r.halfRate)
      notes.push(
        `${r.engine}: half-rate p99 = ${n(r.halfRate.autocannon.p99Ms)} ms autocannon, ${n(r.halfRate.paced.p99Ms)} ms paced (target < ${CFG.targetP99Ms} ms: ${r.halfRate.meetsP99Target.autocannon ? 'met' : 'NOT MET'} / ${r.halfRate.meetsP99Target.paced ? 'met' : 'NOT MET'})`,
      );
    notes.push(
      `${r.engine}: server RSS at end ${r.serverRssBytes ? `${(r.serverRssBytes / 2 ** 20).toFixed(0)} MiB` : 'n/a'}; ` +
        `server accepted ${r.serverAcceptedTotal} batches (${r.serverDuplicatesTotal} duplicates), ` +
        `stored ${r.serverEventsStored} events; baseline stored ${r.baselineEventsStored} events`,
    );
    if (r.error) notes.push(`${r.engine}: FAILED after the rounds (${r.error})`);
    for (const w of r.warnings ?? []) notes.push(`${r.engine}: !!! ${w}`);
  }
  console.log(
    `\nFlightlog ingest benchmark — ${meta.date}, node ${meta.node}, ${meta.cpuModel} x ${meta.cores}\n` +
      `${CFG.rounds} rounds x ${CFG.seconds} s per side, ${CFG.connections} concurrent senders, ` +
      `1 trace + ${CFG.eventsPerBatch} llm_call events per batch ` +
      `(~${meta.bodyJsonBytes} B JSON, ~${meta.bodyGzipBytes} B gzip)\n`,
  );
  console.log(rows.length > 1 ? table(rows) : '(no engine measured)');
  console.log(`\n${notes.join('\n')}`);
  console.log(
    "\nhalf rate: autocannon overallRate sends each connection's per-second quota back to back at\n" +
      'the start of every second (bursts); "paced" spaces requests evenly and counts latency from\n' +
      "each request's scheduled time.",
  );
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const sample = Array.from({ length: 50 }, () => makeBody('01JBENCHAGENT0000000000000'));
  const meta = {
    date: new Date().toISOString(),
    node: process.version,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    cpuModel: os.cpus()[0]?.model?.trim() ?? 'unknown',
    cores: os.availableParallelism?.() ?? os.cpus().length,
    memoryBytes: os.totalmem(),
    bodyJsonBytes: Math.round(sample.reduce((s, b) => s + b.json, 0) / sample.length),
    bodyGzipBytes: Math.round(sample.reduce((s, b) => s + b.gz.length, 0) / sample.length),
  };
  try {
    meta.gitCommit = execFileSync('git', ['rev-parse', 'HEAD'], {
      cwd: ROOT,
      encoding: 'utf8',
    }).trim();
  } catch {
    meta.gitCommit = null;
  }
  console.log(
    `Flightlog ingest benchmark: engines ${CFG.engines.join(', ')}; ${CFG.rounds} rounds x ` +
      `${CFG.seconds} s per side (+ ${CFG.warmupSeconds} s warm-up); bodies ~${meta.bodyJsonBytes} B ` +
      `JSON / ~${meta.bodyGzipBytes} B gzip`,
  );
  const started = performance.now();
  const results = [];
  for (const engine of CFG.engines) results.push(await benchEngine(engine));
  meta.totalSeconds = Math.round((performance.now() - started) / 100) / 10;

  report(results, meta);
  mkdirSync(RESULTS_DIR, { recursive: true });
  const output = {
    ...meta,
    config: {
      seconds: CFG.seconds,
      rounds: CFG.rounds,
      warmupSeconds: CFG.warmupSeconds,
      connections: CFG.connections,
      poolSize: CFG.poolSize,
      eventsPerBatch: CFG.eventsPerBatch,
      targetRatio: CFG.targetRatio,
      targetP99Ms: CFG.targetP99Ms,
      databaseUrl: CFG.databaseUrl.replace(/\/\/[^@/]*@/, '//***@'),
    },
    engines: Object.fromEntries(results.map((r) => [r.engine, r])),
  };
  const json = JSON.stringify(
    output,
    (_key, value) =>
      typeof value === 'number' && !Number.isInteger(value)
        ? Math.round(value * 1000) / 1000
        : value,
    2,
  );
  writeFileSync(`${RESULTS_FILE}.tmp`, `${json}\n`);
  renameSync(`${RESULTS_FILE}.tmp`, RESULTS_FILE);
  console.log(`\nwrote ${RESULTS_FILE} (total ${meta.totalSeconds} s)`);
}

try {
  await main();
  await runCleanups();
  process.exit(0);
} catch (error) {
  console.error(`\n!!! BENCHMARK FAILED: ${error?.stack ?? error}`);
  await runCleanups();
  process.exit(1);
}
