// Analysis benchmark: how fast stand-alone `flightlog worker` processes turn finished runs into
// autopsies through the queue, next to a baseline measured in the same run, and how long a user
// waits from finalising a run to reading its autopsy.
//
// On PostgreSQL (BENCH_DATABASE_URL; a fresh DATABASE_SCHEMA, dropped afterwards; the benchmark
// stops loudly when PostgreSQL is unreachable) it starts the built server as a child process
// with ANALYSIS_WORKER=off, creates an agent and stores BENCH_JOBS (300) finished runs of
// BENCH_EVENTS (50) events each (model calls, with every fifth a tool call of one tool with one
// input and every tenth a chain transaction, so that every part of the heuristic analysis
// works), which queues one analysis job each. Then, BENCH_ROUNDS (3) times, interleaved:
//
//   baseline   the heuristic analyzer run in this process directly over the same stored runs,
//              one after the other: read trace + events (the worker's own query), analyse, write
//              the autopsy into the job row. No queue: no claim, no lease, no fencing.
//   1 worker   every job reset to pending (runnable in a day), one `flightlog worker` process
//              started and waited for, then every job released at once; jobs/s =
//              jobs / (last finished_at - first started_at), from the database's clock.
//   2 workers  the same with two worker processes sharing the queue.
//
// Each side prints the median over the rounds and its ratio to the baseline's median. Every job
// must end done exactly once per measurement (attempts = 1); anything else is printed loudly.
//
// Delay: the server restarted with its in-process worker (ANALYSIS_WORKER=on,
// ANALYSIS_GRACE_MS=0); BENCH_DELAY_SAMPLES (100) times, one after the other: a running trace of
// BENCH_EVENTS events stored with POST /v1/traces/batch, then the time from sending POST
// /v1/traces/:id/complete to GET /v1/traces/:id/analysis answering `done` (polled every 5 ms).
// Median and p99 (target: median under 1 s). Measured twice: with the worker inside the server
// (woken by the finalising request), and with the server's worker off and one stand-alone worker
// process, which learns of new jobs only by polling (ANALYSIS_POLL_MS, default 500).
//
// The labelled set (packages/server/test/analysis/labelled-runs/, 61 runs of every shape, four of
// 10,000 events; first, in this process, needing no database): the score of the heuristic
// analyzer and of the LLM analyzer with the recorded answers (a local endpoint replays them),
// each case's top checked as the test checks it; then BENCH_LABELLED_ROUNDS (7) rounds of the
// heuristic analyzer over every case, the time per analysis (median per case); for the 10,000-
// event runs, interleaved with a baseline on the same run: one JSON round trip of it
// (JSON.parse(JSON.stringify(run)), the floor of touching every byte once), the ratio, and the
// heap (garbage collected before; used just after, and retained once collected again with the
// autopsy kept). Target: under 200 ms for a 10,000-event run. BENCH_LABELLED_ONLY=1 stops there.
//
// It is a benchmark, not a test: nothing is asserted. Bounded: BENCH_TIMEOUT_SECONDS (300)
// aborts the run; servers, workers and the schema are released on every exit path. Figures are
// printed and written to bench/results/analysis-latest.json.
//
// Env: BENCH_JOBS (300), BENCH_EVENTS (50), BENCH_ROUNDS (3), BENCH_DELAY_SAMPLES (100),
//      BENCH_TIMEOUT_SECONDS (300), BENCH_DATABASE_URL (postgres://postgres@127.0.0.1:5432/test),
//      BENCH_LABELLED_ROUNDS (7), BENCH_LABELLED_ONLY (off)

import { randomBytes } from 'node:crypto';
import v8 from 'node:v8';
import vm from 'node:vm';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import pg from 'pg';
import { monotonicFactory } from 'ulidx';
import { loadLabelledSet, recordedAnswers, startAnsweringEndpoint } from './labelled-set.mjs';
import {
  createItemFactory,
  createLifecycle,
  envNumber,
  percentiles,
  reachable,
  request,
  spawnCli,
  startFlightlogServer,
} from './support.mjs';

