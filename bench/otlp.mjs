// OTLP benchmark: how fast the real Flightlog server stores OpenTelemetry spans through
// POST /v1/otlp/v1/traces, against the same spans sent as the Flightlog batches they amount to
// through POST /v1/traces/batch, measured in the same run against the same server process.
//
// For each engine (PostgreSQL at BENCH_DATABASE_URL, skipped loudly when unreachable; then
// PGlite with its default durability, commits fsynced) it starts the built server as a child
// process on a fresh schema / data directory and creates one agent per side. The spans: traces
// of BENCH_SPANS spans (20) recorded with the real OpenTelemetry SDK (BasicTracerProvider,
// explicit times) as an instrumented agent writes them: an `invoke_agent` root with the user's
// question and the answer, under it `chat` spans with the GenAI attributes (provider, models,
// token usage, finish reasons, input and output messages of ~400 characters) and every third
// one an `execute_tool` span (name, arguments, result). BENCH_TEMPLATES (64) such traces are
// serialised once by the exporters' own serialisers (@opentelemetry/otlp-transformer, protobuf
// and JSON); their Flightlog equivalent is what the server's mapping makes of them
// (span-mapping.js and export-batch.js from the build: one item, the trace and its 20 events).
// Every request body is a template with a fresh trace id (and batch id) written into it, then
// gzipped, built before the run and used once, so every span is new to the server. Sides:
//
//   batch          the equivalent Flightlog batch (JSON, gzip) to POST /v1/traces/batch: the
//                  baseline, counted in events/s
//   otlp-protobuf  one export per trace, application/x-protobuf, gzip, counted in spans/s
//   otlp-json      the same export in OTLP/JSON, gzip, spans/s
//
// autocannon, 16 connections, BENCH_SECONDS each, the sides alternating BENCH_ROUNDS times
// (A B C A B C) after a warm-up of each; medians; the ratio of each OTLP side's spans/s to the
// batch side's events/s (target >= 0.8 for protobuf), also per round (neighbouring runs see the
// same machine load). The load average is printed with each engine. After the server stops,
// the events stored for each side's agent are counted against what it answered 2xx for.
// Figures are printed and written to bench/results/otlp-latest.json.
//
// It is a benchmark, not a test: nothing is asserted, anomalies (non-2xx, errors, rows missing)
// are printed loudly. Bounded by BENCH_TIMEOUT_SECONDS; servers are stopped and schemas / data
// directories removed on every exit path.
//
// Env: BENCH_SECONDS (4), BENCH_ROUNDS (3), BENCH_WARMUP_SECONDS (1), BENCH_TIMEOUT_SECONDS,
//      BENCH_DATABASE_URL (postgres://postgres@127.0.0.1:5432/test), BENCH_ENGINES
//      (postgres,pglite), BENCH_SIDES (batch,otlp-protobuf,otlp-json), BENCH_SPANS (20),
//      BENCH_TEMPLATES (64), BENCH_SERVER_POOL_SIZE (the server's DATABASE_POOL_SIZE; its own
//      default when unset), BENCH_SERVER_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/p"),
//      BENCH_ANALYSIS_WORKER (off: the server's in-process autopsy worker; on to count it in)

import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { gzipSync } from 'node:zlib';
import { context, trace } from '@opentelemetry/api';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import pg from 'pg';
import { PGlite } from '@electric-sql/pglite';
import { monotonicFactory } from 'ulidx';
import { OneShotPool } from './ingest-bodies.mjs';
import {
  autocannon,
  cpuMsOf,
  createLifecycle,
  envList,
  envNumber,
  machineInfo,
  median,
  MODELS,
  reachable,
  redactUrl,
  request,
  runBenchmark,
  seededRandom,
  startFlightlogServer,
  TEXTS,
  textTable,
  writeJsonAtomic,
} from './support.mjs';

/**
 * @typedef {import('./support.mjs').ServerHandle} ServerHandle
 * @typedef {import('./support.mjs').MachineInfo} MachineInfo
 * @typedef {import('@opentelemetry/sdk-trace-base').ReadableSpan} ReadableSpan
 * @typedef {import('@flightlog/protocol').BufferBatchItem} BufferBatchItem
 */

const ulid = monotonicFactory();
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLI = join(ROOT, 'packages/server/dist/cli.js');
const DIST_OTLP = join(ROOT, 'packages/server/dist/otlp');
const RESULTS_FILE = join(ROOT, 'bench/results/otlp-latest.json');

/** @typedef {'batch' | 'otlp-protobuf' | 'otlp-json'} Side */
/** @type {Side[]} */
const SIDES = ['batch', 'otlp-protobuf', 'otlp-json'];

