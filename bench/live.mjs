// Live-stream benchmark: how fast and how cheaply the real Flightlog server delivers an agent's
// batches over Server-Sent Events (GET /v1/agents/:id/live), next to bare baselines measured in
// the same run.
//
// For each bus engine (memory; redis at BENCH_REDIS_URL with a LIVE_REDIS_PREFIX of its own,
// skipped loudly when unreachable) it starts the built server as a child process, on PostgreSQL
// (BENCH_DATABASE_URL, a fresh DATABASE_SCHEMA dropped afterwards) when reachable, else on PGlite
// (a fresh temporary DATA_DIR; it limits the ingest rate), creates agents and viewers through the
// admin API (identity JWTs are signed here with the server's JWT_SECRET), and measures:
//
//   idle      memory per idle stream: BENCH_IDLE_STREAMS (5,000) streams opened over raw TCP
//             sockets, spread over 10 users x 10 agents that get no traffic; (RSS after - RSS
//             before) / streams, RSS being the server's own /metrics
//             process_resident_memory_bytes, each reading the median of 3 taken 250 ms apart after
//             a 2 s settle. 200 streams are opened and closed first (warm-up), so the code paths
//             and their allocations exist before the "before" reading. GC cannot be triggered from
//             outside, so garbage in the heap is part of both readings.
//   delivery  BENCH_RATE (200) batches/s evenly paced (open loop) over BENCH_AGENTS (50) agents, one
//             SSE stream open per agent, BENCH_WARMUP_SECONDS (2) + BENCH_SECONDS (10). Per batch
//             it records the scheduled send time, the 202, and each arrival on a stream (SSE is
//             parsed here, over node:http). "from 202" = arrival - 202 received (signed: the server
//             writes the SSE message before it answers the POST, so a message may arrive first);
//             "from send" = arrival - scheduled send time (includes the POST itself: HTTP, inflate,
//             validation, the database commit). Every accepted batch must arrive exactly once, on
//             its own agent's stream: lost / duplicated / misrouted / unknown messages are counted.
//   replay    1000 batches posted to one fresh agent (16 concurrent senders), then the time from
//             opening a new stream to receiving the 1000th replayed message, 3 connections one
//             after the other (median); each must replay exactly the 1000 posted batches. When the
//             server ends the replay (a replay larger than LIVE_MAX_QUEUE_BYTES, 1 MiB by default,
//             is cut as a "too slow" client however fast the client reads), that is reported, and
//             the replay is measured once more on a restarted server (same database and bus) with
//             LIVE_MAX_QUEUE_BYTES=64 MiB, so the figure exists alongside the failure.
//
// Order per bus: idle (on a server that has only been set up), delivery, replay. The machine may
// be shared: the CPU used during each delivery run is split (from /proc) into this benchmark and
// its children, PostgreSQL + Redis, kernel threads and other processes, and a run during which
// other processes used more than 25% of a core is flagged as disturbed.
//
// Batches are the ingest benchmark's: 1 trace + BENCH_EVENTS_PER_BATCH (20) llm_call events,
// gzip, fresh ids each; the SSE message of one is ~20 KB.
//
// Baselines, measured in the same run, on the same machine, with the same messages and client:
//
//   memory bus  delivery: a bare node:http server (this file run as a child with
//               --bare-sse-server): POST /publish/:agent inflates and parses the same gzip body,
//               writes the same `id/event: trace/data: <item JSON>` message to the agent's open
//               SSE responses, then answers 202. No auth, validation, database or bus.
//               replay: the same bare server replays the last 1000 messages it kept in memory.
//   redis bus   delivery: the bare bus, from this process: XADD (MAXLEN 1000, + EXPIRE, one
//               pipeline, as the server publishes) on one connection, one blocking XREAD loop
//               over the 50 agents' streams on another (as the server reads); "from 202" is from
//               the XADD reply. replay: the bare node:http server replaying from Redis (XRANGE of
//               the agent's stream in pages of 100, as the service reads it, one SSE write per
//               entry); the XRANGE alone is shown too.
//   idle        a bare node:http server (child process) holding BENCH_IDLE_STREAMS idle SSE
//               responses open (headers + ": connected"), measured the same way (its /metrics
//               reports process_resident_memory_bytes from process.memoryUsage().rss).
//
// Ratios are service / baseline, "n/a" when the baseline figure is <= 0.05 (the signed "from 202"
// figures of the Redis baseline are below zero: XREAD delivers before the XADD reply arrives);
// the end-to-end ("from send") rows always have a ratio. Targets (from the issue): delivery p99
// (from the 202) < 50 ms, replay of 1000 < 250 ms, < 30 KB per idle stream (KiB here). It is a benchmark, not a test: nothing is asserted,
// anomalies (lost or duplicated messages, cut streams, non-2xx, server warnings) are printed
// loudly. Figures are printed and written to bench/results/live-latest.json. Bounded:
// BENCH_TIMEOUT_SECONDS (330) aborts the run; servers, child processes, sockets, Redis keys,
// schemas and data directories are released on every exit path. Loopback only.
//
// Env: BENCH_SECONDS (10), BENCH_WARMUP_SECONDS (2), BENCH_RATE (200), BENCH_AGENTS (50),
//      BENCH_IDLE_STREAMS (5000), BENCH_EVENTS_PER_BATCH (20), BENCH_TIMEOUT_SECONDS (330),
//      BENCH_BUSES (memory,redis), BENCH_DATABASE_URL (postgres://postgres@127.0.0.1:5432/test),
//      BENCH_REDIS_URL (redis://127.0.0.1:6379), BENCH_SERVER_NODE_ARGS (extra server node flags)

import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { gunzipSync, gzipSync } from 'node:zlib';
import {
  createItemFactory,
  createLifecycle,
  envNumber,
  machineInfo,
  percentiles,
  reachable,
  redactUrl,
  request,
  serveUntilParentGoes,
  spawnCli,
  startFlightlogServer,
  textTable,
  writeJsonAtomic,
} from './support.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SELF = fileURLToPath(import.meta.url);
const CLI = join(ROOT, 'packages/server/dist/cli.js');
const RESULTS_DIR = join(ROOT, 'bench/results');
const RESULTS_FILE = join(RESULTS_DIR, 'live-latest.json');
const BARE_FLAG = '--bare-sse-server';

