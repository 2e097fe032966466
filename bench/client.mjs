// Client-library benchmark: what instrumenting costs an agent's host program.
//
//   record   the cost of one event on the host's hot path (ns per call) for @flightlog/client's
//            session.llmCall, posthog-node's capture and the langfuse SDK's trace.event, each
//            recording the same llm_call-shaped payload, BENCH_EVENTS (2,000) calls per round,
//            interleaved A B C A B C over BENCH_ROUNDS (7) rounds after a warm-up round; medians
//            and ratios. Three figures:
//              "call"        the synchronous calls only (what the host's own code waits for);
//              "+next turn"  also the work the library queued to run right after them (promises,
//                            immediates: langfuse finishes enqueueing an event in a microtask),
//                            timed until one setImmediate later. For Flightlog this is NOT all
//                            of its work: serialisation, encryption and gzip of what was
//                            recorded run later, in slices of at most 1 ms, and at flush time;
//              "until idle"  Flightlog only: timed until the client has nothing left to do
//                            (await client.flush() with a stub transport that answers 202 at
//                            once, so no network time is in it): drain, serialisation in slices,
//                            gzip on the thread pool. Given as wall-clock time per event and as
//                            CPU time per event (process.cpuUsage: every thread, the thread
//                            pool's gzip included). The peers' equivalent work happens at their
//                            own flush, which is off here, so they have no such figure.
//            No network during the measurement: the peers get a closed local port
//            (http://127.0.0.1:9) and their automatic flushing disabled (posthog: flushAt and
//            maxQueueSize 10^9, flushInterval 0; langfuse: flushAt 10^9, flushInterval 0), so they
//            only queue. Flightlog keeps its defaults (100 KB buffer, 250 ms timer), so a full
//            buffer is drained during the loop as in real use, and sends to the stub transport.
//   stall    the longest event-loop stall while flushing a full 100 KB buffer (maxBufferBytes
//            default) to a sink server in a child process: a setImmediate ticker and
//            perf_hooks.monitorEventLoopDelay run during each flush() (drain, serialisation,
//            gzip on the thread pool, the HTTP request); BENCH_FLUSHES (20) flushes, plain and
//            with SERVICE_MASTER_KEY (AES-256-GCM per payload), after 10 warm-up flushes (whose
//            longest stall is reported apart: a process's first flushes run cold code). GC pauses are observed too
//            (perf_hooks 'gc' entries): the table also gives the longest stall once the
//            collector's time inside it is taken out, and the longest GC pause seen.
//
// The stall part runs first, on a fresh heap (the record part leaves the peers' queues behind).
//
// Prints a table and writes bench/results/client-latest.json. Targets: recording < 2 µs median
// and at least as fast as both peers; no stall > 5 ms.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { PerformanceObserver, monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { setImmediate } from 'node:timers';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { FlightlogClient } from '@flightlog/client';
import { Langfuse } from 'langfuse';
import { PostHog } from 'posthog-node';
import { envNumber } from './support.mjs';

const EVENTS = envNumber('BENCH_EVENTS', 2_000, 100, 1_000_000);
const ROUNDS = envNumber('BENCH_ROUNDS', 7, 3, 100);
const FLUSHES = envNumber('BENCH_FLUSHES', 20, 3, 1_000);
const CLOSED_PORT = 'http://127.0.0.1:9';
/**
 * Flushes made before measuring: the first ones of a process run cold code (V8 compiles the
 * serialisation and fetch paths as they get hot), with tails of 4-8 ms on the development
 * machine. Their longest stall is reported apart, as `coldLongestStallMs`.
 */
const WARMUP_FLUSHES = 10;

const payload = {
  provider: 'openai',
  model: 'gpt-4o-mini',
  input: {
    messages: [
      {
        role: 'system',
        content: 'You are a careful Solana trading agent. Never risk more than 2 % of the wallet.',
      },
      {
        role: 'user',
        content: 'Swap 1 SOL for USDC at the best route; keep slippage under 0.5 %.',
      },
    ],
  },
  output: {
    content: 'Route via Orca Whirlpool: expected 148.21 USDC, price impact 0.02 %.',
    finishReason: 'stop',
  },
  usage: { inputTokens: 120, outputTokens: 60, totalTokens: 180 },
  costUsd: 0.000054,
  streamed: false,
};