/**
 * One entry for each side of the run (CFG.sides): only those are ever looked up.
 * @template T
 * @typedef {Record<Side, T>} BySide
 */

/**
 * @typedef {object} Config
 * @property {number} seconds
 * @property {number} rounds
 * @property {number} warmupSeconds
 * @property {string} databaseUrl
 * @property {string[]} engines
 * @property {Side[]} sides each one of SIDES (envList stops the run otherwise)
 * @property {number} spansPerTrace
 * @property {number} templates
 * @property {number | null} serverPoolSize null: the server's default
 * @property {string | undefined} analysisWorker undefined (the server's default) when
 *   BENCH_ANALYSIS_WORKER lists none
 * @property {number} connections
 * @property {number} targetRatio
 * @property {number} plannedSeconds set below, from the rest
 * @property {number} timeoutSeconds set below, from plannedSeconds
 */

const CFG = /** @type {Config} */ ({
  seconds: envNumber('BENCH_SECONDS', 4, 1, 120),
  rounds: Math.round(envNumber('BENCH_ROUNDS', 3, 1, 20)),
  warmupSeconds: envNumber('BENCH_WARMUP_SECONDS', 1, 0, 60),
  databaseUrl: process.env.BENCH_DATABASE_URL?.trim() || 'postgres://postgres@127.0.0.1:5432/test',
  engines: envList('BENCH_ENGINES', 'postgres,pglite', ['postgres', 'pglite']),
  sides: envList('BENCH_SIDES', SIDES.join(','), SIDES),
  spansPerTrace: Math.round(envNumber('BENCH_SPANS', 20, 2, 500)),
  templates: Math.round(envNumber('BENCH_TEMPLATES', 64, 1, 10_000)),
  serverPoolSize: envNumber('BENCH_SERVER_POOL_SIZE', 0, 0, 1000) || null,
  /** The server's ANALYSIS_WORKER: off, so that only ingest is measured (see benchEngine). */
  analysisWorker: envList('BENCH_ANALYSIS_WORKER', 'off', ['on', 'off'])[0],
  connections: 16,
  targetRatio: 0.8,
});
if (!CFG.sides.includes('batch')) {
  console.error('BENCH_SIDES must include batch: it is the baseline');
  process.exit(2);
}
CFG.plannedSeconds = Math.round(
  CFG.engines.length *
    (15 + CFG.sides.length * (CFG.warmupSeconds + CFG.rounds * CFG.seconds) * 1.4),
);
CFG.timeoutSeconds = envNumber('BENCH_TIMEOUT_SECONDS', 2 * CFG.plannedSeconds + 120, 30, 7200);

const lifecycle = createLifecycle({ timeoutSeconds: CFG.timeoutSeconds });

// ---------------------------------------------------------------------------------------------
// The spans: templates recorded with the real SDK, serialised by the exporters' serialisers.

const rand = seededRandom(0x6d2b79f5);
/**
 * @template T
 * @param {readonly T[]} array not empty
 * @returns {T}
 */
const pick = (array) => /** @type {T} */ (array[Math.floor(rand() * array.length)]);
const int = (/** @type {number} */ min, /** @type {number} */ max) =>
  min + Math.floor(rand() * (max - min + 1));
const TOOLS = ['search_flights', 'get_weather', 'book_hotel', 'convert_currency'];

const userMessage = (/** @type {string} */ text) =>
  JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: text }] }]);
const assistantMessage = (/** @type {string} */ text, /** @type {string} */ finishReason) =>
  JSON.stringify([
    { role: 'assistant', parts: [{ type: 'text', content: text }], finish_reason: finishReason },
  ]);

/**
 * One agent run as the OTel SDK records it: finished ReadableSpans, root last.
 * @param {import('@opentelemetry/api').Tracer} tracer
 * @param {InMemorySpanExporter} memory the tracer's exporter
 * @returns {ReadableSpan[]}
 */