const ulid = monotonicFactory();
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SERVER_DIST = join(ROOT, 'packages/server/dist');
const CLI = join(SERVER_DIST, 'cli.js');
const RESULTS_DIR = join(ROOT, 'bench/results');
const RESULTS_FILE = join(RESULTS_DIR, 'analysis-latest.json');

const CFG = {
  jobs: Math.round(envNumber('BENCH_JOBS', 300, 10, 100_000)),
  events: Math.round(envNumber('BENCH_EVENTS', 50, 1, 10_000)),
  rounds: Math.round(envNumber('BENCH_ROUNDS', 3, 1, 20)),
  delaySamples: Math.round(envNumber('BENCH_DELAY_SAMPLES', 100, 5, 10_000)),
  timeoutSeconds: envNumber('BENCH_TIMEOUT_SECONDS', 300, 30, 3600),
  databaseUrl: process.env.BENCH_DATABASE_URL?.trim() || 'postgres://postgres@127.0.0.1:5432/test',
  targetDelayMs: 1_000,
  labelledRounds: Math.round(envNumber('BENCH_LABELLED_ROUNDS', 7, 1, 100)),
  labelledOnly: /** @type {(string | undefined)[]} */ (['1', 'true', 'yes']).includes(
    process.env.BENCH_LABELLED_ONLY?.trim().toLowerCase(),
  ),
  targetLargeMs: 200,
};

const lifecycle = createLifecycle({ timeoutSeconds: CFG.timeoutSeconds });
const median = (/** @type {Iterable<number>} */ values) => percentiles(values).p50;

// ---------------------------------------------------------------------------------------------
// Runs: the ingest benchmark's traces, finished, with tool calls and chain transactions mixed in.

const makeItem = createItemFactory({ ulid, eventsPerBatch: CFG.events });

/** @typedef {import('./support.mjs').ServerHandle} ServerHandle */
/** @typedef {import('../packages/server/dist/analysis/analyzer.js').StoredRun} StoredRun */

/**
 * @param {string} agentId
 * @param {import('@flightlog/protocol').TraceStatus} status
 * @returns {import('@flightlog/protocol').BufferBatchItem}
 */
function finishedItem(agentId, status) {
  const item = makeItem(agentId);
  let lamports = 0n;
  let chainTxs = 0;
  for (const event of item.events) {
    if (event.sequence % 10 === 9) {
      chainTxs++;
      lamports += 1_000_000n;
      event.type = 'chain_tx';
      event.payload = {
        signature: randomBytes(32).toString('hex'),
        lamports: '1000000',
        network: 'devnet',
        instruction: 'transfer',
        feeLamports: '5000',
        confirmation: event.sequence % 20 === 19 ? 'failed' : 'finalized',
      };
      if (event.payload.confirmation === 'failed') {
        event.status = 'error';
        event.errorMessage = 'Transaction simulation failed: blockhash not found';
      }
    } else if (event.sequence % 5 === 4) {
      event.type = 'tool_call';
      event.payload = {
        name: 'dex.getPrice',
        input: { pair: 'SOL/USDC' },
        output: { price: '148.2' },
      };
    }
  }
  const last = item.events.at(-1);
  Object.assign(item.trace, {
    status,
    endedAt: last ? last.endedAt : item.trace.startedAt,
    // makeItem's events have ended
    durationMs: last
      ? Date.parse(/** @type {string} */ (last.endedAt)) - Date.parse(item.trace.startedAt)
      : 0,
    outputSummary: status === 'completed' ? 'Done.' : null,
    errorMessage: status === 'errored' ? 'The run failed.' : null,
    totalLamports: String(lamports),
    chainTxCount: chainTxs,
    toolsCalled: ['dex.getPrice'],
  });
  return item;
}

/**
 * POSTs `body` gzipped (none when undefined) with the agent's API key; the answer's text.
 * @param {ServerHandle} server
 * @param {string} path
 * @param {string} apiKey
 * @param {unknown} body
 * @returns {Promise<string>}
 */