const CFG = {
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

/**
 * @typedef {import('./support.mjs').Lifecycle} Lifecycle
 * @typedef {import('./support.mjs').ChildHandle} ChildHandle
 * @typedef {import('./support.mjs').ServerHandle} ServerHandle
 * @typedef {import('./support.mjs').Percentiles} Percentiles
 * @typedef {import('./support.mjs').MachineInfo} MachineInfo
 * @typedef {import('@flightlog/protocol').BufferBatchItem} BufferBatchItem
 * @typedef {import('ioredis').Redis} Redis
 */

/**
 * What a `catch` may hold, as far as the failure messages here read it (a thrown non-object
 * has no `message`, and the message falls back to the value itself).
 * @typedef {{ message?: string, stack?: string } | null | undefined} Thrown
 */

// ---------------------------------------------------------------------------------------------
// Lifecycle: every child, socket and temporary resource is released on every exit path (made in
// main(): the bare server child has none).

// Typed as always there: main() sets it first thing, before anything can need a cleanup. The
// explicit undefined (what a bare `let` holds anyway) lets the checker see it initialised where
// the module's top level uses it after main().
let lifecycle = /** @type {Lifecycle} */ (/** @type {unknown} */ (undefined));

/**
 * An idle stream's socket; `closedByUs` tells our own closes from the server's.
 * @typedef {net.Socket & { closedByUs?: boolean }} RawSocket
 */

/** @type {Set<RawSocket>} */
const openSockets = new Set();

// ---------------------------------------------------------------------------------------------
// Synthetic data: the ingest benchmark's batches (1 trace + N llm_call events).

/** @type {() => string} ulidx's monotonic factory, loaded in main() */
let ulid;

/** @type {ReturnType<typeof createItemFactory>} made in main(), once ulid is loaded */
let makeItem;

/**
 * One batch as sent and as expected back: `traceId` finds it again when its SSE message arrives.
 * @typedef {object} Batch
 * @property {number} agentIdx the agent (and stream) it belongs to
 * @property {string} traceId
 * @property {string} itemJson the SSE data the server should deliver
 * @property {Buffer} gz the gzip request body
 * @property {number} jsonBytes
 */

/**
 * One batch for agent `agentIdx`: its item's JSON (the SSE data) and the gzip request body.
 * @param {number} agentIdx
 * @param {string} agentId
 * @returns {Batch}
 */
function makeBatch(agentIdx, agentId) {
  const item = makeItem(agentId);
  const itemJson = JSON.stringify(item);
  const json = `{"batchId":"${ulid()}","items":[${itemJson}]}`;
  return { agentIdx, traceId: item.trace.id, itemJson, gz: gzipSync(json), jsonBytes: json.length };
}

const TRACE_ID = /^\{"trace":\{"id":"([^"]+)"/;
/**
 * The trace id of an SSE `trace` message (every batch here has a trace of its own).
 * @param {string} data
 * @returns {string | undefined}
 */
function traceIdOf(data) {
  const match = TRACE_ID.exec(data.slice(0, 200));
  if (match) return match[1];
  try {
    return /** @type {{ trace?: { id?: string } } | null} */ (JSON.parse(data))?.trace?.id;
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// Small helpers.

/**
 * @param {readonly (number | null | undefined)[]} values
 * @returns {number | null}
 */
const median = (values) => {
  const sorted = values
    .filter(/** @returns {v is number} */ (v) => v !== null && v !== undefined)
    .sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const mid = Math.floor(sorted.length / 2);
  // mid and mid - 1 are within the non-empty list. prettier would move the first cast's comment
  // out of the parentheses, making it a cast of the sum (and sorted[mid - 1] unchecked).
  // prettier-ignore
  return sorted.length % 2
    ? /** @type {number} */ (sorted[mid])
    : (/** @type {number} */ (sorted[mid - 1]) + /** @type {number} */ (sorted[mid])) / 2;
};

/**
 * How a send ended: `status` 202 is accepted, 0 a failure (`error`); `tReply` is when the answer
 * (or the failure) arrived, on performance.now()'s clock.
 * @typedef {{ status: number, tReply: number, error?: unknown }} SendResult
 */

/**
 * POST over node:http (keep-alive agent); resolves when the whole answer is in, never rejects.
 * @param {string} url
 * @param {Buffer} body
 * @param {Record<string, string>} headers
 * @param {http.Agent} agent
 * @returns {Promise<SendResult>}
 */
function post(url, body, headers, agent) {
  return new Promise((resolve) => {
    const req = http.request(
      url,
      { method: 'POST', agent, headers: { ...headers, 'content-length': body.length } },
      (res) => {
        res.resume();
        res.on('end', () =>
          // statusCode is always set on a client's response (only a server's request lacks it)
          resolve({ status: /** @type {number} */ (res.statusCode), tReply: performance.now() }),
        );
        res.on('error', (error) => resolve({ status: 0, error, tReply: performance.now() }));
      },
    );
    req.setTimeout(10_000, () => req.destroy(new Error('timeout')));
    req.on('error', (error) => resolve({ status: 0, error, tReply: performance.now() }));
    req.end(body);
  });
}

/**
 * Runs `fire(i, due)` for i = 0..count-1, request i due at start + i / rate (open loop).
 * @param {number} rate per second
 * @param {number} count
 * @param {(i: number, due: number) => void} fire
 * @returns {Promise<number>} the start, on performance.now()'s clock
 */
async function paced(rate, count, fire) {
  const interval = 1000 / rate;
  const start = performance.now();
  let i = 0;
  while (i < count) {
    const now = performance.now();
    while (i < count && start + i * interval <= now) {
      fire(i, start + i * interval);
      i++;
    }
    if (i >= count) break;
    await sleep(Math.max(0, start + i * interval - performance.now()));
  }
  return start;
}

/**
 * Runs `task(i)` for i = 0..count-1 with at most `concurrency` at a time.
 * @param {number} count
 * @param {number} concurrency
 * @param {(i: number) => Promise<void>} task
 */
async function pool(count, concurrency, task) {
  let next = 0;
  const worker = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
}

// ---------------------------------------------------------------------------------------------
// SSE client over node:http: the stream's messages with the time their last byte arrived.

/**
 * One SSE message as dispatched (`event` defaults to "message").
 * @typedef {{ id: string | undefined, event: string, data: string }} SseMessage
 */

/** @typedef {(message: SseMessage, now: number) => void} OnSseMessage */

/**
 * An open SSE stream: what arrived on it and how it ended.
 * @typedef {object} SseStream
 * @property {number | undefined} status
 * @property {boolean} ended
 * @property {number | undefined} endedAt
 * @property {number} comments
 * @property {number} warnings `warning` messages (the server's, e.g. a client too slow)
 * @property {number} bytes
 * @property {boolean} [closing] set by close(): an end we caused is not the server's
 * @property {Error} [error] the request's error, when it ended the stream
 * @property {() => void} [onEnd] called once when the stream ends, however it ends
 * @property {() => void} close
 */

/**
 * Opens a stream; resolves once the answer is 200, rejects on another status or no answer.
 * @param {string} url
 * @param {Record<string, string>} headers
 * @param {{ agent: http.Agent, onMessage: OnSseMessage, timeoutMs?: number }} options
 * @returns {Promise<SseStream>}
 */
function openSse(url, headers, { agent, onMessage, timeoutMs = 15_000 }) {
  return new Promise((resolve, reject) => {
    /** @type {SseStream} */
    const stream = {
      status: undefined,
      ended: false,
      endedAt: undefined,
      comments: 0,
      warnings: 0,
      bytes: 0,
      close() {
        stream.closing = true;
        req.destroy();
      },
    };
    const req = http.request(url, {
      method: 'GET',
      agent,
      headers: { accept: 'text/event-stream', ...headers },
    });
    let settled = false;
    const timer = setTimeout(
      () => req.destroy(new Error(`no answer in ${timeoutMs} ms`)),
      timeoutMs,
    );
    const dispatch = (/** @type {string} */ block, /** @type {number} */ now) => {
      /** @type {string | undefined} */
      let id;
      let event = 'message';
      /** @type {string | undefined} */
      let data;
      for (const line of block.split('\n')) {
        if (line === '') continue;
        if (line.charCodeAt(0) === 58 /* ':' */) {
          stream.comments++;
          continue;
        }
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? '' : line.slice(colon + 1);
        if (value.charCodeAt(0) === 32) value = value.slice(1);
        if (field === 'data') data = data === undefined ? value : `${data}\n${value}`;
        else if (field === 'event') event = value;
        else if (field === 'id') id = value;
      }
      if (data === undefined) return;
      if (event === 'warning') stream.warnings++;
      onMessage({ id, event, data }, now);
    };
    req.on('response', (res) => {
      clearTimeout(timer);
      stream.status = res.statusCode;
      if (res.statusCode !== 200) {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (body += c));
        res.on('end', () => {
          settled = true;
          reject(new Error(`GET ${new URL(url).pathname} answered ${res.statusCode}: ${body}`));
        });
        return;
      }
      res.setEncoding('utf8');
      let buffer = '';
      res.on('data', (chunk) => {
        const now = performance.now();
        stream.bytes += chunk.length;
        buffer += chunk;
        let at;
        while ((at = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, at);
          buffer = buffer.slice(at + 2);
          dispatch(block, now);
        }
      });
      const ended = () => {
        if (stream.ended) return;
        stream.ended = true;
        stream.endedAt = performance.now();
        stream.onEnd?.();
      };
      res.on('end', ended);
      res.on('close', ended);
      res.on('error', ended);
      settled = true;
      resolve(stream);
    });
    req.on('error', (error) => {
      clearTimeout(timer);
      if (!settled) {
        settled = true;
        reject(error);
      } else if (!stream.ended) {
        stream.ended = true;
        stream.endedAt = performance.now();
        stream.error = error;
        stream.onEnd?.();
      }
    });
    req.end();
  });
}

/**
 * Streams the server closed, of those one measureIdle() opened.
 * @typedef {{ closedByServer: number }} IdleTally
 */

/**
 * An idle stream over a raw TCP socket (no client-side HTTP objects): resolves once the answer
 * is 200 and `: connected` has arrived; later data (heartbeats) is read and dropped.
 * @param {number} port
 * @param {string} path
 * @param {Record<string, string>} headers
 * @param {IdleTally} tally
 * @returns {Promise<RawSocket>}
 */
function openRawStream(port, path, headers, tally) {
  return new Promise((resolve, reject) => {
    /** @type {RawSocket} */
    const socket = net.connect({ host: '127.0.0.1', port });
    openSockets.add(socket);
    let head = '';
    let settled = false;
    const fail = (/** @type {Error} */ error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      openSockets.delete(socket);
      reject(error);
    };
    const timer = setTimeout(() => fail(new Error(`GET ${path}: no answer in 15 s`)), 15_000);
    socket.on('connect', () => {
      let text = `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAccept: text/event-stream\r\n`;
      for (const [name, value] of Object.entries(headers)) text += `${name}: ${value}\r\n`;
      socket.write(`${text}\r\n`);
    });
    socket.on('data', (chunk) => {
      if (settled) return;
      head += chunk.toString('latin1');
      if (!head.startsWith('HTTP/1.1 200')) {
        const end = head.indexOf('\r\n\r\n');
        if (end >= 0 && head.length > end + 4)
          fail(
            new Error(
              `GET ${path}: ${head.slice(0, head.indexOf('\r\n'))} ${head.slice(end + 4, end + 300)}`,
            ),
          );
        return;
      }
      if (head.includes(': connected')) {
        settled = true;
        clearTimeout(timer);
        resolve(socket);
      }
    });
    socket.on('error', (error) => fail(error));
    socket.on('close', () => {
      openSockets.delete(socket);
      if (!settled) fail(new Error(`GET ${path}: closed before the stream opened`));
      else if (!socket.closedByUs) tally.closedByServer++;
    });
  });
}

/** @param {Iterable<RawSocket>} sockets */
function closeRaw(sockets) {
  for (const socket of sockets) {
    socket.closedByUs = true;
    socket.destroy();
    openSockets.delete(socket);
  }
}

// ---------------------------------------------------------------------------------------------
// Child processes: the server, and the bare SSE server (this file with --bare-sse-server).

/**
 * The server on a free port (support.mjs), with room for every stream this benchmark opens.
 * @param {Record<string, string>} serverEnv
 * @returns {Promise<ServerHandle>}
 */
function startServer(serverEnv) {
  return startFlightlogServer(lifecycle, {
    cli: CLI,
    cwd: ROOT,
    env: {
      ...serverEnv,
      LIVE_MAX_STREAMS_PER_USER: String(CFG.idleStreams + CFG.agents + 100),
    },
  });
}

/**
 * The bare SSE server child, with the address it printed.
 * @typedef {ChildHandle & { port: number, base: string }} BareServer
 */

/**
 * @param {RunRedis | undefined} redis the bus's Redis, to replay from (else from memory)
 * @returns {Promise<BareServer>}
 */
async function startBareServer(redis) {
  // port and base are set below, once the child has printed its port. The options are cast as
  // support.mjs types `env` as required, though spawnCli works without it (nothing to add).
  const bare = /** @type {BareServer} */ (
    spawnCli(
      lifecycle,
      /** @type {Parameters<typeof spawnCli>[1]} */ ({
        cli: SELF,
        cwd: ROOT,
        args: redis ? [BARE_FLAG, redis.url, redis.prefix] : [BARE_FLAG],
        tag: 'bare',
        stdin: 'pipe',
      }),
    )
  );
  const [, port] = await bare.waitFor(/"port":(\d+)/, 10_000);
  bare.port = Number(port);
  bare.base = `http://127.0.0.1:${port}`;
  return bare;
}

/**
 * Figures of one /metrics page; null where the page lacks the metric (the bare server reports
 * only memory).
 * @typedef {object} MetricsReading
 * @property {number | null} rss
 * @property {number | null} heapUsed
 * @property {number | null} external
 * @property {number | null} publishFailures
 * @property {number | null} cpuSeconds
 * @property {number} accepted batches accepted so far, 0 when not reported
 */

/**
 * Memory figures from a /metrics page (the service's prom-client, or the bare server's).
 * @param {string} metricsUrl
 * @returns {Promise<MetricsReading>}
 */
async function readMemory(metricsUrl) {
  const { status, text } = await request('GET', metricsUrl);
  if (status !== 200) throw new Error(`${metricsUrl} answered ${status}`);
  const value = (/** @type {string} */ name) => {
    const match = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
    return match ? Number(match[1]) : null;
  };
  return {
    rss: value('process_resident_memory_bytes'),
    heapUsed: value('nodejs_heap_size_used_bytes'),
    external: value('nodejs_external_memory_bytes'),
    publishFailures: value('flightlog_live_publish_failures_total'),
    cpuSeconds: value('process_cpu_seconds_total'),
    accepted:
      Number(/^flightlog_batches_total\{outcome="accepted"\} (\S+)$/m.exec(text)?.[1] ?? 0) || 0,
  };
}

/**
 * A server's memory, settled. Both /metrics pages measured (prom-client's default metrics, the
 * bare server's own) report RSS and heap, so those are never null.
 * @typedef {{ rss: number, heapUsed: number, external: number | null }} MemoryFigures
 */

/**
 * After a settle: the median of 3 readings 250 ms apart.
 * @param {string} metricsUrl
 * @returns {Promise<MemoryFigures>}
 */
async function settledMemory(metricsUrl) {
  await sleep(CFG.settleMs);
  /** @type {MetricsReading[]} */
  const readings = [];
  for (let i = 0; i < 3; i++) {
    if (i > 0) await sleep(250);
    readings.push(await readMemory(metricsUrl));
  }
  const pickMedian = (/** @type {'rss' | 'heapUsed' | 'external'} */ key) =>
    median(readings.map((r) => r[key]));
  return {
    rss: /** @type {number} */ (pickMedian('rss')),
    heapUsed: /** @type {number} */ (pickMedian('heapUsed')),
    external: pickMedian('external'),
  };
}

// ---------------------------------------------------------------------------------------------
// Who used the CPU during a measurement (Linux /proc; the machine may be shared): this benchmark
// and its children, PostgreSQL + Redis, and everything else.

const CLOCK_TICKS = 100; // USER_HZ, 100 on Linux
const INFRA = new Set(['postgres', 'redis-server']);

/**
 * Every process's CPU ticks so far, by pid, at `at` (performance.now()).
 * @typedef {{ at: number, byPid: Map<number, { comm: string, kernel: boolean, ticks: number }> }}
 *   CpuSnapshot
 */

/** @returns {CpuSnapshot | null} null where there is no /proc */
function cpuSnapshot() {
  /** @type {CpuSnapshot['byPid']} */
  const byPid = new Map();
  let names;
  try {
    names = readdirSync('/proc');
  } catch {
    return null;
  }
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const comm = stat.slice(stat.indexOf('(') + 1, close);
      const fields = stat.slice(close + 2).split(' ');
      const kernel = Number(name) === 2 || fields[1] === '2'; // kthreadd and its children
      byPid.set(Number(name), { comm, kernel, ticks: Number(fields[11]) + Number(fields[12]) });
    } catch {
      // the process ended meanwhile
    }
  }
  return { at: performance.now(), byPid };
}