function recordRun(tracer, memory) {
  memory.reset();
  const t0 = Date.now() - 120_000;
  const question = pick(TEXTS);
  const answer = pick(TEXTS).slice(0, 160);
  const root = tracer.startSpan('invoke_agent travel-planner', {
    startTime: t0,
    attributes: {
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.name': 'travel-planner',
      'gen_ai.input.messages': userMessage(question),
      'gen_ai.output.messages': assistantMessage(answer, 'stop'),
    },
  });
  const parent = trace.setSpan(context.active(), root);
  let at = t0 + 5;
  for (let i = 1; i < CFG.spansPerTrace; i++) {
    const duration = int(200, 900);
    const isTool = i % 3 === 0;
    const model = pick(MODELS);
    const span = isTool
      ? tracer.startSpan(
          `execute_tool ${pick(TOOLS)}`,
          {
            startTime: at,
            attributes: {
              'gen_ai.operation.name': 'execute_tool',
              'gen_ai.tool.name': pick(TOOLS),
              'gen_ai.tool.call.id': `call_${i}`,
              'gen_ai.tool.call.arguments': JSON.stringify({ query: pick(TEXTS).slice(0, 60) }),
              'gen_ai.tool.call.result': JSON.stringify({ result: pick(TEXTS).slice(0, 120) }),
            },
          },
          parent,
        )
      : tracer.startSpan(
          `chat ${model}`,
          {
            startTime: at,
            attributes: {
              'gen_ai.operation.name': 'chat',
              'gen_ai.provider.name': 'openai',
              'gen_ai.request.model': model,
              'gen_ai.response.model': `${model}-2024-08-06`,
              'gen_ai.response.id': `chatcmpl-${i}`,
              'gen_ai.usage.input_tokens': int(80, 480),
              'gen_ai.usage.output_tokens': int(20, 220),
              'gen_ai.response.finish_reasons': [i % 3 === 2 ? 'tool_calls' : 'stop'],
              'gen_ai.input.messages': userMessage(pick(TEXTS)),
              'gen_ai.output.messages': assistantMessage(pick(TEXTS).slice(0, 80), 'stop'),
            },
          },
          parent,
        );
    span.end(at + duration);
    at += duration + 5;
  }
  root.end(at);
  return memory.getFinishedSpans();
}

/**
 * `templates` runs, each as a protobuf export, a JSON export and the Flightlog batch the server's
 * mapping makes of it for `batchAgentId` (with BATCH_ID where the batch id goes).
 */
const BATCH_ID = '@@BATCH_ID@@';

/**
 * One recorded run, serialised each way; `traceIdHex` / `traceIdBytes` are where a fresh trace
 * id goes.
 * @typedef {object} Template
 * @property {string} traceIdHex
 * @property {Buffer} traceIdBytes
 * @property {Buffer} protobuf
 * @property {string} json
 * @property {string} batch the Flightlog batch, BATCH_ID for its batch id
 */

/**
 * @param {string} batchAgentId
 * @returns {Promise<Template[]>}
 */
async function buildTemplates(batchAgentId) {
  // the server's build: the same mapping as its OTLP route
  const { mapExport } =
    /** @type {typeof import('../packages/server/dist/otlp/span-mapping.js')} */ (
      await import(pathToFileURL(join(DIST_OTLP, 'span-mapping.js')).href)
    );
  const { exportBatch } =
    /** @type {typeof import('../packages/server/dist/otlp/export-batch.js')} */ (
      await import(pathToFileURL(join(DIST_OTLP, 'export-batch.js')).href)
    );
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'travel-planner' }),
    spanProcessors: [new SimpleSpanProcessor(memory)],
  });
  const tracer = provider.getTracer('flightlog-bench', '1.0.0');
  /** @type {Template[]} */
  const templates = [];
  for (let i = 0; i < CFG.templates; i++) {
    const spans = recordRun(tracer, memory);
    // a run has at least 2 spans (BENCH_SPANS), and the serialisers give bytes for any
    const traceIdHex = /** @type {ReadableSpan} */ (spans[0]).spanContext().traceId;
    const protobuf = Buffer.from(
      /** @type {Uint8Array} */ (ProtobufTraceSerializer.serializeRequest(spans)),
    );
    const json = Buffer.from(
      /** @type {Uint8Array} */ (JsonTraceSerializer.serializeRequest(spans)),
    ).toString('utf8');
    const mapped = mapExport(JSON.parse(json));
    const batch = exportBatch(batchAgentId, mapped.spans, new Map(), new Map());
    if (mapped.rejected.size > 0 || batch.items.length !== 1)
      throw new Error('a template did not map to one batch item');
    const [item] = /** @type {[BufferBatchItem]} */ (batch.items); // one, checked just above
    if (item.events.length !== CFG.spansPerTrace || item.trace.status !== 'completed')
      throw new Error(`a template mapped to ${item.events.length} events, ${item.trace.status}`);
    templates.push({
      traceIdHex,
      traceIdBytes: Buffer.from(traceIdHex, 'hex'),
      protobuf,
      json,
      batch: JSON.stringify({ batchId: BATCH_ID, items: batch.items }),
    });
  }
  await provider.shutdown();
  return templates;
}

/**
 * Every occurrence of `from` in `buffer` replaced by `to` (same length), in a copy.
 * @param {Buffer} buffer
 * @param {Buffer} from
 * @param {Buffer} to
 */