/**
 * The median of `values`, which is never empty here: its indices are within `sorted`.
 * @param {readonly number[]} values
 * @returns {number}
 */
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2
    ? /** @type {number} */ (sorted[mid])
    : // (the outer cast keeps prettier from moving the inner one)
      /** @type {number} */ (
        /** @type {number} */ (sorted[mid - 1]) + /** @type {number} */ (sorted[mid])
      ) / 2;
};
const round1 = (/** @type {number} */ n) => Math.round(n * 10) / 10;
const round2 = (/** @type {number} */ n) => Number(n.toFixed(2));
const quiet = { warn() {} };

// ---------------------------------------------------------------------------------------------
// stall

const SINK = `
  import http from 'node:http';
  const server = http.createServer((req, res) => {
    req.on('data', () => {});
    req.on('end', () => { res.writeHead(202, { 'content-type': 'application/json' }); res.end('{"traceId":"x"}'); });
  });
  server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));
`;
const sink = spawn(process.execPath, ['--input-type=module', '-e', SINK], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
const sinkPort = await /** @type {Promise<number>} */ (
  new Promise((resolve) => sink.stdout.once('data', (d) => resolve(Number(String(d).trim()))))
);

// Garbage-collection pauses, to tell the client's own work from the collector's in a stall (a
// scavenge takes 1-4 ms on the 2-core development machine, whoever allocated).
/** @type {{ start: number, end: number }[]} */
const gcPauses = [];
new PerformanceObserver((list) => {
  for (const entry of list.getEntries())
    gcPauses.push({ start: entry.startTime, end: entry.startTime + entry.duration });
}).observe({ entryTypes: ['gc'] });

/**
 * The stalls of one mode's flushes, in ms: the longest gap between two turns of the event loop
 * (over all flushes, and the median of each flush's), with and without the GC pauses in it.
 * @typedef {object} StallResult
 * @property {string} mode
 * @property {number} flushes
 * @property {number} eventsPerFlush
 * @property {number} longestStallMs
 * @property {number} medianOfLongestPerFlushMs
 * @property {number} eventLoopDelayMaxMs
 * @property {number} longestStallBesidesGcMs
 * @property {number} longestGcPauseMs
 * @property {number} coldLongestStallMs
 */

/**
 * @param {string} label
 * @param {{ SERVICE_MASTER_KEY?: string }} env what the client is made with
 * @returns {Promise<StallResult>}
 */
async function stalls(label, env) {
  const previous = process.env.SERVICE_MASTER_KEY;
  if (env.SERVICE_MASTER_KEY) process.env.SERVICE_MASTER_KEY = env.SERVICE_MASTER_KEY;
  const client = new FlightlogClient({
    apiKey: 'flk_bench',
    ingestUrl: `http://127.0.0.1:${sinkPort}`,
    logger: quiet,
    flushIntervalMs: 3_600_000,
    flushOnExit: false,
  });
  if (previous === undefined) delete process.env.SERVICE_MASTER_KEY;
  else process.env.SERVICE_MASTER_KEY = previous;
  gcPauses.length = 0;
  const flushGaps = [];
  const coldGaps = [];
  const maxGaps = [];
  const withoutGc = [];
  const gcMax = [];
  const histogramMax = [];
  const eventsPerFlush = [];
  for (let i = 0; i < WARMUP_FLUSHES + FLUSHES; i++) {
    const session = client.startSession({ inputSummary: 'stall' });
    let recorded = 0;
    // fill the buffer to just under maxBufferBytes (102,400): the next event would flush it
    while (client.stats().bufferedBytes + 1_000 < 102_400) {
      session.llmCall(payload);
      recorded += 1;
    }
    await nextTurn();
    const histogram = monitorEventLoopDelay({ resolution: 1 });
    histogram.enable();
    // Every gap between two turns of the event loop during the flush; GC pauses are attributed
    // afterwards (their performance entries are delivered asynchronously).
    /** @type {[from: number, to: number][]} */
    const gaps = [];
    let last = performance.now();
    let ticking = true;
    const tick = () => {
      const now = performance.now();
      gaps.push([last, now]);
      last = now;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const result = await client.flush();
    ticking = false;
    histogram.disable();
    if (result.timedOut) throw new Error('flush timed out');
    if (i < WARMUP_FLUSHES) coldGaps.push(...gaps.map(([a, b]) => b - a));
    else {
      flushGaps.push(gaps);
      histogramMax.push(histogram.max / 1e6);
      eventsPerFlush.push(recorded);
    }
  }
  // GC entries are delivered asynchronously: attribute them once they are all in.
  await new Promise((resolve) => setTimeout(resolve, 100));
  for (const gaps of flushGaps) {
    let maxGap = 0;
    let maxGapWithoutGc = 0;
    let maxGc = 0;
    for (const [start, end] of gaps) {
      const inGap = gcPauses.filter((p) => p.end > start && p.start < end);
      const gcMs = inGap.reduce((ms, p) => ms + Math.min(p.end, end) - Math.max(p.start, start), 0);
      maxGap = Math.max(maxGap, end - start);
      maxGapWithoutGc = Math.max(maxGapWithoutGc, end - start - gcMs);
      for (const pause of inGap) maxGc = Math.max(maxGc, pause.end - pause.start);
    }
    maxGaps.push(maxGap);
    withoutGc.push(maxGapWithoutGc);
    gcMax.push(maxGc);
  }
  const stats = client.stats();
  await client.close();
  if (stats.deliveredEvents === 0 || stats.droppedEvents > 0)
    throw new Error(`${label}: delivery failed`);
  return {
    mode: label,
    flushes: FLUSHES,
    eventsPerFlush: median(eventsPerFlush),
    longestStallMs: round2(Math.max(...maxGaps)),
    medianOfLongestPerFlushMs: round2(median(maxGaps)),
    eventLoopDelayMaxMs: round2(Math.max(...histogramMax)),
    longestStallBesidesGcMs: round2(Math.max(...withoutGc)),
    longestGcPauseMs: round2(Math.max(...gcMax)),
    coldLongestStallMs: round2(Math.max(...coldGaps)),
  };
}

const stall = [
  await stalls('plain', {}),
  await stalls('encrypted', { SERVICE_MASTER_KEY: randomBytes(32).toString('base64') }),
];
sink.kill();

// ---------------------------------------------------------------------------------------------
// record

// A transport that takes every batch at once: the client's own work (serialisation, gzip) is
// measured, not a network. The batch still goes through the real exporter and gzip.
/** @type {import('@flightlog/client').Transport} */
const stubTransport = {
  sendBatch: async () => ({ kind: 'ok', status: 202, replayed: false, verify: null }),
  complete: async () => ({ kind: 'ok', status: 200, replayed: false, verify: null }),
};
const flightlog = new FlightlogClient(
  { apiKey: 'flk_bench', logger: quiet, flushOnExit: false },
  { transport: stubTransport },
);
// A fresh peer client per round: with flushing off their queues only grow, and langfuse's
// enqueueing gets slower as its queue grows (its cost rose from ~40 µs to milliseconds per event
// over a few thousand events), which would measure the backlog instead of the call.
const newPostHog = () =>
  new PostHog('phc_bench', {
    host: CLOSED_PORT,
    flushAt: 1e9,
    maxQueueSize: 1e9,
    flushInterval: 0,
    disableGeoip: true,
  });
const newLangfuse = () => {
  const client = new Langfuse({
    publicKey: 'pk-lf-bench',
    secretKey: 'sk-lf-bench',
    baseUrl: CLOSED_PORT,
    flushAt: 1e9,
    flushInterval: 0,
  });
  client.on('error', () => {});
  return client;
};

/**
 * A library under test: `round()` makes a fresh recorder (see above) and its `call`, recording
 * one event, and `after`, run when the round is over.
 * @typedef {object} Library
 * @property {string} name
 * @property {'flightlog' | 'posthog' | 'langfuse'} key
 * @property {() => { call: () => unknown, after: () => void }} round
 */

/** @type {Library[]} */
const libraries = [
  {
    name: '@flightlog/client session.llmCall',
    key: 'flightlog',
    round() {
      const session = flightlog.startSession({ inputSummary: 'bench' });
      return { call: () => session.llmCall(payload), after: () => session.end() };
    },
  },
  {
    name: 'posthog-node capture',
    key: 'posthog',
    round() {
      const posthog = newPostHog();
      return {
        call: () =>
          posthog.capture({ distinctId: 'agent-1', event: 'llm_call', properties: payload }),
        after: () => {},
      };
    },
  },
  {
    name: 'langfuse trace.event',
    key: 'langfuse',
    round() {
      const trace = newLangfuse().trace({ name: 'bench' });
      return {
        call: () =>
          trace.event({
            name: 'llm_call',
            input: payload.input,
            output: payload.output,
            metadata: payload,
          }),
        after: () => {},
      };
    },
  },
];

/**
 * ns per event of one round of `library`: the calls, the calls and their next turn, and (for
 * Flightlog only) until idle, wall-clock and CPU.
 * @typedef {{ call: number, nextTurn: number, idle: { wall: number, cpu: number } | undefined }}
 *   Measurement
 */

/**
 * @param {Library} library
 * @returns {Promise<Measurement>}
 */
async function measure(library) {
  const { call, after } = library.round();
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < EVENTS; i++) call();
  const t1 = process.hrtime.bigint();
  await nextTurn();
  const t2 = process.hrtime.bigint();
  let idle;
  if (library.key === 'flightlog') {
    // Until the client has nothing left to do: what was recorded is serialised, gzipped and
    // handed to the stub transport.
    const result = await flightlog.flush({ timeoutMs: 10_000 });
    if (result.timedOut) throw new Error('flightlog: flush timed out');
    const t3 = process.hrtime.bigint();
    const cpu = process.cpuUsage(cpu0);
    idle = { wall: Number(t3 - t0) / EVENTS, cpu: ((cpu.user + cpu.system) * 1_000) / EVENTS };
  }
  after();
  return { call: Number(t1 - t0) / EVENTS, nextTurn: Number(t2 - t0) / EVENTS, idle };
}

/**
 * A library's measurements over the rounds, ns per event.
 * @typedef {Record<'call' | 'nextTurn' | 'idleWall' | 'idleCpu', number[]>} Samples
 */
// one entry per library key
const samples = /** @type {Record<Library['key'], Samples>} */ (
  Object.fromEntries(
    libraries.map((l) => [
      l.key,
      /** @type {Samples} */ ({ call: [], nextTurn: [], idleWall: [], idleCpu: [] }),
    ]),
  )
);
for (let round = 0; round <= ROUNDS; round++) {
  for (const library of libraries) {
    const result = await measure(library);
    if (round > 0) {
      samples[library.key].call.push(result.call);
      samples[library.key].nextTurn.push(result.nextTurn);
      if (result.idle) {
        samples[library.key].idleWall.push(result.idle.wall);
        samples[library.key].idleCpu.push(result.idle.cpu);
      }
    }
    // let each library's background work (Flightlog's final snapshot) finish between measurements
    await flightlog.flush({ timeoutMs: 2_000 });
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
/**
 * A library's figures, in ns per event; the ratios are added once Flightlog's are known.
 * @typedef {object} RecordRow
 * @property {string} library
 * @property {number} callNsMedian
 * @property {number} withNextTurnNsMedian
 * @property {number | null} untilIdleWallNsMedian
 * @property {number | null} untilIdleCpuNsMedian
 * @property {number[]} callNsRounds
 * @property {number} [callRatioVsFlightlog]
 * @property {number} [withNextTurnRatioVsFlightlog]
 */

/** @type {RecordRow[]} */
const record = libraries.map((library) => {
  const s = samples[library.key];
  return {
    library: library.name,
    callNsMedian: round1(median(s.call)),
    withNextTurnNsMedian: round1(median(s.nextTurn)),
    untilIdleWallNsMedian: s.idleWall.length > 0 ? round1(median(s.idleWall)) : null,
    untilIdleCpuNsMedian: s.idleCpu.length > 0 ? round1(median(s.idleCpu)) : null,
    callNsRounds: s.call.map(round1),
  };
});
const ours = /** @type {RecordRow} */ (record[0]); // Flightlog's, first of `libraries`
for (const row of record) {
  row.callRatioVsFlightlog = Number((row.callNsMedian / ours.callNsMedian).toFixed(2));
  row.withNextTurnRatioVsFlightlog = Number(
    (row.withNextTurnNsMedian / ours.withNextTurnNsMedian).toFixed(2),
  );
}
const flightlogStats = flightlog.stats();
if (flightlogStats.droppedEvents > 0 || flightlogStats.invalidEvents > 0)
  throw new Error(
    `flightlog dropped events during the benchmark: ${JSON.stringify(flightlogStats)}`,
  );
await flightlog.close({ timeoutMs: 1_000 });

// ---------------------------------------------------------------------------------------------
// report

const pad = (/** @type {string | number} */ text, /** @type {number} */ n) =>
  String(text).padEnd(n);
const padStart = (/** @type {string | number} */ text, /** @type {number} */ n) =>
  String(text).padStart(n);
console.log(
  `\nRecording one llm_call event: ${EVENTS} calls per round, ${ROUNDS} rounds, A B C interleaved`,
);
console.log(
  `${pad('library', 36)}${padStart('call ns (median)', 18)}${padStart('vs flightlog', 14)}${padStart('+next turn ns', 15)}${padStart('vs flightlog', 14)}${padStart('until idle ns', 15)}${padStart('idle CPU ns', 13)}`,
);
for (const row of record)
  console.log(
    `${pad(row.library, 36)}${padStart(row.callNsMedian, 18)}${padStart(`${row.callRatioVsFlightlog}×`, 14)}${padStart(row.withNextTurnNsMedian, 15)}${padStart(`${row.withNextTurnRatioVsFlightlog}×`, 14)}${padStart(row.untilIdleWallNsMedian ?? '—', 15)}${padStart(row.untilIdleCpuNsMedian ?? '—', 13)}`,
  );
console.log(
  "  +next turn: until one setImmediate after the calls (Flightlog's serialisation and gzip are not\n" +
    '  done yet then); until idle: until flush() resolved with a stub transport, wall-clock and CPU\n' +
    '  (all threads) per event. The peers serialise at their own flush, off here: no such figure.',
);
console.log(
  `\nEvent-loop stall while flushing a full 100 KB buffer (${FLUSHES} flushes each, after ${WARMUP_FLUSHES} warm-up flushes)`,
);
/** @type {[title: string, key: keyof StallResult, width: number][]} */
const columns = [
  ['mode', 'mode', 11],
  ['events/flush', 'eventsPerFlush', 13],
  ['longest ms', 'longestStallMs', 11],
  ['median ms', 'medianOfLongestPerFlushMs', 10],
  ['ELD max ms', 'eventLoopDelayMaxMs', 11],
  ['besides GC ms', 'longestStallBesidesGcMs', 14],
  ['longest GC ms', 'longestGcPauseMs', 14],
  ['cold ms', 'coldLongestStallMs', 8],
];
console.log(
  columns
    .map(([title, , width], i) => (i === 0 ? pad(title, width) : padStart(title, width)))
    .join(''),
);
for (const row of stall)
  console.log(
    columns
      .map(([, key, width], i) => (i === 0 ? pad(row[key], width) : padStart(row[key], width)))
      .join(''),
  );
console.log(
  "  longest: the longest gap between two event-loop turns during a flush; median: of each flush's\n" +
    '  longest; besides GC: the longest once garbage-collection pauses inside it are taken out;\n' +
    "  cold: the longest during the warm-up flushes (a process's first flushes run cold code).",
);

const targets = {
  recordingUnder2us: ours.callNsMedian < 2_000,
  recordingAtLeastAsFastAsPeers: record
    .slice(1)
    .every((row) => row.callNsMedian >= ours.callNsMedian),
  noStallOver5ms: stall.every((row) => row.longestStallMs <= 5),
  noStallOver5msBesidesGc: stall.every((row) => row.longestStallBesidesGcMs <= 5),
};
console.log(`\nTargets: ${JSON.stringify(targets)}`);
mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
writeFileSync(
  new URL('./results/client-latest.json', import.meta.url),
  `${JSON.stringify(
    {
      date: new Date().toISOString(),
      node: process.version,
      cpu: os.cpus()[0]?.model,
      cores: os.cpus().length,
      settings: { events: EVENTS, rounds: ROUNDS, flushes: FLUSHES },
      record,
      stall,
      targets,
    },
    null,
    2,
  )}\n`,
);
console.log('Wrote bench/results/client-latest.json');
process.exit(0);