/**
 * CPU used during a measurement, in % of one core; `topOthers` names the busiest other processes.
 * @typedef {object} CpuUse
 * @property {number} seconds
 * @property {number} oursPercent this benchmark and its children
 * @property {number} postgresRedisPercent
 * @property {number} kernelThreadsPercent
 * @property {number} otherPercent
 * @property {string[]} topOthers
 */

/**
 * CPU used between two snapshots, in % of one core, by ours / postgres+redis / kernel threads /
 * other processes (processes that ended in between are missed).
 * @param {CpuSnapshot | null} a
 * @param {CpuSnapshot | null} b
 * @returns {CpuUse | null}
 */
function cpuBetween(a, b) {
  if (!a || !b) return null;
  const ours = new Set([process.pid, ...[...lifecycle.children].map((c) => c.pid)]);
  const seconds = (b.at - a.at) / 1000;
  const used = { ours: 0, infra: 0, kernel: 0, other: 0 };
  /** @type {Record<string, number>} */
  const others = {};
  for (const [pid, p] of b.byPid) {
    const before = a.byPid.get(pid);
    const ticks = p.ticks - (before && before.comm === p.comm ? before.ticks : 0);
    if (ticks <= 0) continue;
    if (ours.has(pid)) used.ours += ticks;
    else if (INFRA.has(p.comm)) used.infra += ticks;
    else if (p.kernel) used.kernel += ticks;
    else {
      used.other += ticks;
      others[p.comm] = (others[p.comm] ?? 0) + ticks;
    }
  }
  const pct = (/** @type {number} */ ticks) => (ticks / CLOCK_TICKS / seconds) * 100;
  return {
    seconds,
    oursPercent: pct(used.ours),
    postgresRedisPercent: pct(used.infra),
    kernelThreadsPercent: pct(used.kernel),
    otherPercent: pct(used.other),
    topOthers: Object.entries(others)
      .sort((x, y) => y[1] - x[1])
      .slice(0, 3)
      .map(([comm, ticks]) => `${comm} ${pct(ticks).toFixed(0)}%`),
  };
}
const fmtCpu = (/** @type {CpuUse | null} */ c) =>
  c
    ? `CPU (% of a core): bench+server ${c.oursPercent.toFixed(0)}, postgres+redis ${c.postgresRedisPercent.toFixed(0)}, kernel threads ${c.kernelThreadsPercent.toFixed(0)}, other processes ${c.otherPercent.toFixed(0)}` +
      (c.topOthers.length ? ` (${c.topOthers.join(', ')})` : '')
    : 'CPU n/a';

// ---------------------------------------------------------------------------------------------
// Measurements.

/**
 * Where measureIdle() opens stream i, as whom, and whose memory it reads.
 * @typedef {object} IdleTarget
 * @property {number} port
 * @property {string} metricsUrl
 * @property {(i: number) => string} pathFor
 * @property {(i: number) => Record<string, string>} headersFor
 */

/**
 * One server's idle-stream figures: memory before and after opening `streams`.
 * @typedef {object} IdleResult
 * @property {number} streams
 * @property {number} openSeconds
 * @property {number} opensPerSec
 * @property {MemoryFigures} before
 * @property {MemoryFigures} after
 * @property {number} kibPerStream RSS
 * @property {number} heapKibPerStream
 * @property {number} closedByServer streams the server closed while they were held
 */

/**
 * Idle streams: server RSS after - before, per stream.
 * @param {string} label
 * @param {IdleTarget} target
 * @returns {Promise<IdleResult>}
 */
async function measureIdle(label, { port, metricsUrl, pathFor, headersFor }) {
  /** @type {IdleTally} */
  const tally = { closedByServer: 0 };
  const openMany = async (/** @type {number} */ n) => {
    // every slot is filled once no open failed (else the open ones are closed, and it throws)
    /** @type {RawSocket[]} */
    const sockets = new Array(n);
    /** @type {Error[]} openRawStream() rejects with Errors only */
    const errors = [];
    await pool(n, 64, async (i) => {
      try {
        sockets[i] = await openRawStream(port, pathFor(i), headersFor(i), tally);
      } catch (error) {
        errors.push(/** @type {Error} */ (error));
      }
    });
    if (errors.length > 0) {
      closeRaw(sockets.filter(Boolean));
      throw new Error(
        `${errors.length} of ${n} idle streams failed to open; first: ${
          /** @type {Error} */ (errors[0]).message
        }`,
      );
    }
    return sockets;
  };
  closeRaw(await openMany(CFG.idleWarmup));
  await sleep(500);
  const before = await settledMemory(metricsUrl);
  const t0 = performance.now();
  const sockets = await openMany(CFG.idleStreams);
  const openSeconds = (performance.now() - t0) / 1000;
  const after = await settledMemory(metricsUrl);
  const closedByServer = tally.closedByServer;
  closeRaw(sockets);
  await sleep(500);
  const n = CFG.idleStreams;
  const result = {
    streams: n,
    openSeconds,
    opensPerSec: n / openSeconds,
    before,
    after,
    kibPerStream: (after.rss - before.rss) / n / 1024,
    heapKibPerStream: (after.heapUsed - before.heapUsed) / n / 1024,
    closedByServer,
  };
  console.log(
    `   idle ${label.padEnd(30)} ${result.kibPerStream.toFixed(1).padStart(6)} KiB/stream RSS ` +
      `(heap ${result.heapKibPerStream.toFixed(1)} KiB), RSS ${mib(before.rss)} -> ${mib(after.rss)} MiB, ` +
      `${Math.round(result.opensPerSec)} opens/s` +
      (closedByServer ? `  !!! ${closedByServer} streams closed by the server` : ''),
  );
  return result;
}
const mib = (/** @type {number} */ bytes) => (bytes / 2 ** 20).toFixed(0);

/**
 * Called for each message on agent `agentIdx`'s stream (`traceId` undefined: unreadable).
 * @typedef {(agentIdx: number, traceId: string | undefined, now: number) => void} OnArrive
 */

/**
 * The streams of one delivery run: `ended` counts those that ended before close(), `warnings`
 * the `warning` messages on them. close() may return what finishes it (the bare bus's loop).
 * @typedef {{ close: () => unknown, ended: () => number, warnings: () => number }} OpenStreams
 */

/**
 * One side of a delivery comparison: the service, or a bare baseline.
 * @typedef {object} Transport
 * @property {(onArrive: OnArrive) => Promise<OpenStreams>} open
 * @property {(batch: Batch) => Promise<SendResult>} send
 */

/**
 * One batch of a delivery run: when it was due, its answer, each arrival on a stream.
 * @typedef {object} DeliveryRecord
 * @property {number} i
 * @property {number} agentIdx
 * @property {number} due
 * @property {number | undefined} tReply undefined until its send has ended
 * @property {number | undefined} status
 * @property {number[]} arrivals
 * @property {number} wrongStream arrivals on another agent's stream
 */

/**
 * One side's delivery figures (times in ms); the service's also get the server's own counts.
 * @typedef {object} DeliveryResult
 * @property {number} rate
 * @property {number} agents
 * @property {number} sent
 * @property {number} sendSeconds
 * @property {number} sendRate
 * @property {number} accepted
 * @property {Percentiles} postLatency
 * @property {Record<string, number>} statusCodes
 * @property {number} sendErrors
 * @property {number} delivered
 * @property {number} lost
 * @property {number} duplicated
 * @property {number} extraCopies
 * @property {number} misrouted
 * @property {number} unknownMessages
 * @property {number} deliveredWithoutAccept
 * @property {number} beforeReply arrived before the 202
 * @property {{ sent: number, accepted: number, lost: number, duplicated: number,
 *   fromReply: Percentiles }} warmup
 * @property {CpuUse | null} cpu
 * @property {number} streamsEnded
 * @property {number} warnings
 * @property {Percentiles} fromReply
 * @property {Percentiles} fromSend
 * @property {number} [serverAccepted] the server's count, warm-up included
 * @property {number} [serverCpuPercent]
 * @property {number} [publishFailures]
 */

/**
 * Delivery at a paced rate over `agents` streams. `transport.open(onArrive)` opens one stream per
 * agent index and resolves to { close(), ended(), warnings() }; `transport.send(batch)` resolves
 * to { status, tReply } (status 202 = accepted).
 * @param {string} label
 * @param {Transport} transport
 * @param {Batch[]} batches
 * @param {number} warmupCount
 * @returns {Promise<DeliveryResult>}
 */