function replaceBytes(buffer, from, to) {
  const copy = Buffer.from(buffer);
  for (let at = copy.indexOf(from); at !== -1; at = copy.indexOf(from, at + from.length))
    to.copy(copy, at);
  return copy;
}

/**
 * A maker of one-use gzip bodies of `side`, templates taken in turn, each with a fresh trace id.
 * @param {Side} side
 * @param {Template[]} templates not empty
 * @returns {() => Buffer}
 */
function bodyMaker(side, templates) {
  let i = 0;
  return () => {
    const t = /** @type {Template} */ (templates[i++ % templates.length]);
    const id = randomBytes(16);
    const hex = id.toString('hex');
    if (side === 'otlp-protobuf') return gzipSync(replaceBytes(t.protobuf, t.traceIdBytes, id));
    if (side === 'otlp-json') return gzipSync(t.json.replaceAll(t.traceIdHex, hex));
    return gzipSync(t.batch.replaceAll(t.traceIdHex, hex).replace(BATCH_ID, ulid()));
  };
}

// ---------------------------------------------------------------------------------------------
// The server and the load.

/** The admin API's answer to creating an agent, as far as it is used here. */
/** @typedef {{ agentId: string, apiKey: string }} CreatedAgent */

/**
 * @param {ServerHandle} server
 * @param {string} name
 * @returns {Promise<CreatedAgent>}
 */
async function createAgent(server, name) {
  const { status, text } = await request('POST', `${server.base}/admin/v1/agents`, {
    headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name }),
  });
  if (status !== 201) throw new Error(`agent creation answered ${status}: ${text}`);
  return JSON.parse(text);
}

/**
 * The server's ingest counters.
 * @typedef {object} IngestCounters
 * @property {number} batchesAccepted
 * @property {number} spansAccepted
 * @property {number} spansDuplicate
 * @property {number} spansRejected
 */

/**
 * @param {string} base
 * @returns {Promise<IngestCounters>}
 */
async function scrapeMetrics(base) {
  const { status, text } = await request('GET', `${base}/metrics`);
  // none when /metrics fails: the figures taken from them come out NaN (null in the JSON)
  if (status !== 200) return /** @type {IngestCounters} */ ({});
  const value = (/** @type {RegExp} */ pattern) => Number(text.match(pattern)?.[1] ?? 0);
  return {
    batchesAccepted: value(/^flightlog_batches_total\{outcome="accepted"\} (\S+)$/m),
    spansAccepted: value(/^flightlog_otlp_spans_total\{outcome="accepted"\} (\S+)$/m),
    spansDuplicate: value(/^flightlog_otlp_spans_total\{outcome="duplicate"\} (\S+)$/m),
    spansRejected: value(/^flightlog_otlp_spans_total\{outcome="rejected"\} (\S+)$/m),
  };
}

/** @type {Record<Side, string>} */
const CONTENT_TYPE = {
  batch: 'application/json',
  'otlp-protobuf': 'application/x-protobuf',
  'otlp-json': 'application/json',
};

/**
 * Where and how one side's requests go.
 * @typedef {object} Target
 * @property {Side} side
 * @property {string} base the server's
 * @property {number} pid the server's
 * @property {string} url
 * @property {Record<string, string>} headers
 */

/**
 * One run of one side.
 * @typedef {object} SideRun
 * @property {number} requestsPerSec
 * @property {number} spansPerSec events/s for the batch side, spans/s for the OTLP ones
 * @property {number} p50Ms
 * @property {number} p99Ms
 * @property {number} ok requests answered 2xx
 * @property {number} non2xx
 * @property {number} errors
 * @property {number} timeouts
 * @property {Record<string, number>} statusCodes requests by status code
 * @property {number} durationSec
 * @property {number} serverCounted spans (events) the server's counters say it accepted
 * @property {number} serverRefusedSpans duplicates and rejections
 * @property {number | null} serverCpuMsPerRequest
 * @property {number} bodiesBuiltDuringRun
 * @property {number} loadAvg1
 */

/**
 * @param {Target} target
 * @param {OneShotPool<Buffer>} bodies of `target.side`
 * @param {number} seconds
 * @returns {Promise<SideRun>}
 */