async function postJson(server, path, apiKey, body) {
  const { status, text } = await request('POST', `${server.base}${path}`, {
    headers: {
      authorization: `Bearer ${apiKey}`,
      'content-type': 'application/json',
      ...(body === undefined ? {} : { 'content-encoding': 'gzip' }),
    },
    body: body === undefined ? undefined : gzipSync(JSON.stringify(body)),
  });
  if (status >= 300) throw new Error(`POST ${path} answered ${status}: ${text}`);
  return text;
}

/**
 * An admin API call; its answer's JSON (undefined when empty).
 * @param {ServerHandle} server
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body]
 * @returns {Promise<unknown>}
 */
async function admin(server, method, path, body) {
  const { status, text } = await request(method, `${server.base}${path}`, {
    headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (status >= 300) throw new Error(`${method} ${path} answered ${status}: ${text}`);
  return text ? JSON.parse(text) : undefined;
}

// ---------------------------------------------------------------------------------------------
// Measurements.

const RESET_JOBS = `
UPDATE analysis_jobs
SET state = 'pending', attempts = 0, run_after = now() + interval '1 day', locked_until = NULL,
    started_at = NULL, finished_at = NULL, worker_id = NULL, autopsy = NULL, analyzer = NULL,
    fallback_reason = NULL, last_error = NULL`;

const JOB_SUMMARY = `
SELECT count(*) FILTER (WHERE state = 'done')::int AS done,
       count(*) FILTER (WHERE state = 'done' AND attempts = 1)::int AS "doneOnce",
       count(*)::int AS total,
       count(DISTINCT worker_id)::int AS workers,
       EXTRACT(EPOCH FROM max(finished_at) - min(started_at))::float8 AS seconds
FROM analysis_jobs`;

/**
 * JOB_SUMMARY's row; `seconds` is null when no job has finished (`done` is then 0).
 * @typedef {{ done: number, doneOnce: number, total: number, workers: number,
 *   seconds: number | null }} JobSummary
 */

/**
 * One round of a side: jobs/s, from the database's clock for the workers; the workers' side also
 * has its wall-clock rate and what went wrong.
 * @typedef {object} QueueRound
 * @property {number} jobsPerSec
 * @property {number} done
 * @property {number} [wallJobsPerSec]
 * @property {string[]} [anomalies]
 */

/**
 * @param {import('pg').Client} db
 * @param {Record<string, string>} workerEnv
 * @param {number} count worker processes
 * @returns {Promise<QueueRound>}
 */
async function measureWorkers(db, workerEnv, count) {
  await db.query(RESET_JOBS);
  const workers = [];
  for (let i = 0; i < count; i++) {
    const worker = spawnCli(lifecycle, {
      cli: CLI,
      cwd: ROOT,
      args: ['worker'],
      tag: `worker ${i + 1}`,
      env: { ...workerEnv, LOG_LEVEL: 'info' },
    });
    await worker.waitFor(/"msg":"analysis worker started"/);
    workers.push(worker);
  }
  const released = performance.now();
  await db.query("UPDATE analysis_jobs SET run_after = now() WHERE state = 'pending'");
  /** @type {JobSummary} */
  let summary;
  const deadline = Date.now() + 120_000;
  for (;;) {
    summary = /** @type {JobSummary} */ ((await db.query(JOB_SUMMARY)).rows[0]);
    if (summary.done === summary.total) break;
    if (Date.now() > deadline) break;
    await sleep(20);
  }
  const wallSeconds = (performance.now() - released) / 1000;
  await Promise.all(workers.map((w) => w.stop()));
  /** @type {string[]} */
  const anomalies = [];
  if (summary.done !== summary.total)
    anomalies.push(`${summary.total - summary.done} of ${summary.total} jobs not done`);
  if (summary.doneOnce !== summary.done)
    anomalies.push(`${summary.done - summary.doneOnce} jobs took more than one attempt`);
  if (summary.workers !== count) anomalies.push(`${summary.workers} of ${count} workers took part`);
  for (const a of anomalies) console.error(`    !!! ${count} worker(s): ${a}`);
  return {
    // null seconds: none done, and 0 / null is NaN as 0 / 0
    jobsPerSec: summary.done / /** @type {number} */ (summary.seconds),
    wallJobsPerSec: summary.done / wallSeconds,
    done: summary.done,
    anomalies,
  };
}

/** @typedef {{ id: string, traceId: string }} QueuedJob a row of analysis_jobs (id: bigserial) */
/**
 * @typedef {typeof import('../packages/server/dist/analysis/heuristic-analyzer.js')}
 *   HeuristicModule
 */

/**
 * @param {import('@flightlog/server').Store} store
 * @param {InstanceType<HeuristicModule['HeuristicAnalyzer']>} analyzer
 * @param {QueuedJob[]} jobs
 * @returns {Promise<QueueRound>}
 */
async function measureBaseline(store, analyzer, jobs) {
  const started = performance.now();
  for (const job of jobs) {
    // Without loadRun's maxBytes (undefined: no byte budget; the worker passes its
    // maxEventBytes), and every job's trace exists.
    const run = await /** @type {(traceId: string, maxEvents: number) => Promise<StoredRun>} */ (
      store.analysis.loadRun
    )(job.traceId, 20_000);
    const result = analyzer.analyzeNow(run);
    await store.sql.query(
      `UPDATE analysis_jobs SET state = 'done', autopsy = $2, analyzer = $3, finished_at = now()
       WHERE id = $1`,
      [job.id, result.autopsy, result.analyzer],
    );
  }
  return { jobsPerSec: jobs.length / ((performance.now() - started) / 1000), done: jobs.length };
}

/**
 * Milliseconds from POST /complete to a readable autopsy; null without a sample.
 * @typedef {{ medianMs: number | null, p99Ms: number | null, maxMs: number | null,
 *   samples: number, failures: number }} DelayResult
 */

/**
 * @param {ServerHandle} server
 * @param {string} apiKey
 * @param {string} agentId
 * @param {string} token a viewer's identity token, to read the analysis
 * @param {string} label
 * @returns {Promise<DelayResult>}
 */
async function measureDelay(server, apiKey, agentId, token, label) {
  /** @type {number[]} */
  const delays = [];
  let failures = 0;
  for (let i = 0; i < CFG.delaySamples; i++) {
    const item = finishedItem(agentId, 'running');
    Object.assign(item.trace, { status: 'running', endedAt: null, durationMs: null });
    await postJson(server, '/v1/traces/batch', apiKey, { batchId: ulid(), items: [item] });
    const sent = performance.now();
    await postJson(server, `/v1/traces/${item.trace.id}/complete`, apiKey, undefined);
    for (;;) {
      const { status, text } = await request(
        'GET',
        `${server.base}/v1/traces/${item.trace.id}/analysis`,
        { headers: { authorization: `Bearer ${token}` } },
      );
      const body =
        status === 200 ? /** @type {{ status: string }} */ (JSON.parse(text)) : undefined;
      if (body?.status === 'done') {
        delays.push(performance.now() - sent);
        break;
      }
      if (body?.status === 'failed' || performance.now() - sent > 30_000) {
        failures++;
        break;
      }
      await sleep(5);
    }
  }
  if (failures > 0) console.error(`    !!! ${label}: ${failures} runs not analysed within 30 s`);
  const stats = percentiles(delays);
  console.log(
    `  delay, ${label}: median ${stats.p50?.toFixed(1)} ms, p99 ${stats.p99?.toFixed(1)} ms (n=${delays.length})`,
  );
  return {
    medianMs: stats.p50,
    p99Ms: stats.p99,
    maxMs: stats.max,
    samples: delays.length,
    failures,
  };
}

// ---------------------------------------------------------------------------------------------
// The labelled set: score, and time per analysis.

v8.setFlagsFromString('--expose-gc');
const collectGarbage = /** @type {() => void} */ (vm.runInNewContext('gc'));
const MB = 1024 * 1024;
const signedMb = (/** @type {number} */ bytes) =>
  `${bytes < 0 ? '−' : '+'}${(Math.abs(bytes) / MB).toFixed(2)} MB`;

/** @typedef {{ right: number, total: number, misses: string[] }} ScoreSummary */

/**
 * A 10,000-event run of the set: the heuristic analyzer's time beside the JSON round trip of
 * the run, and the heap it takes.
 * @typedef {object} LargeRunResult
 * @property {string} id
 * @property {number} events
 * @property {number} medianMs
 * @property {number} baselineMs
 * @property {number} ratio
 * @property {number} heapJustAfterBytes
 * @property {number} heapRetainedBytes
 * @property {number} autopsyBytes
 */

/**
 * @typedef {object} LabelledResult
 * @property {number} runs
 * @property {ScoreSummary} heuristic
 * @property {ScoreSummary} llm
 * @property {{ rounds: number, medianMs: number, maxMs: number }} timing
 * @property {LargeRunResult[]} large
 * @property {number} targetLargeMs
 */

/** @returns {Promise<LabelledResult>} */
async function measureLabelledSet() {
  const set = await loadLabelledSet();
  const { HeuristicAnalyzer } = /** @type {HeuristicModule} */ (
    await import(join(SERVER_DIST, 'analysis/heuristic-analyzer.js'))
  );
  const { LlmAnalyzer } =
    /** @type {typeof import('../packages/server/dist/analysis/llm-analyzer.js')} */ (
      await import(join(SERVER_DIST, 'analysis/llm-analyzer.js'))
    );
  const cases = set.LABELLED_RUNS.map((c) => ({
    c,
    run: c.run(),
    analyzer: new HeuristicAnalyzer(c.masterKey),
  }));

  const heuristic = cases.map(({ c, run, analyzer }) =>
    set.scoreAutopsy(c, analyzer.analyzeNow(run).autopsy),
  );
  const answers = recordedAnswers();
  let answer = '';
  const endpoint = await startAnsweringEndpoint(() => answer);
  /** @type {import('./labelled-set.mjs').CaseScore[]} */
  const llm = [];
  try {
    for (const { c, run, analyzer } of cases) {
      answer = answers[c.id] ?? '';
      const result = await new LlmAnalyzer({
        endpoint: {
          baseUrl: endpoint.baseUrl,
          model: 'recorded',
          apiKey: undefined,
          timeoutMs: 10_000,
        },
        fallback: analyzer,
        masterKey: c.masterKey,
      }).analyze(run, new globalThis.AbortController().signal);
      const score = set.scoreAutopsy(c, result.autopsy);
      llm.push(
        result.analyzer === 'llm:recorded'
          ? score
          : { ...score, ok: false, missing: ['(fell back)'] },
      );
    }
  } finally {
    await endpoint.close();
  }
  /** @returns {ScoreSummary} */
  const summary = (/** @type {import('./labelled-set.mjs').CaseScore[]} */ scores) => ({
    right: scores.filter((s) => s.ok).length,
    total: scores.length,
    misses: scores.filter((s) => !s.ok).map((s) => s.id),
  });

  // time per analysis: every case once a round; the large ones beside their baseline
  /** @type {Map<string, number[]>} */
  const times = new Map(cases.map(({ c }) => [c.id, []]));
  const large = cases.filter(({ run }) => run.events.length >= set.LARGE_RUN_EVENTS);
  /** @type {Map<string, number[]>} */
  const baselines = new Map(large.map(({ c }) => [c.id, []]));
  for (const { run, analyzer } of cases) analyzer.analyzeNow(run); // warm-up
  for (let round = 0; round < CFG.labelledRounds; round++)
    for (const { c, run, analyzer } of cases) {
      if (baselines.has(c.id)) {
        const started = performance.now();
        JSON.parse(JSON.stringify(run));
        /** @type {number[]} */ (baselines.get(c.id)).push(performance.now() - started);
      }
      const started = performance.now();
      analyzer.analyzeNow(run);
      /** @type {number[]} */ (times.get(c.id)).push(performance.now() - started);
    }
  // every case ran CFG.labelledRounds (≥ 1) times: each has a median
  const perCase = /** @type {number[]} */ ([...times.values()].map(median));
  const heapUsed = () => {
    // twice: a full collection can leave what the first one finalised
    collectGarbage();
    collectGarbage();
    return process.memoryUsage().heapUsed;
  };
  const largeRuns = large.map(({ c, run, analyzer }) => {
    /** @type {number[]} */
    const justAfter = [];
    /** @type {number[]} */
    const retained = [];
    let autopsyBytes = 0;
    for (let i = 0; i < 3; i++) {
      const before = heapUsed();
      const result = analyzer.analyzeNow(run);
      justAfter.push(process.memoryUsage().heapUsed - before);
      retained.push(heapUsed() - before);
      autopsyBytes = Buffer.byteLength(result.autopsy); // keeps the result alive until here
    }
    // a large case has its times and baselines, CFG.labelledRounds of each
    const ms = /** @type {number} */ (median(/** @type {number[]} */ (times.get(c.id))));
    const baselineMs = /** @type {number} */ (
      median(/** @type {number[]} */ (baselines.get(c.id)))
    );
    return {
      id: c.id,
      events: run.events.length,
      medianMs: ms,
      baselineMs,
      ratio: ms / baselineMs,
      // three samples each
      heapJustAfterBytes: /** @type {number} */ (median(justAfter)),
      heapRetainedBytes: /** @type {number} */ (median(retained)),
      autopsyBytes,
    };
  });
  /** @type {LabelledResult} */
  const out = {
    runs: cases.length,
    heuristic: summary(heuristic),
    llm: summary(llm),
    timing: {
      rounds: CFG.labelledRounds,
      medianMs: /** @type {number} */ (median(perCase)), // the set is not empty
      maxMs: Math.max(...perCase),
    },
    large: largeRuns,
    targetLargeMs: CFG.targetLargeMs,
  };

  console.log(`Labelled set: ${out.runs} runs`);
  for (const [name, s] of /** @type {[string, ScoreSummary][]} */ ([
    ['heuristic analyzer', out.heuristic],
    ['LLM analyzer (recorded answers)', out.llm],
  ]))
    console.log(
      `  ${name}: ${s.right} of ${s.total} right${s.misses.length ? ` (missed: ${s.misses.join(', ')})` : ''}`,
    );
  console.log(
    `  time per analysis (heuristic, median of ${CFG.labelledRounds} rounds per case): ` +
      `median ${out.timing.medianMs.toFixed(2)} ms, slowest case ${out.timing.maxMs.toFixed(1)} ms`,
  );
  for (const r of largeRuns)
    console.log(
      `  ${r.id} (${r.events.toLocaleString('en-US')} events): ${r.medianMs.toFixed(1)} ms ` +
        `(JSON round trip of the run ${r.baselineMs.toFixed(1)} ms, ratio ${r.ratio.toFixed(2)}) ` +
        `${r.medianMs < CFG.targetLargeMs ? '(met)' : '(MISSED)'}; heap ${signedMb(r.heapJustAfterBytes)} ` +
        `just after, ${signedMb(r.heapRetainedBytes)} retained (the autopsy ${r.autopsyBytes} bytes)`,
    );
  console.log('');
  return out;
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const labelled = await measureLabelledSet();
  if (CFG.labelledOnly) {
    report(null, null, labelled);
    return;
  }
  const { hostname, port } = new URL(CFG.databaseUrl);
  if (!(await reachable(hostname, Number(port || 5432)))) {
    console.error(`!!! PostgreSQL is unreachable at ${CFG.databaseUrl}: nothing measured.`);
    process.exitCode = 1;
    return;
  }
  // the server's own code, for the baseline and for identity tokens
  const { openStore, mintDevToken } = /** @type {typeof import('@flightlog/server')} */ (
    await import(join(SERVER_DIST, 'index.js'))
  );
  const { HeuristicAnalyzer } = /** @type {HeuristicModule} */ (
    await import(join(SERVER_DIST, 'analysis/heuristic-analyzer.js'))
  );

  const schema = `bench_analysis_${randomBytes(4).toString('hex')}`;
  const db = new pg.Client({
    connectionString: CFG.databaseUrl,
    options: `-c search_path=${schema}`,
  });
  await db.connect();
  lifecycle.onCleanup(async () => {
    await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await db.end();
  });
  const storeEnv = { DATABASE_URL: CFG.databaseUrl, DATABASE_SCHEMA: schema };

  console.log(`Analysis benchmark on PostgreSQL, schema ${schema}`);
  let server = await startFlightlogServer(lifecycle, {
    cli: CLI,
    cwd: ROOT,
    env: { ...storeEnv, ANALYSIS_WORKER: 'off', ANALYSIS_GRACE_MS: '0' },
  });
  const agent = /** @type {{ agentId: string, apiKey: string }} */ (
    await admin(server, 'POST', '/admin/v1/agents', { name: 'bench' })
  );
  await admin(server, 'PUT', `/admin/v1/agents/${agent.agentId}/members/bench-user`, {
    role: 'viewer',
  });

  console.log(`  storing ${CFG.jobs} finished runs of ${CFG.events} events ...`);
  const seeded = Array.from({ length: CFG.jobs }, (_, i) =>
    finishedItem(agent.agentId, i % 3 === 0 ? 'errored' : 'completed'),
  );
  for (let i = 0; i < seeded.length; i += 8)
    await Promise.all(
      seeded
        .slice(i, i + 8)
        .map((item) =>
          postJson(server, '/v1/traces/batch', agent.apiKey, { batchId: ulid(), items: [item] }),
        ),
    );
  const jobs = /** @type {QueuedJob[]} */ (
    (await db.query('SELECT id, trace_id AS "traceId" FROM analysis_jobs ORDER BY id')).rows
  );
  if (jobs.length !== CFG.jobs) throw new Error(`${jobs.length} jobs queued, not ${CFG.jobs}`);

  const store = await openStore({
    databaseUrl: CFG.databaseUrl,
    databaseSchema: schema,
    poolSize: 2,
    migrate: false,
  });
  lifecycle.onCleanup(() => store.close());
  const analyzer = new HeuristicAnalyzer();
  // warm-up: the code paths, the database's caches and plans
  await measureBaseline(store, analyzer, jobs.slice(0, 30));

  /** @type {QueueSides} */
  const sides = { baseline: [], oneWorker: [], twoWorkers: [] };
  for (let round = 1; round <= CFG.rounds; round++) {
    const b = await measureBaseline(store, analyzer, jobs);
    sides.baseline.push(b);
    const one = await measureWorkers(db, storeEnv, 1);
    sides.oneWorker.push(one);
    const two = await measureWorkers(db, storeEnv, 2);
    sides.twoWorkers.push(two);
    console.log(
      `  round ${round}: baseline ${b.jobsPerSec.toFixed(0)} jobs/s, 1 worker ${one.jobsPerSec.toFixed(0)}, 2 workers ${two.jobsPerSec.toFixed(0)}`,
    );
  }
  await store.close();

  const token = await mintDevToken(server.jwtSecret, 'bench-user');
  /** @type {Delays} */
  const delay = {};
  // the server's worker off, one stand-alone worker: it finds new jobs by polling
  const poller = spawnCli(lifecycle, {
    cli: CLI,
    cwd: ROOT,
    args: ['worker'],
    tag: 'polling worker',
    env: { ...storeEnv, LOG_LEVEL: 'info' },
  });
  await poller.waitFor(/"msg":"analysis worker started"/);
  delay.standAloneWorker = await measureDelay(
    server,
    agent.apiKey,
    agent.agentId,
    token,
    'stand-alone worker (polling every 500 ms)',
  );
  await poller.stop();
  await server.stop();
  // the default deployment: the worker inside the server, woken by the finalising request
  server = await startFlightlogServer(lifecycle, {
    cli: CLI,
    cwd: ROOT,
    env: { ...storeEnv, ANALYSIS_WORKER: 'on', ANALYSIS_GRACE_MS: '0' },
  });
  // a token of the new server's secret
  const token2 = await mintDevToken(server.jwtSecret, 'bench-user');
  delay.inProcessWorker = await measureDelay(
    server,
    agent.apiKey,
    agent.agentId,
    token2,
    'worker inside the server',
  );
  await server.stop();

  report(sides, delay, labelled);
}

/**
 * The rounds of each side of the queue measurement.
 * @typedef {{ baseline: QueueRound[], oneWorker: QueueRound[], twoWorkers: QueueRound[] }}
 *   QueueSides
 */
/**
 * The delay by where the worker runs: standAloneWorker, inProcessWorker.
 * @typedef {Record<string, DelayResult>} Delays
 */

/**
 * A side over its rounds; `wallJobsPerSec` for the workers' sides only.
 * @typedef {object} QueueSummary
 * @property {number} medianJobsPerSec
 * @property {number[]} perRound
 * @property {number} ratio
 * @property {number | null} wallJobsPerSec
 * @property {string[]} anomalies
 */

/**
 * @param {QueueRound[]} runs
 * @param {number} baselineMedian
 * @returns {QueueSummary}
 */
function summarise(runs, baselineMedian) {
  const values = runs.map((r) => r.jobsPerSec);
  const m = /** @type {number} */ (median(values)); // CFG.rounds ≥ 1
  return {
    medianJobsPerSec: m,
    perRound: values,
    ratio: m / baselineMedian,
    wallJobsPerSec:
      runs[0]?.wallJobsPerSec === undefined
        ? null
        : // a side's rounds all have it or none does
          median(runs.map((r) => /** @type {number} */ (r.wallJobsPerSec))),
    anomalies: runs.flatMap((r) => r.anomalies ?? []),
  };
}

/**
 * Writes RESULTS_FILE; the queue's figures when measured (`sides` and `delay` then both given).
 * @param {QueueSides | null} sides
 * @param {Delays | null} delay
 * @param {LabelledResult} labelled
 */
function report(sides, delay, labelled) {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const out = {
    measuredAt: new Date().toISOString(),
    machine: {
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model,
      memoryGiB: Math.round(os.totalmem() / 2 ** 30),
      node: process.version,
    },
    config: CFG,
    labelled,
  };
  if (sides) Object.assign(out, reportQueue(sides, /** @type {Delays} */ (delay)));
  const tmp = `${RESULTS_FILE}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(out, null, 2)}\n`);
  renameSync(tmp, RESULTS_FILE);
  console.log(`\nWritten to ${RESULTS_FILE}`);
}

/**
 * Prints the queue's throughput and delay; returns them for the results file.
 * @param {QueueSides} sides
 * @param {Delays} delay
 */
function reportQueue(sides, delay) {
  const baselineMedian = /** @type {number} */ (median(sides.baseline.map((r) => r.jobsPerSec)));
  const results = {
    baseline: summarise(sides.baseline, baselineMedian),
    oneWorker: summarise(sides.oneWorker, baselineMedian),
    twoWorkers: summarise(sides.twoWorkers, baselineMedian),
  };
  const rows = [
    ['side', 'jobs/s (median)', 'per round', 'ratio to baseline'],
    .../** @type {[string, QueueSummary][]} */ ([
      ['baseline (in-process, no queue)', results.baseline],
      ['1 worker process', results.oneWorker],
      ['2 worker processes', results.twoWorkers],
    ]).map(([name, r]) => [
      name,
      r.medianJobsPerSec.toFixed(0),
      r.perRound.map((v) => v.toFixed(0)).join(' / '),
      r.ratio.toFixed(2),
    ]),
  ];
  const widths = /** @type {string[]} */ (rows[0]).map((_, c) =>
    Math.max(...rows.map((r) => /** @type {string} */ (r[c]).length)),
  );
  console.log('');
  console.log(
    `Analysis throughput: ${CFG.jobs} runs of ${CFG.events} events, ${CFG.rounds} rounds (interleaved)`,
  );
  for (const row of rows)
    console.log(
      `  ${row.map((cell, c) => cell.padEnd(/** @type {number} */ (widths[c]))).join('  ')}`,
    );
  console.log('');
  console.log(
    `Delay from POST /complete to a readable autopsy (target median < ${CFG.targetDelayMs} ms):`,
  );
  for (const [name, d] of Object.entries(delay))
    console.log(
      `  ${name.padEnd(18)} median ${d.medianMs?.toFixed(1)} ms, p99 ${d.p99Ms?.toFixed(1)} ms` +
        ` ${d.medianMs !== null && d.medianMs < CFG.targetDelayMs ? '(met)' : '(MISSED)'}`,
    );

  return { throughput: results, delay };
}

main()
  .catch((error) => {
    console.error(`\n!!! benchmark failed: ${error?.stack ?? error}`);
    process.exitCode = 1;
  })
  .finally(() => lifecycle.runCleanups());