async function measureDelivery(label, transport, batches, warmupCount) {
  /** @type {DeliveryRecord[]} */
  const records = batches.map((b, i) => ({
    i,
    agentIdx: b.agentIdx,
    due: 0,
    tReply: undefined,
    status: undefined,
    arrivals: [],
    wrongStream: 0,
  }));
  const byTrace = new Map(batches.map((b, i) => [b.traceId, records[i]]));
  let unknown = 0;
  /** @type {OnArrive} */
  const onArrive = (agentIdx, traceId, now) => {
    const rec = traceId === undefined ? undefined : byTrace.get(traceId);
    if (!rec) {
      unknown++;
      return;
    }
    rec.arrivals.push(now);
    if (rec.agentIdx !== agentIdx) rec.wrongStream++;
  };
  const streams = await transport.open(onArrive);
  try {
    // Let the bus settle on the new subscriptions (the Redis reader adds a newly watched agent
    // to its blocking read when the current one returns, within its 1 s block).
    await sleep(1_200);
    /** @type {Set<Promise<void>>} */
    const pending = new Set();
    let sendErrors = 0;
    const cpuStart = cpuSnapshot();
    await paced(CFG.rate, batches.length, (i, due) => {
      // i < batches.length = records.length
      const rec = /** @type {DeliveryRecord} */ (records[i]);
      rec.due = due;
      const done = transport.send(/** @type {Batch} */ (batches[i])).then((r) => {
        rec.status = r.status;
        rec.tReply = r.tReply;
        if (r.error) sendErrors++;
      });
      pending.add(done);
      done.then(() => pending.delete(done));
    });
    const sentAt = performance.now();
    const cpu = cpuBetween(cpuStart, cpuSnapshot());
    await Promise.race([Promise.all(pending), sleep(15_000)]);
    // Wait (at most 5 s) for every accepted batch to arrive, then a little more for duplicates.
    const deadline = performance.now() + 5_000;
    while (performance.now() < deadline) {
      if (records.every((r) => r.status !== 202 || r.arrivals.length > 0)) break;
      await sleep(50);
    }
    await sleep(300);
    const sendSeconds = (sentAt - /** @type {DeliveryRecord} */ (records[0]).due) / 1000;
    const sendRate = records.length / sendSeconds;

    const measured = records.slice(warmupCount);
    const accepted = measured.filter((r) => r.status === 202);
    const delivered = accepted.filter((r) => r.arrivals.length > 0);
    // a delivered batch was accepted (its answer is in, tReply is set) and has arrived
    const fromReply = delivered.map(
      (r) => /** @type {number} */ (r.arrivals[0]) - /** @type {number} */ (r.tReply),
    );
    const fromSend = delivered.map((r) => /** @type {number} */ (r.arrivals[0]) - r.due);
    /** @type {Record<string, number>} by status; "undefined" for sends still pending */
    const statusCodes = {};
    for (const r of measured)
      statusCodes[String(r.status)] = (statusCodes[String(r.status)] ?? 0) + 1;
    const warm = records.slice(0, warmupCount);
    /** @type {DeliveryResult} */
    const result = {
      rate: CFG.rate,
      agents: new Set(batches.map((b) => b.agentIdx)).size,
      sent: measured.length,
      sendSeconds,
      sendRate,
      accepted: accepted.length,
      postLatency: percentiles(accepted.map((r) => /** @type {number} */ (r.tReply) - r.due)),
      statusCodes,
      sendErrors,
      delivered: delivered.length,
      lost: accepted.length - delivered.length,
      duplicated: accepted.filter((r) => r.arrivals.length > 1).length,
      extraCopies: accepted.reduce((s, r) => s + Math.max(0, r.arrivals.length - 1), 0),
      misrouted: records.reduce((s, r) => s + r.wrongStream, 0),
      unknownMessages: unknown,
      deliveredWithoutAccept: measured.filter((r) => r.status !== 202 && r.arrivals.length > 0)
        .length,
      beforeReply: fromReply.filter((x) => x < 0).length,
      warmup: {
        sent: warm.length,
        accepted: warm.filter((r) => r.status === 202).length,
        lost: warm.filter((r) => r.status === 202 && r.arrivals.length === 0).length,
        duplicated: warm.filter((r) => r.arrivals.length > 1).length,
        fromReply: percentiles(
          // tReply is unset (NaN here) only for a batch that arrived but whose POST never answered
          warm
            .filter((r) => r.arrivals.length > 0)
            .map((r) => /** @type {number} */ (r.arrivals[0]) - /** @type {number} */ (r.tReply)),
        ),
      },
      cpu,
      streamsEnded: streams.ended(),
      warnings: streams.warnings(),
      fromReply: percentiles(fromReply),
      fromSend: percentiles(fromSend),
    };
    const f = result.fromReply;
    const s = result.fromSend;
    console.log(
      `   delivery ${label.padEnd(26)} from 202: p50 ${fmt(f.p50)} p99 ${fmt(f.p99)} max ${fmt(f.max)} ms ` +
        `(${result.beforeReply} before the 202) | from send: p50 ${fmt(s.p50)} p99 ${fmt(s.p99)} ` +
        `max ${fmt(s.max)} ms | POST p50 ${fmt(result.postLatency.p50)} p99 ${fmt(result.postLatency.p99)} ms | ` +
        `${result.accepted}/${result.sent} accepted at ${result.sendRate.toFixed(0)}/s, lost ${result.lost}, ` +
        `dup ${result.duplicated}`,
    );
    console.log(`            ${fmtCpu(cpu)}`);
    return result;
  } finally {
    streams.close();
  }
}

/**
 * One replay connection that opened: ms until the last expected message (null: it never came,
 * `cut` when the server ended the stream first), from the request's start.
 * @typedef {object} ReplayRunDone
 * @property {undefined} [error]
 * @property {number | null} ms
 * @property {number} headersMs
 * @property {number | null} firstMs
 * @property {number} received
 * @property {number} missing
 * @property {number} duplicated
 * @property {boolean} cut
 * @property {number} bytes
 */

/**
 * A replay connection that could not open: why, and no figures.
 * @typedef {{ error: string } & { [K in Exclude<keyof ReplayRunDone, 'error'>]?: undefined }}
 *   ReplayRunFailed
 */

/** @typedef {ReplayRunDone | ReplayRunFailed} ReplayRun */

/**
 * How the replayed batches were posted: seconds for all, answers by status.
 * @typedef {{ seconds: number, statusCodes: Record<string, number> }} PostSummary
 */

/**
 * One side's replay figures; `medianMs` only when every connection got every message. `post`
 * is set by the caller once measured, `maxQueueBytes` on the raised-cap server's.
 * @typedef {object} ReplayResult
 * @property {number} messages
 * @property {ReplayRun[]} runs
 * @property {number | null} medianMs
 * @property {number} complete
 * @property {PostSummary} [post]
 * @property {number} [maxQueueBytes]
 */

/**
 * Replay: `connect(onMessage)` opens a new stream; time until the 1000th message, 3 times.
 * @param {string} label
 * @param {(onMessage: OnSseMessage) => Promise<SseStream>} connect
 * @param {string[]} expectedIds
 * @returns {Promise<ReplayResult>}
 */
async function measureReplay(label, connect, expectedIds) {
  /** @type {ReplayRun[]} */
  const runs = [];
  for (let k = 0; k < CFG.replayConnections; k++) {
    /** @type {Map<string | undefined, number>} */
    const seen = new Map();
    let count = 0;
    /** @type {number | undefined} */
    let firstAt;
    /** @type {number | undefined} */
    let doneAt;
    // set by the promise's executor, which runs at once
    /** @type {(() => void) | undefined} */
    let resolveDone;
    /** @type {Promise<void>} */
    const done = new Promise((resolve) => (resolveDone = resolve));
    const t0 = performance.now();
    /** @type {SseStream} */
    let stream;
    try {
      stream = await connect((m, now) => {
        if (m.event !== 'trace') return;
        count++;
        firstAt ??= now;
        const id = traceIdOf(m.data);
        seen.set(id, (seen.get(id) ?? 0) + 1);
        if (count === expectedIds.length) {
          doneAt = now;
          /** @type {() => void} */ (resolveDone)();
        }
      });
    } catch (error) {
      runs.push({ error: String(/** @type {Thrown} */ (error)?.message ?? error) });
      continue;
    }
    const headersAt = performance.now();
    stream.onEnd = resolveDone;
    if (stream.ended) /** @type {() => void} */ (resolveDone)();
    await Promise.race([done, sleep(20_000)]);
    // a little longer, to see messages beyond the 1000th (there should be none)
    if (doneAt !== undefined) await sleep(100);
    const endedEarly = doneAt === undefined && stream.ended;
    stream.close();
    const missing = expectedIds.filter((id) => !seen.has(id)).length;
    const run = {
      ms: doneAt === undefined ? null : doneAt - t0,
      headersMs: headersAt - t0,
      firstMs: firstAt === undefined ? null : firstAt - t0,
      received: count,
      missing,
      duplicated: [...seen.values()].filter((n) => n > 1).length,
      cut: endedEarly,
      bytes: stream.bytes,
    };
    runs.push(run);
    await sleep(200);
  }
  const complete = runs.filter((r) => r.ms !== null && !r.error);
  /** @type {ReplayResult} */
  const result = {
    messages: expectedIds.length,
    runs,
    medianMs: complete.length === runs.length ? median(complete.map((r) => r.ms)) : null,
    complete: complete.length,
  };
  console.log(
    `   replay   ${label.padEnd(26)} ` +
      runs
        .map((r) =>
          r.error
            ? `FAILED (${r.error})`
            : r.ms === null
              ? `!!! ${r.cut ? 'CUT by the server' : 'timed out'} after ${r.received} messages`
              : // openSse's errors all have a message (no error: it opened, ms is set), and the
                // first message came before the last
                `${/** @type {number} */ (r.ms).toFixed(1)} ms (first ${
                  /** @type {number} */ (r.firstMs).toFixed(1)
                })` +
                (r.missing || r.duplicated ? ` !!! missing ${r.missing} dup ${r.duplicated}` : ''),
        )
        .join(', ') +
      (result.medianMs !== null ? ` -> median ${result.medianMs.toFixed(1)} ms` : ''),
  );
  return result;
}

const fmt = (/** @type {number | null | undefined} */ ms) =>
  ms === null || ms === undefined ? 'n/a' : ms.toFixed(1);

/**
 * An agent as the admin API creates it (201): its id and its API key, shown once.
 * @typedef {{ agentId: string, apiKey: string, verifyToken: string }} CreatedAgent
 */

/**
 * Agents, viewer roles and identity tokens on one running server.
 * @param {ServerHandle} server
 * @param {typeof import('jose').SignJWT} SignJWT
 */
function adminClient(server, SignJWT) {
  const admin = {
    authorization: `Bearer ${server.adminToken}`,
    'content-type': 'application/json',
  };
  const secret = Buffer.from(server.jwtSecret, 'utf8');
  return {
    /** @returns {Promise<CreatedAgent>} */
    async createAgent() {
      const { status, text } = await request('POST', `${server.base}/admin/v1/agents`, {
        headers: admin,
        body: '{}',
      });
      if (status !== 201) throw new Error(`agent creation answered ${status}: ${text}`);
      return JSON.parse(text);
    },
    /**
     * Makes `userId` a viewer of the agent.
     * @param {string} agentId
     * @param {string} userId
     */
    async grant(agentId, userId) {
      const { status, text } = await request(
        'PUT',
        `${server.base}/admin/v1/agents/${agentId}/members/${userId}`,
        { headers: admin, body: '{"role":"viewer"}' },
      );
      if (status !== 200) throw new Error(`member grant answered ${status}: ${text}`);
    },
    tokenFor: (/** @type {string} */ sub) =>
      new SignJWT({})
        .setProtectedHeader({ alg: 'HS256' })
        .setSubject(sub)
        .setIssuedAt()
        .setExpirationTime('2h')
        .sign(secret),
  };
}