async function runSide(target, bodies, seconds) {
  const before = await scrapeMetrics(target.base);
  const cpuBefore = cpuMsOf(target.pid);
  const result = await autocannon({
    url: target.url,
    method: 'POST',
    connections: CFG.connections,
    duration: seconds,
    timeout: 10,
    headers: target.headers,
    requests: [{ setupRequest: (req) => ({ ...req, body: bodies.next() }) }],
  });
  await sleep(300); // requests cut off at the end of the run finish on the server
  const after = await scrapeMetrics(target.base);
  const cpuAfter = cpuMsOf(target.pid);
  const ok = result['2xx'];
  // the server's CPU per request answered, the requests cut off at the end counted in too
  const handled =
    target.side === 'batch'
      ? after.batchesAccepted - before.batchesAccepted
      : (after.spansAccepted - before.spansAccepted) / CFG.spansPerTrace;
  return {
    requestsPerSec: ok / result.duration,
    /** events/s for the batch side, spans/s for the OTLP ones: the same unit of work. */
    spansPerSec: (ok * CFG.spansPerTrace) / result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    ok,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes: Object.fromEntries(
      Object.entries(result.statusCodeStats ?? {}).map(([code, { count }]) => [code, count]),
    ),
    durationSec: result.duration,
    serverCounted:
      target.side === 'batch'
        ? (after.batchesAccepted - before.batchesAccepted) * CFG.spansPerTrace
        : after.spansAccepted - before.spansAccepted,
    serverRefusedSpans:
      target.side === 'batch'
        ? 0
        : after.spansDuplicate - before.spansDuplicate + after.spansRejected - before.spansRejected,
    serverCpuMsPerRequest:
      cpuBefore === null || cpuAfter === null || handled <= 0
        ? null
        : (cpuAfter - cpuBefore) / handled,
    bodiesBuiltDuringRun: bodies.madeDuringRun,
    loadAvg1: Math.round(/** @type {number} */ (os.loadavg()[0]) * 100) / 100,
  };
}

const STORED_SQL = `SELECT agent_id AS "agentId", count(*)::int AS events FROM events
  WHERE agent_id = ANY($1::text[]) GROUP BY agent_id`;

/**
 * The server's environment: where its data lives, and what this benchmark sets.
 * @typedef {object} ServerEnv
 * @property {string} [DATABASE_URL]
 * @property {string} [DATABASE_SCHEMA]
 * @property {string} [DATA_DIR]
 * @property {string} [DATABASE_POOL_SIZE]
 * @property {string} [ANALYSIS_WORKER]
 */

/**
 * Events stored, by agent id.
 * @param {string} engine
 * @param {ServerEnv} serverEnv
 * @param {string[]} agentIds
 * @returns {Promise<Record<string, number>>}
 */
async function countStored(engine, serverEnv, agentIds) {
  /** @type {{ agentId: string, events: number }[]} */
  let rows;
  if (engine === 'postgres') {
    const client = new pg.Client({
      connectionString: CFG.databaseUrl,
      options: `-c search_path="${serverEnv.DATABASE_SCHEMA}"`,
    });
    await client.connect();
    try {
      ({ rows } = await client.query(STORED_SQL, [agentIds]));
    } finally {
      await client.end();
    }
  } else {
    const db = await PGlite.create(serverEnv.DATA_DIR);
    try {
      ({ rows } = await db.query(STORED_SQL, [agentIds]));
    } finally {
      await db.close();
    }
  }
  return Object.fromEntries(rows.map((r) => [r.agentId, r.events]));
}

const fmtRun = (/** @type {string} */ side, /** @type {SideRun} */ r) =>
  `${side.padEnd(13)} ${Math.round(r.spansPerSec).toString().padStart(7)} spans/s ` +
  `${r.requestsPerSec.toFixed(1).padStart(7)} req/s  p50 ${r.p50Ms.toFixed(1).padStart(6)} ms  ` +
  `p99 ${r.p99Ms.toFixed(1).padStart(6)} ms  server CPU ${r.serverCpuMsPerRequest?.toFixed(2) ?? 'n/a'} ms/req  load ${r.loadAvg1}` +
  (r.non2xx + r.errors + r.timeouts > 0
    ? `  !!! ${r.non2xx} non-2xx ${JSON.stringify(r.statusCodes)}, ${r.errors} errors, ${r.timeouts} timeouts`
    : '');

/**
 * One round: each side once.
 * @typedef {{ round: number } & BySide<SideRun>} Round
 */

/**
 * Medians over the rounds; never null but the CPU figure (null when no run had one).
 * @typedef {object} SideMedians
 * @property {number} spansPerSec
 * @property {number} requestsPerSec
 * @property {number} p50Ms
 * @property {number} p99Ms
 * @property {number | null} serverCpuMsPerRequest
 */

/**
 * An OTLP side's spans/s over the batch side's events/s.
 * @typedef {object} SideRatio
 * @property {number} ofMedians
 * @property {number[]} perRound
 * @property {number | null} medianPerRound
 */

/**
 * One engine's result, as written to the results file: skipped (`skipped`), failed (`error`,
 * with the figures it got to), or measured; the figures are added as the run gets to them.
 * @typedef {object} EngineResult
 * @property {string} engine
 * @property {string} [skipped] why the engine was not measured
 * @property {string} [error] why its run failed
 * @property {Round[]} [rounds]
 * @property {string[]} [warnings]
 * @property {number[]} [loadAvgBefore]
 * @property {BySide<number>} [bodyGzipBytes] mean gzip body size
 * @property {Record<Side, number>} [bodyBytes] uncompressed, of the first template
 * @property {BySide<SideMedians>} [median]
 * @property {Partial<BySide<SideRatio>>} [ratios] of the OTLP sides
 * @property {boolean | null} [meetsTarget] null without an otlp-protobuf side
 * @property {number[]} [loadAvgAfter]
 * @property {string[]} [serverOutputTail]
 * @property {BySide<{ events: number, expected: number }>} [stored] events stored, and expected
 *   from the requests answered 2xx
 */

/**
 * A result with every figure: what a measured engine's has (one that failed after its medians
 * excepted).
 * @typedef {Required<Omit<EngineResult, 'skipped' | 'error' | 'serverOutputTail'>>} MeasuredEngine
 */

/**
 * What a failure threw, read as an Error: anything else has neither field, and is shown as it is.
 * @typedef {Partial<Error> | null | undefined} Thrown
 */

/**
 * @param {string} engine
 * @returns {Promise<EngineResult>}
 */