// ---------------------------------------------------------------------------------------------
// One bus end to end.

/**
 * The modules benchBus() needs, loaded once in main(), and the database the server runs on.
 * @typedef {object} BusDeps
 * @property {string} database 'postgres' or 'pglite'
 * @property {typeof import('pg').default} pg
 * @property {typeof import('ioredis').Redis} Redis
 * @property {typeof import('jose').SignJWT} SignJWT
 */

/**
 * The Redis of one redis-bus run: its key prefix (every key of the run is under it), a way to
 * open more connections, and one for plain commands.
 * @typedef {object} RunRedis
 * @property {string} url
 * @property {string} prefix
 * @property {(extra?: import('ioredis').RedisOptions) => Redis} newRedis
 * @property {Redis} commands
 */

/**
 * The idle comparison of one bus: service and bare baseline, and their ratio.
 * @typedef {{ service: IdleResult, baseline: IdleResult, baselineKind: string, ratio?: number }}
 *   IdleComparison
 */

/**
 * The delivery comparison of one bus; the baseline is measured after the service.
 * @typedef {{ service: DeliveryResult, baseline?: DeliveryResult, baselineKind?: string }}
 *   DeliveryComparison
 */

/**
 * The replay comparison of one bus: `serviceRaisedCap` when the default queue cap cut the
 * service's replay, `xrange` (the bus alone, ms) on Redis.
 * @typedef {object} ReplayComparison
 * @property {ReplayResult} service
 * @property {ReplayResult} baseline
 * @property {string} baselineKind
 * @property {ReplayResult} [serviceRaisedCap]
 * @property {{ runs: number[], medianMs: number | null }} [xrange]
 */

/**
 * One bus's results, as written to the results file: `skipped` when its Redis was unreachable,
 * `error` when it failed part-way (the figures up to there are kept).
 * @typedef {object} BusResult
 * @property {string} bus
 * @property {string} [skipped]
 * @property {string} [error]
 * @property {string[]} [warnings]
 * @property {string} [redisPrefix]
 * @property {number} [redisKeysRemoved]
 * @property {string} [schema]
 * @property {string} [database]
 * @property {number[]} [loadAvgBefore]
 * @property {number} [serverStartMs]
 * @property {IdleComparison} [idle]
 * @property {number} [messageBytes] mean SSE data of a batch
 * @property {number} [bodyGzipBytes] mean request body of a batch
 * @property {DeliveryComparison} [delivery]
 * @property {ReplayComparison} [replay]
 * @property {number[]} [loadAvgAfter]
 * @property {number | null} [serverRssBytesAtEnd]
 * @property {Awaited<ChildHandle['exited']>} [serverExit]
 * @property {Record<string, number>} [serverLog] the server's log lines by message
 * @property {string[]} [serverOutputTail]
 */

/**
 * @param {string} busName
 * @param {BusDeps} deps
 * @returns {Promise<BusResult>}
 */