async function benchEngine(engine) {
  const mark = lifecycle.mark();
  /** @type {EngineResult & { rounds: Round[], warnings: string[] }} */
  const result = { engine, rounds: [], warnings: [] };
  const warn = (/** @type {string} */ w) => {
    console.error(`  !!! WARNING ${engine}: ${w}`);
    result.warnings.push(w);
  };
  try {
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
      const schema = `bench_otlp_${randomBytes(4).toString('hex')}`;
      lifecycle.onCleanup(async () => {
        const client = new pg.Client({ connectionString: CFG.databaseUrl });
        await client.connect();
        try {
          await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        } finally {
          await client.end();
        }
      });
      serverEnv = { DATABASE_URL: CFG.databaseUrl, DATABASE_SCHEMA: schema };
    } else {
      const dir = mkdtempSync(join(os.tmpdir(), 'flightlog-bench-otlp-'));
      lifecycle.onCleanup(() => rmSync(dir, { recursive: true, force: true }));
      serverEnv = { DATA_DIR: dir };
    }

    if (CFG.serverPoolSize) serverEnv.DATABASE_POOL_SIZE = String(CFG.serverPoolSize);
    // Every run of both sides ends, so the in-server worker would analyse each one 2 s later, in
    // the server process: the backlog of one side's runs would be worked off in the next side's
    // window (A B C order), and the comparison would measure the autopsy too.
    serverEnv.ANALYSIS_WORKER = CFG.analysisWorker;
    result.loadAvgBefore = os.loadavg().map((x) => Math.round(x * 100) / 100);
    console.log(`\n== ${engine}: starting server (load average ${result.loadAvgBefore.join(' ')})`);
    const server = await startFlightlogServer(lifecycle, { cli: CLI, cwd: ROOT, env: serverEnv });
    // filled for every side just below
    const agents = /** @type {BySide<CreatedAgent>} */ ({});
    for (const side of CFG.sides) agents[side] = await createAgent(server, `bench ${side}`);
    const templates = await buildTemplates(agents.batch.agentId);
    const sample = (/** @type {Side} */ side) => {
      const make = bodyMaker(side, templates);
      const bodies = Array.from({ length: templates.length }, make);
      return Math.round(bodies.reduce((sum, b) => sum + b.length, 0) / bodies.length);
    };
    result.bodyGzipBytes = /** @type {BySide<number>} */ (
      Object.fromEntries(CFG.sides.map((side) => [side, sample(side)]))
    );
    const t = /** @type {Template} */ (templates[0]); // CFG.templates >= 1
    result.bodyBytes = {
      batch: Buffer.byteLength(t.batch),
      'otlp-protobuf': t.protobuf.length,
      'otlp-json': Buffer.byteLength(t.json),
    };
    // both set just above
    console.log(
      `   bodies (uncompressed / gzip): ${CFG.sides.map((s) => `${s} ${/** @type {MeasuredEngine} */ (result).bodyBytes[s]} / ${/** @type {MeasuredEngine} */ (result).bodyGzipBytes[s]} B`).join(', ')}`,
    );

    const targets = /** @type {BySide<Target>} */ (
      Object.fromEntries(
        CFG.sides.map((side) => [
          side,
          /** @type {Target} */ ({
            side,
            base: server.base,
            pid: /** @type {number} */ (server.child.pid), // a started server has one
            url: `${server.base}${side === 'batch' ? '/v1/traces/batch' : '/v1/otlp/v1/traces'}`,
            headers: {
              authorization: `Bearer ${agents[side].apiKey}`,
              'content-type': CONTENT_TYPE[side],
              'content-encoding': 'gzip',
            },
          }),
        ]),
      )
    );
    const pools = /** @type {BySide<OneShotPool<Buffer>>} */ (
      Object.fromEntries(
        CFG.sides.map((side) => [side, new OneShotPool(bodyMaker(side, templates))]),
      )
    );
    /** requests/s: the fastest seen so far, to fill the next run's pool for */
    const estimate = /** @type {BySide<number>} */ (
      Object.fromEntries(CFG.sides.map((side) => [side, 300]))
    );
    /** requests answered 2xx */
    const sent = /** @type {BySide<number>} */ (
      Object.fromEntries(CFG.sides.map((side) => [side, 0]))
    );
    /**
     * @param {Side} side
     * @param {number} seconds
     * @param {string} label
     */
    const run = async (side, seconds, label) => {
      await pools[side].fill(Math.ceil(estimate[side] * seconds * 1.5) + 4 * CFG.connections);
      const r = await runSide(targets[side], pools[side], seconds);
      pools[side].drain();
      if (!server.alive())
        throw new Error(`server died during the run:\n${server.output.lines.join('\n')}`);
      estimate[side] = Math.max(estimate[side], r.requestsPerSec);
      sent[side] += r.ok;
      if (r.non2xx + r.errors + r.timeouts > 0)
        warn(`${label} ${side}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts`);
      if (r.serverRefusedSpans > 0) warn(`${label} ${side}: ${r.serverRefusedSpans} spans refused`);
      console.log(`   ${label.padEnd(8)} ${fmtRun(side, r)}`);
      return r;
    };
    if (CFG.warmupSeconds > 0)
      for (const side of CFG.sides) await run(side, CFG.warmupSeconds, 'warm-up');
    for (let round = 1; round <= CFG.rounds; round++) {
      // the sides are filled in just below
      const entry = /** @type {Round} */ ({ round });
      for (const side of CFG.sides) entry[side] = await run(side, CFG.seconds, `round ${round}`);
      result.rounds.push(entry);
    }
    result.median = /** @type {BySide<SideMedians>} */ (
      Object.fromEntries(
        CFG.sides.map((side) => {
          const runs = result.rounds.map((r) => r[side]);
          return [
            side,
            // CFG.rounds >= 1: only the CPU figure can be null in every round
            {
              spansPerSec: /** @type {number} */ (median(runs.map((r) => r.spansPerSec))),
              requestsPerSec: /** @type {number} */ (median(runs.map((r) => r.requestsPerSec))),
              p50Ms: /** @type {number} */ (median(runs.map((r) => r.p50Ms))),
              p99Ms: /** @type {number} */ (median(runs.map((r) => r.p99Ms))),
              serverCpuMsPerRequest: median(runs.map((r) => r.serverCpuMsPerRequest)),
            },
          ];
        }),
      )
    );
    result.ratios = {};
    for (const side of CFG.sides.filter((s) => s !== 'batch'))
      result.ratios[side] = {
        ofMedians: result.median[side].spansPerSec / result.median.batch.spansPerSec,
        perRound: result.rounds.map((r) => r[side].spansPerSec / r.batch.spansPerSec),
        medianPerRound: median(result.rounds.map((r) => r[side].spansPerSec / r.batch.spansPerSec)),
      };
    result.meetsTarget =
      result.ratios['otlp-protobuf'] === undefined
        ? null
        : result.ratios['otlp-protobuf'].ofMedians >= CFG.targetRatio;
    result.loadAvgAfter = os.loadavg().map((x) => Math.round(x * 100) / 100);

    const exit = await server.stop();
    if (exit.code !== 0) warn(`server exited with code ${exit.code} signal ${exit.signal}`);
    if (server.output.count > 0) result.serverOutputTail = server.output.lines.slice(-10);
    // every span answered 2xx must be in the tables (read once the server has stopped)
    const stored = await countStored(
      engine,
      serverEnv,
      CFG.sides.map((side) => agents[side].agentId),
    );
    // filled for every side just below
    result.stored = /** @type {BySide<{ events: number, expected: number }>} */ ({});
    for (const side of CFG.sides) {
      const events = stored[agents[side].agentId] ?? 0;
      const expected = sent[side] * CFG.spansPerTrace;
      result.stored[side] = { events, expected };
      if (events < expected) warn(`${side}: ${events} events stored for ${expected} answered 2xx`);
    }
    return result;
  } catch (error) {
    console.error(
      `\n!!! ${engine.toUpperCase()} BENCHMARK FAILED: ${/** @type {Thrown} */ (error)?.stack ?? error}`,
    );
    return { ...result, error: String(/** @type {Thrown} */ (error)?.message ?? error) };
  } finally {
    await lifecycle.runCleanupsFrom(mark);
  }
}