async function benchBus(busName, deps) {
  const mark = lifecycle.mark();
  /** @type {BusResult & { warnings: string[] }} */
  const result = { bus: busName, warnings: [] };
  const warn = (/** @type {string} */ w) => {
    console.error(`  !!! WARNING ${busName}: ${w}`);
    result.warnings.push(w);
  };
  const sseAgent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const postAgent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  lifecycle.onCleanup(() => {
    sseAgent.destroy();
    postAgent.destroy();
  });
  try {
    const tag = randomBytes(4).toString('hex');
    /** @type {Record<string, string>} */
    const serverEnv = {};
    /** @type {RunRedis | undefined} set on the redis bus only */
    let redis;
    if (busName === 'redis') {
      const url = new URL(CFG.redisUrl);
      const port = Number(url.port || 6379);
      /** @type {string | undefined} why the bus is skipped */
      let reason;
      if (!(await reachable(url.hostname, port)))
        reason = `Redis at ${url.hostname}:${port} is unreachable`;
      else {
        const probe = new deps.Redis(CFG.redisUrl, {
          lazyConnect: true,
          connectTimeout: 2_000,
          maxRetriesPerRequest: 0,
          retryStrategy: () => null,
        });
        probe.on('error', () => {});
        try {
          await probe.connect();
          await probe.ping();
        } catch (error) {
          reason = `Redis at ${CFG.redisUrl} does not answer PING: ${
            /** @type {Thrown} */ (error)?.message ?? error
          }`;
        } finally {
          probe.disconnect();
        }
      }
      if (reason) {
        console.log(
          `\n${'!'.repeat(78)}\n!!! SKIPPING THE REDIS BUS: ${reason}\n${'!'.repeat(78)}`,
        );
        return { bus: busName, skipped: reason };
      }
      const prefix = `flightlog:bench-live:${tag}:`;
      result.redisPrefix = prefix;
      serverEnv.REDIS_URL = CFG.redisUrl;
      serverEnv.LIVE_REDIS_PREFIX = `${prefix}server:`;
      /** @type {RunRedis['newRedis']} */
      const newRedis = (extra = {}) => {
        const client = new deps.Redis(CFG.redisUrl, { maxRetriesPerRequest: 1, ...extra });
        client.on('error', () => {});
        return client;
      };
      redis = { url: CFG.redisUrl, prefix, newRedis, commands: newRedis() };
      lifecycle.onCleanup(async () => {
        // Remove every key of this run (server's, bare bus's, bare server's), then disconnect.
        const client = /** @type {RunRedis} */ (redis).commands;
        let cursor = '0';
        let removed = 0;
        do {
          const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
          cursor = next;
          if (keys.length > 0) removed += await client.del(...keys);
        } while (cursor !== '0');
        result.redisKeysRemoved = removed;
        client.disconnect();
      });
    } else if (busName !== 'memory') {
      throw new Error(`unknown bus "${busName}"`);
    }

    if (deps.database === 'postgres') {
      const schema = `bench_live_${tag}`;
      result.schema = schema;
      lifecycle.onCleanup(async () => {
        const client = new deps.pg.Client({ connectionString: CFG.databaseUrl });
        await client.connect();
        try {
          await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        } finally {
          await client.end();
        }
      });
      Object.assign(serverEnv, { DATABASE_URL: CFG.databaseUrl, DATABASE_SCHEMA: schema });
    } else {
      const dir = mkdtempSync(join(os.tmpdir(), 'flightlog-bench-live-'));
      lifecycle.onCleanup(() => rmSync(dir, { recursive: true, force: true }));
      serverEnv.DATA_DIR = dir;
    }
    result.database = deps.database;

    result.loadAvgBefore = os.loadavg().map((x) => Math.round(x * 100) / 100);
    console.log(
      `\n== ${busName} bus on ${deps.database}: starting server (load average ${result.loadAvgBefore.join(' ')})`,
    );
    const t0 = performance.now();
    const server = await startServer(serverEnv);
    result.serverStartMs = Math.round(performance.now() - t0);
    const ensureAlive = () => {
      if (!server.alive())
        throw new Error(`server died during the run:\n${server.output.lines.join('\n')}`);
    };
    const { createAgent, grant, tokenFor } = adminClient(server, deps.SignJWT);

    // Agents and users: delivery agents + the replay agent watched by one viewer; idle agents
    // watched by several idle users.
    const viewer = `bench-viewer-${tag}`;
    const viewerToken = await tokenFor(viewer);
    // filled by index (pool), every slot set before it is read: hence the casts of its items
    /** @type {CreatedAgent[]} */
    const agents = [];
    await pool(CFG.agents, 8, async (i) => {
      agents[i] = await createAgent();
      await grant(/** @type {CreatedAgent} */ (agents[i]).agentId, viewer);
    });
    const replayAgent = await createAgent();
    await grant(replayAgent.agentId, viewer);
    /** @type {CreatedAgent[]} */
    const idleAgents = [];
    const idleUsers = Array.from({ length: CFG.idleUsers }, (_, u) => `bench-idle-${tag}-${u}`);
    const idleTokens = await Promise.all(idleUsers.map(tokenFor));
    await pool(CFG.idleAgents, 4, async (g) => {
      idleAgents[g] = await createAgent();
      for (const user of idleUsers)
        await grant(/** @type {CreatedAgent} */ (idleAgents[g]).agentId, user);
    });
    const bare = await startBareServer(redis);

    // 1. Idle streams (first, on a server that has done nothing else yet but the set-up).
    const idleFor = (/** @type {number} */ i) => ({
      user: i % CFG.idleUsers,
      agent: Math.floor(i / CFG.idleUsers) % CFG.idleAgents,
    });
    result.idle = {
      service: await measureIdle('service', {
        port: server.port,
        metricsUrl: `${server.base}/metrics`,
        pathFor: (i) =>
          `/v1/agents/${/** @type {CreatedAgent} */ (idleAgents[idleFor(i).agent]).agentId}/live`,
        headersFor: (i) => ({ authorization: `Bearer ${idleTokens[idleFor(i).user]}` }),
      }),
      baseline: await measureIdle('bare node:http', {
        port: bare.port,
        metricsUrl: `${bare.base}/metrics`,
        pathFor: (i) => `/idle/${i % CFG.idleAgents}`,
        headersFor: () => ({}),
      }),
      baselineKind: 'bare node:http server holding idle SSE responses (child process)',
    };
    result.idle.ratio = result.idle.service.kibPerStream / result.idle.baseline.kibPerStream;
    ensureAlive();

    // 2. Delivery.
    const warmupCount = Math.round(CFG.rate * CFG.warmupSeconds);
    const count = warmupCount + Math.round(CFG.rate * CFG.seconds);
    const batches = Array.from({ length: count }, (_, i) =>
      makeBatch(i % CFG.agents, /** @type {CreatedAgent} */ (agents[i % CFG.agents]).agentId),
    );
    result.messageBytes = Math.round(batches.reduce((s, b) => s + b.itemJson.length, 0) / count);
    result.bodyGzipBytes = Math.round(batches.reduce((s, b) => s + b.gz.length, 0) / count);
    // the service's /metrics has prom-client's default metrics, process_cpu_seconds_total too
    /** @typedef {MetricsReading & { cpuSeconds: number }} ServiceMetrics */
    const metricsBefore = /** @type {ServiceMetrics} */ (
      await readMemory(`${server.base}/metrics`)
    );
    /**
     * Streams over SSE, one per agent index (the sending side is the caller's).
     * @param {(idx: number) => string} urlFor
     * @param {Record<string, string>} headers
     * @returns {Pick<Transport, 'open'>}
     */
    const sseTransport = (urlFor, headers) => ({
      async open(onArrive) {
        // Opened 8 at a time, as a dashboard opens its streams: all 50 of one user at once wait
        // in the service's fair admission behind its per-user queue, and past it answer 429.
        /** @type {SseStream[]} */
        const list = [];
        await pool(CFG.agents, 8, async (idx) => {
          list[idx] = await openSse(urlFor(idx), headers, {
            agent: sseAgent,
            onMessage: (m, now) => {
              if (m.event === 'trace') onArrive(idx, traceIdOf(m.data), now);
            },
          });
        });
        return {
          close: () => list.forEach((s) => s.close()),
          ended: () => list.filter((s) => s.ended && !s.closing).length,
          warnings: () => list.reduce((s, x) => s + x.warnings, 0),
        };
      },
    });
    /** @type {Transport} */
    const service = {
      ...sseTransport(
        (idx) =>
          `${server.base}/v1/agents/${/** @type {CreatedAgent} */ (agents[idx]).agentId}/live`,
        { authorization: `Bearer ${viewerToken}` },
      ),
      send: (b) =>
        post(
          `${server.base}/v1/traces/batch`,
          b.gz,
          {
            authorization: `Bearer ${/** @type {CreatedAgent} */ (agents[b.agentIdx]).apiKey}`,
            'content-type': 'application/json',
            'content-encoding': 'gzip',
          },
          postAgent,
        ),
    };
    /** @type {Transport} */
    const bareHttp = {
      ...sseTransport((idx) => `${bare.base}/live/a${idx}`, {}),
      send: (b) =>
        post(
          `${bare.base}/publish/a${b.agentIdx}`,
          b.gz,
          { 'content-type': 'application/json', 'content-encoding': 'gzip' },
          postAgent,
        ),
    };
    const deliveryStarted = performance.now();
    result.delivery = {
      service: await measureDelivery('service', service, batches, warmupCount),
    };
    ensureAlive();
    const metricsAfter = /** @type {ServiceMetrics} */ (await readMemory(`${server.base}/metrics`));
    result.delivery.service.serverAccepted = metricsAfter.accepted - metricsBefore.accepted;
    result.delivery.service.serverCpuPercent =
      ((metricsAfter.cpuSeconds - metricsBefore.cpuSeconds) /
        ((performance.now() - deliveryStarted) / 1000)) *
      100;
    result.delivery.service.publishFailures =
      (metricsAfter.publishFailures ?? 0) - (metricsBefore.publishFailures ?? 0);
    if (busName === 'memory') {
      result.delivery.baselineKind =
        'bare node:http server: POST inflates + parses the body, writes the SSE message, answers 202';
      result.delivery.baseline = await measureDelivery(
        'bare node:http',
        bareHttp,
        batches,
        warmupCount,
      );
    } else {
      result.delivery.baselineKind =
        'bare Redis bus from this process: XADD MAXLEN 1000 + EXPIRE pipeline -> blocking XREAD loop on another connection';
      // the redis bus (the only other one) has set `redis`
      const reader = /** @type {RunRedis} */ (redis).newRedis();
      const writer = /** @type {RunRedis} */ (redis).newRedis();
      lifecycle.onCleanup(() => {
        reader.disconnect();
        writer.disconnect();
      });
      const key = (/** @type {number} */ idx) =>
        `${/** @type {RunRedis} */ (redis).prefix}bare:a${idx}`;
      /** @type {Transport} */
      const bareBus = {
        async open(onArrive) {
          const keys = Array.from({ length: CFG.agents }, (_, idx) => key(idx));
          const ids = keys.map(() => '0-0');
          let stopped = false;
          const loop = (async () => {
            while (!stopped) {
              /** @type {Awaited<ReturnType<Redis['xread']>>} */
              let reply;
              try {
                reply = await reader.xread(
                  'COUNT',
                  1000,
                  'BLOCK',
                  1000,
                  'STREAMS',
                  ...keys,
                  ...ids,
                );
              } catch (error) {
                if (!stopped)
                  console.error(
                    `!!! bare XREAD failed: ${/** @type {Thrown} */ (error)?.message ?? error}`,
                  );
                return;
              }
              const now = performance.now();
              for (const [streamKey, entries] of reply ?? []) {
                const idx = keys.indexOf(streamKey);
                for (const [id, fields] of entries) {
                  ids[idx] = id;
                  // every entry here is written as ['d', <item JSON>]
                  onArrive(idx, traceIdOf(/** @type {string} */ (fields[1])), now);
                }
              }
            }
          })();
          return {
            close: () => {
              stopped = true;
              reader.disconnect();
              return loop;
            },
            ended: () => 0,
            warnings: () => 0,
          };
        },
        async send(b) {
          try {
            // exec() answers null only for an aborted MULTI, which a plain pipeline is not
            const results = /** @type {[error: Error | null, reply: unknown][]} */ (
              await writer
                .pipeline()
                .xadd(key(b.agentIdx), 'MAXLEN', '1000', '*', 'd', b.itemJson)
                .expire(key(b.agentIdx), 86_400)
                .exec()
            );
            const failed = results.find(([error]) => error);
            if (failed) return { status: 0, error: failed[0], tReply: performance.now() };
            return { status: 202, tReply: performance.now() };
          } catch (error) {
            return { status: 0, error, tReply: performance.now() };
          }
        },
      };
      result.delivery.baseline = await measureDelivery(
        'bare Redis bus',
        bareBus,
        batches,
        warmupCount,
      );
    }
    for (const [side, r] of Object.entries({
      service: result.delivery.service,
      baseline: result.delivery.baseline,
    })) {
      if (r.lost)
        warn(`delivery ${side}: ${r.lost} accepted batches never arrived on their stream`);
      if (r.duplicated)
        warn(
          `delivery ${side}: ${r.duplicated} batches arrived more than once (${r.extraCopies} extra copies)`,
        );
      if (r.misrouted)
        warn(`delivery ${side}: ${r.misrouted} messages arrived on another agent's stream`);
      if (r.unknownMessages)
        warn(`delivery ${side}: ${r.unknownMessages} messages of unknown batches`);
      if (r.accepted < r.sent)
        warn(
          `delivery ${side}: ${r.sent - r.accepted} of ${r.sent} sends not accepted ${JSON.stringify(r.statusCodes)}`,
        );
      if (r.streamsEnded) warn(`delivery ${side}: ${r.streamsEnded} streams ended during the run`);
      if (r.warnings) warn(`delivery ${side}: ${r.warnings} 'warning' messages on the streams`);
      if (r.cpu && r.cpu.otherPercent > 25)
        warn(
          `delivery ${side}: other processes on the machine used ${r.cpu.otherPercent.toFixed(0)}% of a core ` +
            `during the run (${r.cpu.topOthers.join(', ')}): figures are disturbed`,
        );
      if (r.warmup.lost || r.warmup.duplicated)
        warn(`delivery ${side} warm-up: ${r.warmup.lost} lost, ${r.warmup.duplicated} duplicated`);
    }
    if (result.delivery.service.publishFailures)
      warn(`server counted ${result.delivery.service.publishFailures} live publish failures`);
    if (result.delivery.service.serverAccepted !== count)
      warn(
        `server counted ${result.delivery.service.serverAccepted} accepted batches for ${count} sent`,
      );
    batches.length = 0;

    // 3. Replay.
    const replayBatches = Array.from({ length: CFG.replayDepth }, () =>
      makeBatch(0, replayAgent.agentId),
    );
    const expectedIds = replayBatches.map((b) => b.traceId);
    /**
     * Posts every batch of `list`, CFG.replaySenders at a time.
     * @param {Batch[]} list
     * @param {(batch: Batch) => Promise<SendResult>} send
     * @returns {Promise<PostSummary>}
     */
    const postAll = async (list, send) => {
      const t = performance.now();
      /** @type {Record<string, number>} */
      const codes = {};
      await pool(list.length, CFG.replaySenders, async (i) => {
        const r = await send(/** @type {Batch} */ (list[i]));
        codes[r.status] = (codes[r.status] ?? 0) + 1;
      });
      return { seconds: (performance.now() - t) / 1000, statusCodes: codes };
    };
    /**
     * Posts `list` to agent `agentX` of server `srv`, then measures its replay as `token`'s user.
     * @param {ServerHandle} srv
     * @param {string} token
     * @param {CreatedAgent} agentX
     * @param {string} label
     * @param {Batch[]} list
     * @returns {Promise<ReplayResult>}
     */
    const serviceReplayOn = async (srv, token, agentX, label, list) => {
      const posted = await postAll(list, (b) =>
        post(
          `${srv.base}/v1/traces/batch`,
          b.gz,
          {
            authorization: `Bearer ${agentX.apiKey}`,
            'content-type': 'application/json',
            'content-encoding': 'gzip',
          },
          postAgent,
        ),
      );
      console.log(
        `   replay   posted ${replayBatches.length} batches to the service in ${posted.seconds.toFixed(1)} s ` +
          `(${JSON.stringify(posted.statusCodes)})`,
      );
      await sleep(500);
      const measured = await measureReplay(
        label,
        (onMessage) =>
          openSse(
            `${srv.base}/v1/agents/${agentX.agentId}/live`,
            { authorization: `Bearer ${token}` },
            { agent: sseAgent, onMessage },
          ),
        list.map((b) => b.traceId),
      );
      measured.post = posted;
      return measured;
    };
    const serviceReplay = await serviceReplayOn(
      server,
      viewerToken,
      replayAgent,
      'service',
      replayBatches,
    );
    ensureAlive();
    const barePost = await postAll(replayBatches, (b) =>
      post(
        `${bare.base}/publish/replay`,
        b.gz,
        { 'content-type': 'application/json', 'content-encoding': 'gzip' },
        postAgent,
      ),
    );
    await sleep(300);
    const bareReplay = await measureReplay(
      busName === 'memory' ? 'bare node:http (memory)' : 'bare node:http (XRANGE)',
      (onMessage) => openSse(`${bare.base}/live/replay`, {}, { agent: sseAgent, onMessage }),
      expectedIds,
    );
    bareReplay.post = barePost;
    result.replay = {
      service: serviceReplay,
      baseline: bareReplay,
      baselineKind:
        busName === 'memory'
          ? 'bare node:http server replaying the last 1000 messages kept in memory'
          : "bare node:http server replaying the agent's Redis stream (XRANGE in pages of 100, one SSE write per entry)",
    };
    if (busName === 'redis') {
      // The bus alone: XRANGE of a stream holding the same 1000 entries, from this process.
      // the redis bus has set `redis`
      const key = `${/** @type {RunRedis} */ (redis).prefix}bare:replay`;
      const pipe = /** @type {RunRedis} */ (redis).commands.pipeline();
      for (const b of replayBatches) pipe.xadd(key, 'MAXLEN', '1000', '*', 'd', b.itemJson);
      await pipe.exec();
      /** @type {number[]} */
      const times = [];
      for (let k = 0; k < CFG.replayConnections; k++) {
        const t = performance.now();
        /** @type {[id: string, fields: string[]][]} */
        const entries = [];
        for await (const page of xrangePages(/** @type {RunRedis} */ (redis).commands, key))
          entries.push(...page);
        times.push(performance.now() - t);
        if (entries.length !== replayBatches.length)
          warn(`bare XRANGE returned ${entries.length} entries`);
      }
      result.replay.xrange = { runs: times, medianMs: median(times) };
      console.log(
        `   replay   ${'bare XRANGE (bus alone)'.padEnd(26)} ${times.map((t) => `${t.toFixed(1)} ms`).join(', ')} -> median ${
          // CFG.replayConnections (3) times
          /** @type {number} */ (median(times)).toFixed(1)
        } ms`,
      );
    }
    for (const [side, r] of Object.entries({ service: serviceReplay, baseline: bareReplay })) {
      for (const [k, run] of r.runs.entries()) {
        if (run.error) warn(`replay ${side} connection ${k + 1}: ${run.error}`);
        else if (run.ms === null)
          warn(
            `replay ${side} connection ${k + 1}: ${run.cut ? 'the server ENDED the stream' : 'timed out'} after ` +
              `${run.received} of ${expectedIds.length} messages (${(run.bytes / 2 ** 20).toFixed(1)} MiB received)`,
          );
        else if (run.missing || run.duplicated)
          warn(
            `replay ${side} connection ${k + 1}: ${run.missing} missing, ${run.duplicated} duplicated`,
          );
      }
      // both were posted, and have their `post` set above
      const bad = Object.entries(/** @type {PostSummary} */ (r.post).statusCodes).filter(
        ([code]) => code !== '202',
      );
      if (bad.length)
        warn(
          `replay ${side}: posts answered ${JSON.stringify(
            /** @type {PostSummary} */ (r.post).statusCodes,
          )}`,
        );
    }
    if (serviceReplay.runs.some((run) => run.cut)) {
      const tally = server.output.byMessage['live stream client too slow; disconnecting'];
      if (tally) warn(`server log: "live stream client too slow; disconnecting" x ${tally}`);
    }
    ensureAlive();

    result.loadAvgAfter = os.loadavg().map((x) => Math.round(x * 100) / 100);
    const end = await readMemory(`${server.base}/metrics`);
    result.serverRssBytesAtEnd = end.rss;
    const exit = await server.stop();
    result.serverExit = exit;
    if (exit.code !== 0)
      warn(`server exited with code ${exit.code} signal ${exit.signal} on SIGTERM`);
    result.serverLog = server.output.byMessage;
    if (server.output.count > 0) result.serverOutputTail = server.output.lines.slice(-10);
    await bare.stop();
    if (serviceReplay.runs.some((run) => run.cut)) {
      // The default LIVE_MAX_QUEUE_BYTES ended the replay: measure it once more on a server (same
      // database and bus) whose cap is high enough, so the replay still has a figure.
      const cap = 64 * 2 ** 20;
      console.log(`   replay   restarting the server with LIVE_MAX_QUEUE_BYTES=${cap} (64 MiB)`);
      const raised = await startServer({ ...serverEnv, LIVE_MAX_QUEUE_BYTES: String(cap) });
      const client = adminClient(raised, deps.SignJWT);
      const agentX = await client.createAgent();
      await client.grant(agentX.agentId, viewer);
      const again = await serviceReplayOn(
        raised,
        await client.tokenFor(viewer),
        agentX,
        'service, queue cap 64 MiB',
        Array.from({ length: CFG.replayDepth }, () => makeBatch(0, agentX.agentId)),
      );
      again.maxQueueBytes = cap;
      result.replay.serviceRaisedCap = again;
      for (const [k, run] of again.runs.entries())
        if (run.error || run.ms === null || run.missing || run.duplicated)
          warn(
            `replay with a 64 MiB queue cap, connection ${k + 1}: ${run.error ?? `${run.received} received, ${run.missing} missing, ${run.duplicated} duplicated`}`,
          );
      const raisedExit = await raised.stop();
      if (raisedExit.code !== 0)
        warn(
          `second server exited with code ${raisedExit.code} signal ${raisedExit.signal} on SIGTERM`,
        );
    }
    return result;
  } catch (error) {
    console.error(
      `\n!!! ${busName.toUpperCase()} BUS BENCHMARK FAILED: ${
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

/**
 * @param {number | null | undefined} a
 * @param {number | null | undefined} b
 */
const ratio = (a, b) =>
  a === null || b === null || a === undefined || b === undefined || b <= 0.05
    ? 'n/a'
    : (a / b).toFixed(2);

/**
 * This run's machine and totals, as written to the results file.
 * @typedef {MachineInfo & { database?: string, totalSeconds?: number, messageBytes?: number,
 *   bodyGzipBytes?: number }} RunMeta
 */

/**
 * @param {BusResult[]} results
 * @param {RunMeta} meta
 */
function report(results, meta) {
  /** @type {string[][]} */
  const rows = [['bus', 'figure', 'service', 'baseline', 'baseline is', 'ratio', 'target']];
  /** @type {string[]} */
  const notes = [];
  /**
   * @param {number | null | undefined} value
   * @param {number} limit
   */
  const target = (value, limit) =>
    value === null || value === undefined
      ? `< ${limit}: n/a`
      : `< ${limit}: ${value < limit ? 'met' : 'NOT MET'}`;
  for (const r of results) {
    if (r.skipped) {
      notes.push(`${r.bus}: SKIPPED (${r.skipped})`);
      continue;
    }
    const bus = `${r.bus} (${r.database ?? '?'})`;
    const d = r.delivery;
    if (d?.service && d?.baseline) {
      const kind = r.bus === 'memory' ? 'bare node:http SSE' : 'bare XADD->XREAD';
      const s = d.service;
      const b = d.baseline;
      rows.push([
        bus,
        'delivery p50 from 202, ms',
        fmt(s.fromReply.p50),
        fmt(b.fromReply.p50),
        kind,
        ratio(s.fromReply.p50, b.fromReply.p50),
        '',
      ]);
      rows.push([
        bus,
        'delivery p99 from 202, ms',
        fmt(s.fromReply.p99),
        fmt(b.fromReply.p99),
        kind,
        ratio(s.fromReply.p99, b.fromReply.p99),
        target(s.fromReply.p99, CFG.targets.p99Ms),
      ]);
      rows.push([
        bus,
        'delivery max from 202, ms',
        fmt(s.fromReply.max),
        fmt(b.fromReply.max),
        kind,
        ratio(s.fromReply.max, b.fromReply.max),
        '',
      ]);
      rows.push([
        bus,
        'arrived before the 202',
        `${s.beforeReply}/${s.delivered}`,
        `${b.beforeReply}/${b.delivered}`,
        kind,
        '',
        '',
      ]);
      rows.push([
        bus,
        'end-to-end p50 from send, ms',
        fmt(s.fromSend.p50),
        fmt(b.fromSend.p50),
        kind,
        ratio(s.fromSend.p50, b.fromSend.p50),
        '',
      ]);
      rows.push([
        bus,
        'end-to-end p99 from send, ms',
        fmt(s.fromSend.p99),
        fmt(b.fromSend.p99),
        kind,
        ratio(s.fromSend.p99, b.fromSend.p99),
        '',
      ]);
      rows.push([
        bus,
        'lost / duplicated batches',
        `${s.lost} / ${s.duplicated} of ${s.accepted}`,
        `${b.lost} / ${b.duplicated} of ${b.accepted}`,
        kind,
        '',
        '0 / 0: ' +
          (s.lost + s.duplicated + s.misrouted === 0 && s.accepted === s.sent ? 'met' : 'NOT MET'),
      ]);
    } else if (d?.service) {
      const s = d.service;
      rows.push([
        bus,
        'delivery p99 from 202, ms',
        fmt(s.fromReply.p99),
        'n/a',
        '',
        '',
        target(s.fromReply.p99, CFG.targets.p99Ms),
      ]);
    }
    const rp = r.replay;
    if (rp) {
      const kind = r.bus === 'memory' ? 'bare node:http SSE' : 'bare node:http+XRANGE';
      const cell = (/** @type {ReplayResult} */ x) => {
        if (x.medianMs !== null) return fmt(x.medianMs);
        const bad = x.runs.find((run) => run.error || run.ms === null);
        if (bad?.error) return 'FAILED';
        return bad?.cut ? `CUT at ${bad.received}` : `TIMEOUT at ${bad?.received}`;
      };
      rows.push([
        bus,
        'replay of 1000, median of 3, ms',
        cell(rp.service),
        cell(rp.baseline),
        kind,
        ratio(rp.service.medianMs, rp.baseline.medianMs),
        target(rp.service.medianMs, CFG.targets.replayMs),
      ]);
      if (rp.serviceRaisedCap)
        rows.push([
          bus,
          '  same, LIVE_MAX_QUEUE_BYTES=64MiB',
          cell(rp.serviceRaisedCap),
          cell(rp.baseline),
          kind,
          ratio(rp.serviceRaisedCap.medianMs, rp.baseline.medianMs),
          target(rp.serviceRaisedCap.medianMs, CFG.targets.replayMs),
        ]);
      if (rp.xrange) {
        const best = rp.serviceRaisedCap ?? rp.service;
        rows.push([
          bus,
          rp.serviceRaisedCap ? '  64 MiB cap, vs the bus alone' : '  same, vs the bus alone',
          cell(best),
          fmt(rp.xrange.medianMs),
          'bare XRANGE alone',
          ratio(best.medianMs, rp.xrange.medianMs),
          '',
        ]);
      }
    }
    const idle = r.idle;
    if (idle) {
      rows.push([
        bus,
        `idle stream memory (${idle.service.streams}), KiB`,
        fmt(idle.service.kibPerStream),
        fmt(idle.baseline.kibPerStream),
        'bare node:http SSE',
        ratio(idle.service.kibPerStream, idle.baseline.kibPerStream),
        target(idle.service.kibPerStream, CFG.targets.idleKiB),
      ]);
    }
    if (d?.service) {
      const s = d.service;
      notes.push(
        `${bus}: delivery ${s.accepted}/${s.sent} batches accepted, sent at ${s.sendRate.toFixed(0)}/s over ${s.agents} streams ` +
          `(POST p50 ${fmt(s.postLatency.p50)} / p99 ${fmt(s.postLatency.p99)} ms, server CPU ${s.serverCpuPercent?.toFixed(0)}%); ` +
          `${s.lost} lost, ${s.duplicated} duplicated, ${s.misrouted} misrouted, ${s.unknownMessages} unknown; ` +
          `server accepted ${s.serverAccepted} (warm-up included), ${s.publishFailures} publish failures`,
      );
    }
    if (rp) {
      // set by benchBus once posted
      const sp = /** @type {PostSummary} */ (rp.service.post);
      // A run that failed to open has no ms (nor bytes): it would throw (or show NaN) here.
      notes.push(
        `${bus}: replay: 1000 batches posted in ${sp.seconds.toFixed(1)} s (${(1000 / sp.seconds).toFixed(0)}/s); ` +
          `service runs ${rp.service.runs
            .map((x) =>
              x.ms === null
                ? `ENDED after ${x.received}`
                : `${/** @type {number} */ (x.ms).toFixed(0)} ms`,
            )
            .join(', ')}` +
          (rp.serviceRaisedCap
            ? `; with a 64 MiB queue cap ${rp.serviceRaisedCap.runs
                .map((x) =>
                  x.ms === null
                    ? `ENDED after ${x.received}`
                    : `${/** @type {number} */ (x.ms).toFixed(0)} ms`,
                )
                .join(', ')}` +
              // prettier would move the cast's comment out of the parentheses (a cast of the
              // quotient, the operand unchecked)
              // prettier-ignore
              ` (~${(
                /** @type {number} */ (rp.serviceRaisedCap.runs[0]?.bytes) / 2 ** 20
              ).toFixed(1)} MiB per replay)`
            : ''),
      );
    }
    if (idle) {
      notes.push(
        `${bus}: idle: server RSS ${mib(idle.service.before.rss)} -> ${mib(idle.service.after.rss)} MiB ` +
          `(heap ${idle.service.heapKibPerStream.toFixed(1)} KiB/stream), opened at ${Math.round(idle.service.opensPerSec)}/s; ` +
          `bare RSS ${mib(idle.baseline.before.rss)} -> ${mib(idle.baseline.after.rss)} MiB`,
      );
    }
    if (r.error) notes.push(`${bus}: FAILED (${r.error})`);
    for (const w of r.warnings ?? []) notes.push(`${bus}: !!! ${w}`);
  }
  console.log(
    `\nFlightlog live-stream benchmark — ${meta.date}, node ${meta.node}, ${meta.cpuModel} x ${meta.cores}\n` +
      `delivery: ${CFG.rate} batches/s paced over ${CFG.agents} agents/streams, ${CFG.warmupSeconds} s warm-up + ${CFG.seconds} s; ` +
      `replay: ${CFG.replayDepth} batches, ${CFG.replayConnections} connections; idle: ${CFG.idleStreams} streams; ` +
      `batches of 1 trace + ${CFG.eventsPerBatch} llm_call events (SSE data ~${meta.messageBytes ?? '?'} B, gzip body ~${meta.bodyGzipBytes ?? '?'} B)\n`,
  );
  console.log(rows.length > 1 ? textTable(rows, (c) => c < 2 || c === 4) : '(no bus measured)');
  console.log(`\n${notes.join('\n')}`);
  console.log(
    '\n"from 202": SSE arrival - the POST\'s 202 arriving at this process (negative when the message\n' +
      'arrives first: the server publishes before it answers); "from send": arrival - scheduled send\n' +
      '(includes the POST: HTTP, inflate, validation, the database commit; the bare baselines have no\n' +
      'database). Ratio = service / baseline; n/a when the baseline figure is <= 0.05.',
  );
}

// ---------------------------------------------------------------------------------------------

async function main() {
  lifecycle = createLifecycle({ timeoutSeconds: CFG.timeoutSeconds });
  lifecycle.onCleanup(() => {
    for (const socket of openSockets) socket.destroy();
    openSockets.clear();
  });
  const { monotonicFactory } = await import('ulidx');
  ulid = monotonicFactory();
  makeItem = createItemFactory({ ulid, eventsPerBatch: CFG.eventsPerBatch });
  const { default: pg } = await import('pg');
  const { Redis } = await import('ioredis');
  const { SignJWT } = await import('jose');

  /** @type {RunMeta} */
  const meta = machineInfo(ROOT);
  const pgUrl = new URL(CFG.databaseUrl);
  const pgPort = Number(pgUrl.port || 5432);
  let database = 'postgres';
  if (!(await reachable(pgUrl.hostname, pgPort))) {
    database = 'pglite';
    console.log(
      `\n${'!'.repeat(78)}\n!!! PostgreSQL at ${pgUrl.hostname}:${pgPort} is unreachable: the server runs on PGlite\n` +
        `!!! (a fresh temporary DATA_DIR), which limits the ingest rate\n${'!'.repeat(78)}`,
    );
  }
  meta.database = database;
  console.log(
    `Flightlog live-stream benchmark: buses ${CFG.buses.join(', ')} on ${database}; ` +
      `${CFG.rate}/s over ${CFG.agents} streams for ${CFG.warmupSeconds}+${CFG.seconds} s, ` +
      `replay ${CFG.replayDepth}, ${CFG.idleStreams} idle streams`,
  );
  const started = performance.now();
  /** @type {BusResult[]} */
  const results = [];
  for (const bus of CFG.buses) results.push(await benchBus(bus, { database, pg, Redis, SignJWT }));
  meta.totalSeconds = Math.round((performance.now() - started) / 100) / 10;
  const measured = results.find((r) => r.messageBytes);
  meta.messageBytes = measured?.messageBytes;
  meta.bodyGzipBytes = measured?.bodyGzipBytes;

  report(results, meta);
  writeJsonAtomic(RESULTS_FILE, {
    ...meta,
    config: {
      ...CFG,
      databaseUrl: redactUrl(CFG.databaseUrl),
      redisUrl: redactUrl(CFG.redisUrl),
    },
    buses: Object.fromEntries(results.map((r) => [r.bus, r])),
  });
  console.log(`\nwrote ${RESULTS_FILE} (total ${meta.totalSeconds} s)`);
}

// ---------------------------------------------------------------------------------------------
/**
 * A stream's entries in pages of 100, as the service's Redis bus reads a replay: ioredis parses
 * a 20 MB XRANGE reply two to three times slower than the same entries in pages.
 * @param {Redis} redis
 * @param {string} key
 * @returns {AsyncGenerator<[id: string, fields: string[]][], void>}
 */
async function* xrangePages(redis, key) {
  let from = '-';
  for (;;) {
    const page = await redis.xrange(key, from, '+', 'COUNT', 100);
    yield page;
    if (page.length < 100) return;
    // a full page has a last entry
    from = `(${/** @type {[id: string, fields: string[]]} */ (page.at(-1))[0]}`;
  }
}

// The bare SSE server (child process): the minimum that turns a POSTed batch into an SSE message,
// replays an agent's last 1000 (from memory, or from Redis with XRANGE when given a Redis URL),
// and holds idle SSE responses. Exits when its parent goes away (stdin closes) or on SIGTERM.

async function runBareServer() {
  const [redisUrl, prefix] = process.argv.slice(3);
  /** @type {Redis | undefined} */
  let redis;
  if (redisUrl) {
    const { Redis } = await import('ioredis');
    redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
    redis.on('error', () => {});
  }
  // an agent is the path's third part: undefined when the path has none
  const key = (/** @type {string | undefined} */ agent) => `${prefix}bare-http:${agent}`;
  /** @type {Map<string | undefined, string[]>} the last 1000 SSE messages, by agent */
  const buffers = new Map();
  /** @type {Map<string | undefined, Set<http.ServerResponse>>} */
  const subscribers = new Map();
  /** @type {Set<http.ServerResponse>} */
  const idle = new Set();
  let next = 0;
  const HEAD = {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
  };
  const sse = (/** @type {string | number} */ id, /** @type {string} */ data) =>
    `id: ${id}\nevent: trace\ndata: ${data}\n\n`;
  const server = http.createServer(async (req, res) => {
    // a server's request always has its url
    const [, kind, agent] = /** @type {string} */ (req.url).split('/');
    try {
      if (req.method === 'POST' && kind === 'publish') {
        /** @type {Buffer[]} */
        const chunks = [];
        for await (const chunk of req) chunks.push(chunk);
        let body = Buffer.concat(chunks);
        if (req.headers['content-encoding'] === 'gzip') body = gunzipSync(body);
        // the batches this benchmark posts (the bare server trusts them: no validation)
        const { items } = /** @type {{ items: BufferBatchItem[] }} */ (
          JSON.parse(body.toString('utf8'))
        );
        const data = items.map((item) => JSON.stringify(item));
        if (redis) {
          const pipe = redis.pipeline();
          for (const d of data) pipe.xadd(key(agent), 'MAXLEN', '1000', '*', 'd', d);
          pipe.expire(key(agent), 86_400);
          await pipe.exec();
        } else {
          const buffer = buffers.get(agent) ?? [];
          buffers.set(agent, buffer);
          for (const d of data) {
            const message = sse(++next, d);
            buffer.push(message);
            if (buffer.length > 1000) buffer.shift();
            for (const sub of subscribers.get(agent) ?? []) sub.write(message);
          }
        }
        res.writeHead(202, { 'content-type': 'application/json' });
        res.end(`{"traceId":${JSON.stringify(items[0]?.trace?.id ?? null)}}`);
      } else if (req.method === 'GET' && kind === 'live') {
        res.writeHead(200, HEAD);
        res.write(': connected\nretry: 3000\n\n');
        if (redis) {
          for await (const page of xrangePages(redis, key(agent)))
            for (const [id, fields] of page) res.write(sse(id, /** @type {string} */ (fields[1])));
        } else {
          for (const message of buffers.get(agent) ?? []) res.write(message);
        }
        /** @type {Set<http.ServerResponse>} */
        const set = subscribers.get(agent) ?? new Set();
        subscribers.set(agent, set);
        set.add(res);
        res.on('close', () => set.delete(res));
      } else if (req.method === 'GET' && kind === 'idle') {
        res.writeHead(200, HEAD);
        res.write(': connected\nretry: 3000\n\n');
        idle.add(res);
        res.on('close', () => idle.delete(res));
      } else if (req.method === 'GET' && kind === 'metrics') {
        const m = process.memoryUsage();
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end(
          `process_resident_memory_bytes ${m.rss}\nnodejs_heap_size_used_bytes ${m.heapUsed}\n` +
            `nodejs_external_memory_bytes ${m.external}\n`,
        );
      } else {
        res.writeHead(404);
        res.end();
      }
    } catch (error) {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(/** @type {Thrown} */ (error)?.message ?? error));
    }
  });
  server.keepAliveTimeout = 60_000;
  serveUntilParentGoes(server, () => {
    for (const res of idle) res.destroy();
    for (const set of subscribers.values()) for (const res of set) res.destroy();
    redis?.disconnect();
  });
}

if (process.argv[2] === BARE_FLAG) {
  await runBareServer();
} else {
  try {
    await main();
    await lifecycle.runCleanups();
    process.exit(0);
  } catch (error) {
    console.error(`\n!!! BENCHMARK FAILED: ${/** @type {Thrown} */ (error)?.stack ?? error}`);
    await lifecycle?.runCleanups();
    process.exit(1);
  }
}