// ---------------------------------------------------------------------------------------------
// Report.

const n = (/** @type {number | null | undefined} */ x, digits = 0) =>
  x === null || x === undefined ? 'n/a' : x.toFixed(digits);

/**
 * @param {EngineResult[]} results
 * @param {MachineInfo} meta
 */
function report(results, meta) {
  const rows = [
    ['engine', 'side', 'spans/s', 'req/s', 'p50 ms', 'p99 ms', 'CPU ms/req', 'vs batch'],
  ];
  const notes = [];
  for (const r of results) {
    if (r.skipped) {
      notes.push(`${r.engine}: SKIPPED (${r.skipped})`);
      continue;
    }
    if (!r.median) {
      notes.push(`${r.engine}: FAILED (${r.error})`);
      continue;
    }
    // with medians, the engine was measured: every figure is there
    for (const side of CFG.sides) {
      const m = r.median[side];
      const ratio = /** @type {MeasuredEngine} */ (r).ratios[side];
      rows.push([
        r.engine,
        `${side} MEDIAN`,
        n(m.spansPerSec),
        n(m.requestsPerSec, 1),
        n(m.p50Ms, 1),
        n(m.p99Ms, 1),
        n(m.serverCpuMsPerRequest, 2),
        ratio ? n(ratio.ofMedians, 2) : '(baseline)',
      ]);
    }
    for (const [side, ratio] of Object.entries(/** @type {MeasuredEngine} */ (r).ratios))
      notes.push(
        `${r.engine}: ${side} spans/s over batch events/s = ${n(ratio.ofMedians, 2)} ` +
          `(per round ${ratio.perRound.map((x) => n(x, 2)).join(', ')})` +
          (side === 'otlp-protobuf'
            ? `; target >= ${CFG.targetRatio}: ${r.meetsTarget ? 'met' : 'MISSED'}`
            : ''),
      );
    notes.push(
      `${r.engine}: load average ${/** @type {MeasuredEngine} */ (r).loadAvgBefore.join(' ')} before, ${/** @type {MeasuredEngine} */ (r).loadAvgAfter.join(' ')} after; ` +
        `stored ${CFG.sides.map((s) => `${s} ${/** @type {MeasuredEngine} */ (r).stored[s].events}/${/** @type {MeasuredEngine} */ (r).stored[s].expected}`).join(', ')}`,
    );
    for (const w of /** @type {MeasuredEngine} */ (r).warnings) notes.push(`${r.engine}: !!! ${w}`);
  }
  console.log(
    `\nFlightlog OTLP benchmark — ${meta.date}, node ${meta.node}, ${meta.cpuModel} x ${meta.cores}\n` +
      `traces of ${CFG.spansPerTrace} spans, one per request, gzip; ${CFG.rounds} rounds x ${CFG.seconds} s ` +
      `per side, ${CFG.connections} connections\n`,
  );
  console.log(rows.length > 1 ? textTable(rows) : '(nothing measured)');
  console.log(`\n${notes.join('\n')}`);
}

async function main() {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run npm run build first`);
  // and, at the end, how long the run took
  const meta = /** @type {MachineInfo & { totalSeconds?: number }} */ (machineInfo(ROOT));
  console.log(
    `Flightlog OTLP benchmark: engines ${CFG.engines.join(', ')}; sides ${CFG.sides.join(', ')}; ` +
      `${CFG.rounds} rounds x ${CFG.seconds} s per side (+ ${CFG.warmupSeconds} s warm-up); ` +
      `planned ~${CFG.plannedSeconds} s, timeout ${CFG.timeoutSeconds} s`,
  );
  const started = performance.now();
  /** @type {EngineResult[]} */
  const results = [];
  for (const engine of CFG.engines) results.push(await benchEngine(engine));
  meta.totalSeconds = Math.round((performance.now() - started) / 100) / 10;
  report(results, meta);
  writeJsonAtomic(RESULTS_FILE, {
    ...meta,
    config: { ...CFG, databaseUrl: redactUrl(CFG.databaseUrl) },
    engines: Object.fromEntries(results.map((r) => [r.engine, r])),
  });
  console.log(`\nwrote ${RESULTS_FILE} (total ${meta.totalSeconds} s)`);
}

await runBenchmark(lifecycle, main);
