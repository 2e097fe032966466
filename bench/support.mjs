// Shared by the benchmarks (ingest.mjs, live.mjs, analysis.mjs, client.mjs, otlp.mjs,
// run-all.mjs): synthetic batches and texts, loopback helpers, stats, child processes, result
// files.

import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import { dirname } from 'node:path';

/**
 * autocannon as the benchmarks use it: every request takes the next pooled body (`setupRequest`);
 * `overallRate` spreads a total rate over the connections.
 * @typedef {{ method?: string, path?: string, headers?: Record<string, string>,
 *   body?: string | Buffer }} AutocannonRequest
 * @typedef {{ url: string, method: string, connections: number, duration: number,
 *   timeout: number, headers: Record<string, string>,
 *   requests: { setupRequest: (req: AutocannonRequest) => AutocannonRequest }[],
 *   overallRate?: number, ignoreCoordinatedOmission?: boolean }} AutocannonOptions
 * @typedef {{ '2xx': number, non2xx: number, errors: number, timeouts: number,
 *   duration: number, latency: { p50: number, p99: number, max: number },
 *   statusCodeStats?: Record<string, { count: number }> }} AutocannonResult
 */
// Required, not imported: autocannon ships no types, and tsc refuses an import of an untyped
// package; both give its module.exports. (It returns an EventEmitter with then/catch.)
export const autocannon =
  /** @type {(options: AutocannonOptions) => PromiseLike<AutocannonResult>} */ (
    createRequire(import.meta.url)('autocannon')
  );

/**
 * A whole number from the environment, within [min, max], else `fallback`.
 * @param {string} name
 * @param {number} fallback
 * @param {number} min
 * @param {number} max
 * @returns {number}
 */
export function envNumber(name, fallback, min, max) {
  const raw = process.env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min || value > max) {
    console.error(`${name} must be a number between ${min} and ${max}, got "${raw}"`);
    process.exit(2);
  }
  return value;
}

/**
 * A comma-separated list from the environment; a value not in `allowed` stops the benchmark.
 * @param {string} name
 * @param {string} fallback
 * @param {readonly string[]} allowed
 * @returns {string[]}
 */
export function envList(name, fallback, allowed) {
  const values = (process.env[name]?.trim() || fallback)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = values.filter((v) => !allowed.includes(v));
  if (unknown.length > 0) {
    console.error(`${name}: unknown ${unknown.join(', ')} (known: ${allowed.join(', ')})`);
    process.exit(2);
  }
  return values;
}

// ---------------------------------------------------------------------------------------------
// Synthetic data: 1 trace + N llm_call events per batch, texts drawn from a fixed pool, seeded so
// every run sends the same mix.

/**
 * A xorshift32 generator from `seed`: the same numbers every run.
 * @param {number} seed
 * @returns {() => number}
 */
export function seededRandom(seed) {
  let state = seed;
  return () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 4294967296;
  };
}

const rand = seededRandom(0x2545f491);
/** @type {<T>(array: readonly T[]) => T} */
const pick = (array) =>
  /** @type {NonNullable<(typeof array)[number]>} */ (array[Math.floor(rand() * array.length)]);

const LETTERS = 'etaoinshrdlcumwfgypbvkjxqz';
const WORDS = Array.from({ length: 600 }, () => {
  const length = 2 + Math.floor(rand() * 9);
  let word = '';
  for (let i = 0; i < length; i++) word += LETTERS[Math.floor(rand() ** 1.6 * LETTERS.length)];
  return word;
});

/** @param {number} chars */
function sentence(chars) {
  let text = '';
  while (text.length < chars) {
    const word = pick(WORDS);
    text += text.length === 0 ? word.charAt(0).toUpperCase() + word.slice(1) : ` ${word}`;
    if (rand() < 0.08) text += '.';
  }
  return `${text.slice(0, chars - 1)}.`;
}
export const TEXTS = Array.from({ length: 2048 }, () => sentence(380 + Math.floor(rand() * 40)));
export const MODELS = ['gpt-4o-mini', 'gpt-4o', 'claude-sonnet-4', 'llama-3.1-70b'];

/**
 * @typedef {import('@flightlog/protocol').BufferBatchItem} BufferBatchItem
 * @typedef {import('@flightlog/protocol').Event} Event
 */

/**
 * Makes `makeItem(agentId, eventCount = eventsPerBatch)`: one BufferBatchItem (a trace snapshot)
 * with `eventCount` llm_call events.
 * @param {{ ulid: () => string, eventsPerBatch: number }} options
 * @returns {(agentId: string, eventCount?: number) => BufferBatchItem}
 */
export function createItemFactory({ ulid, eventsPerBatch }) {
  return function makeItem(agentId, eventCount = eventsPerBatch) {
    const traceId = ulid();
    const t0 = Date.now() - 60_000;
    /** @type {Event[]} */
    const events = [];
    let totalTokens = 0;
    let totalCost = 0;
    for (let sequence = 0; sequence < eventCount; sequence++) {
      const inputTokens = 80 + Math.floor(rand() * 400);
      const outputTokens = 20 + Math.floor(rand() * 200);
      const costUsd = Math.round(inputTokens * 0.15 + outputTokens * 0.6) / 1e6;
      totalTokens += inputTokens + outputTokens;
      totalCost += costUsd;
      const start = t0 + sequence * 1_000;
      const durationMs = 200 + Math.floor(rand() * 700);
      events.push({
        id: ulid(),
        traceId,
        sequence,
        type: 'llm_call',
        startedAt: new Date(start).toISOString(),
        endedAt: new Date(start + durationMs).toISOString(),
        durationMs,
        status: 'ok',
        payloadEncrypted: false,
        parentEventId: null,
        errorMessage: null,
        payload: {
          provider: 'openai',
          model: pick(MODELS),
          input: { messages: [{ role: 'user', content: pick(TEXTS) }] },
          output: { content: pick(TEXTS).slice(0, 80), finishReason: 'stop' },
          usage: { inputTokens, outputTokens, totalTokens: inputTokens + outputTokens },
          costUsd,
          streamed: false,
        },
      });
    }
    /** @type {BufferBatchItem['trace']} */
    const trace = {
      id: traceId,
      agentId,
      status: 'running',
      startedAt: new Date(t0).toISOString(),
      inputSummary: pick(TEXTS).slice(0, 160),
      endedAt: null,
      durationMs: null,
      outputSummary: null,
      errorMessage: null,
      tags: [],
      eventCount: events.length,
      totalTokens,
      totalCostUsd: totalCost.toFixed(6),
      totalLamports: '0',
      chainTxCount: 0,
      toolsCalled: [],
    };
    return { trace, events };
  };
}

// ---------------------------------------------------------------------------------------------
// Loopback helpers

/** @returns {Promise<number>} a loopback port nothing listens on (at the time of asking) */
export async function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = /** @type {net.AddressInfo} */ (server.address());
      server.close(() => resolve(port));
    });
  });
}

/**
 * @param {string} host
 * @param {number} port
 * @returns {Promise<boolean>}
 */
export async function reachable(host, port, timeoutMs = 2_000) {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    /** @param {boolean} ok */
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/**
 * @param {string} method
 * @param {string} url
 * @param {{ headers?: Record<string, string>, body?: string | Uint8Array, timeoutMs?: number }} [options]
 * @returns {Promise<{ status: number, text: string }>}
 */
export async function request(method, url, { headers = {}, body, timeoutMs = 10_000 } = {}) {
  const response = await globalThis.fetch(url, {
    method,
    headers,
    body,
    signal: globalThis.AbortSignal.timeout(timeoutMs),
  });
  return { status: response.status, text: await response.text() };
}

/**
 * The median of the numbers among `values` (null and undefined left out), or null.
 * @param {readonly (number | null | undefined)[]} values
 * @returns {number | null}
 */
export function median(values) {
  const sorted = values
    .filter(/** @returns {v is number} */ (v) => typeof v === 'number')
    .sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const mid = Math.floor(sorted.length / 2);
  const at = (/** @type {number} */ i) => /** @type {number} */ (sorted[i]);
  return sorted.length % 2 ? at(mid) : (at(mid - 1) + at(mid)) / 2;
}

/**
 * @typedef {{ p50: number | null, p99: number | null, max: number | null, min: number | null }} Percentiles
 */

/**
 * @param {Iterable<number>} values
 * @returns {Percentiles}
 */
export function percentiles(values) {
  const sorted = Float64Array.from(values).sort();
  if (sorted.length === 0) return { p50: null, p99: null, max: null, min: null };
  const at = (/** @type {number} */ q) =>
    /** @type {number} */ (sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]);
  return { p50: at(0.5), p99: at(0.99), max: at(1), min: /** @type {number} */ (sorted[0]) };
}

/** Variables of this shell that must not leak into a benchmarked server. */
export const SERVER_ENV_DROPPED = [
  'PORT',
  'HOST',
  'DATA_DIR',
  'DATABASE_URL',
  'DATABASE_SCHEMA',
  'DATABASE_POOL_SIZE',
  'REDIS_URL',
  'ADMIN_TOKEN',
  'JWT_SECRET',
  'JWT_JWKS_URL',
  'JWT_ISSUER',
  'JWT_AUDIENCE',
  'LOG_LEVEL',
  'NODE_OPTIONS',
];

/** Extra node flags for benchmarked servers (e.g. "--cpu-prof --cpu-prof-dir=/tmp/p"). */
export const serverNodeArgs = () =>
  (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);

// ---------------------------------------------------------------------------------------------
// Result files.

/**
 * @typedef {{ date: string, node: string, platform: string, cpuModel: string, cores: number,
 *   memoryBytes: number, gitCommit: string | null }} MachineInfo
 */

/**
 * Date, Node, OS, CPU, cores, memory and commit of this run.
 * @param {string} root the repository's checkout
 * @returns {MachineInfo}
 */
export function machineInfo(root) {
  /** @type {MachineInfo} */
  const meta = {
    date: new Date().toISOString(),
    node: process.version,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    cpuModel: os.cpus()[0]?.model?.trim() ?? 'unknown',
    cores: os.availableParallelism?.() ?? os.cpus().length,
    memoryBytes: os.totalmem(),
    gitCommit: null,
  };
  try {
    meta.gitCommit = execFileSync('git', ['rev-parse', 'HEAD'], {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    // not a git checkout
  }
  return meta;
}

/**
 * The pids in /proc (Linux); null where there is no /proc.
 * @returns {number[] | null}
 */
export function procPids() {
  let entries;
  try {
    entries = readdirSync('/proc');
  } catch {
    return null;
  }
  return entries.filter((entry) => /^\d+$/.test(entry)).map(Number);
}

/**
 * The pids of processes named `name` (their /proc comm).
 * @param {string} name
 * @returns {number[]}
 */
export function pidsNamed(name) {
  /** @type {number[]} */
  const pids = [];
  for (const pid of procPids() ?? []) {
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === name) pids.push(pid);
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/**
 * CPU time (user + system) a process has used, in ms, with `children` that of its children that
 * have exited and been waited for; from /proc (Linux), null elsewhere or when it is gone. What a
 * request costs a server, which a busy machine's wall-clock times hide.
 * @param {number} pid
 * @returns {number | null}
 */
export function cpuMsOf(pid, { children = false } = {}) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // the fields after the command name (which may hold spaces), from the third on: utime,
    // stime, cutime, cstime are the 14th to 17th fields of the line, in ticks of 1/100 s
    const fields = stat
      .slice(stat.lastIndexOf(')') + 2)
      .split(' ')
      .map(Number);
    const field = (/** @type {number} */ i) => fields[i] ?? 0;
    const own = field(11) + field(12);
    return ((children ? own + field(13) + field(14) : own) * 1000) / 100;
  } catch {
    return null;
  }
}

/**
 * Writes `value` as JSON (fractions rounded to 3 digits) through a temporary file.
 * @param {string} file
 * @param {unknown} value
 */
export function writeJsonAtomic(file, value) {
  mkdirSync(dirname(file), { recursive: true });
  const json = JSON.stringify(
    value,
    (_key, v) => (typeof v === 'number' && !Number.isInteger(v) ? Math.round(v * 1000) / 1000 : v),
    2,
  );
  writeFileSync(`${file}.tmp`, `${json}\n`);
  renameSync(`${file}.tmp`, file);
}

/** Redacts the user and password of a connection URL. */
export const redactUrl = (/** @type {string} */ url) => url.replace(/\/\/[^@/]*@/, '//***@');

/**
 * A text table: the first row is the header; columns `isLeft(c)` left-aligned, others right.
 * @param {readonly (readonly unknown[])[]} rows
 * @param {(column: number) => boolean} [isLeft]
 * @returns {string}
 */
export function textTable(rows, isLeft = (c) => c < 2) {
  const widths = (rows[0] ?? []).map((_, c) => Math.max(...rows.map((r) => String(r[c]).length)));
  return rows
    .map((r, i) => {
      const line = r
        .map((cell, c) =>
          isLeft(c) ? String(cell).padEnd(widths[c] ?? 0) : String(cell).padStart(widths[c] ?? 0),
        )
        .join('  ')
        .trimEnd();
      return i === 0 ? `${line}\n${widths.map((w) => '-'.repeat(w)).join('  ')}` : line;
    })
    .join('\n');
}

// ---------------------------------------------------------------------------------------------
// Child processes and cleanup.

/**
 * @typedef {object} ChildOutput
 * @property {string[]} lines the last 50 lines
 * @property {number} count lines so far
 * @property {string} all the first 64 KiB
 * @property {Record<string, number>} byMessage lines by message
 */

/**
 * @typedef {object} ChildHandle
 * @property {import('node:child_process').ChildProcess} child
 * @property {ChildOutput} output
 * @property {Promise<{ code: number | null, signal: NodeJS.Signals | null }>} exited
 * @property {() => boolean} alive
 * @property {() => Promise<{ code: number | null, signal: NodeJS.Signals | null }>} stop
 * @property {(pattern: RegExp, timeoutMs?: number) => Promise<RegExpExecArray>} waitFor
 */

/**
 * @typedef {ChildHandle & { base: string, port: number, adminToken: string, jwtSecret: string }} ServerHandle
 */

/**
 * For a bare baseline server run as a child (spawnCli with stdin: 'pipe'): listens on a free
 * loopback port, prints {"port": N}, and on SIGTERM or when the parent goes away (stdin closes)
 * runs `onStop`, closes every connection and exits.
 * @param {import('node:http').Server} server
 * @param {() => void} [onStop]
 */
export function serveUntilParentGoes(server, onStop = () => {}) {
  const stop = () => {
    onStop();
    server.close();
    server.closeAllConnections();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.stdin.on('end', stop);
  process.stdin.on('error', stop);
  process.stdin.resume();
  server.listen(0, '127.0.0.1', () => {
    const { port } = /** @type {net.AddressInfo} */ (server.address());
    process.stdout.write(`${JSON.stringify({ port })}\n`);
  });
}

/** Why something failed, for a log line: its stack or message, else the value. */
export const failureText = (/** @type {unknown} */ error, stack = false) =>
  error instanceof Error ? ((stack ? error.stack : undefined) ?? error.message) : String(error);

/**
 * Runs a benchmark's `main`, then its cleanups, and exits 0, or 1 with the failure printed.
 * @param {Lifecycle} lifecycle
 * @param {() => Promise<void>} main
 */
export async function runBenchmark(lifecycle, main) {
  try {
    await main();
    await lifecycle.runCleanups();
    process.exit(0);
  } catch (error) {
    console.error(`\n!!! BENCHMARK FAILED: ${failureText(error, true)}`);
    await lifecycle.runCleanups();
    process.exit(1);
  }
}

/** @typedef {() => unknown} Cleanup */

/**
 * @typedef {object} Lifecycle
 * @property {Set<import('node:child_process').ChildProcess>} children
 * @property {<T extends Cleanup>(fn: T) => T} onCleanup
 * @property {() => Promise<void>} runCleanups
 * @property {() => number} mark a mark for `runCleanupsFrom`: what is registered from now on
 * @property {(mark: number) => Promise<void>} runCleanupsFrom runs the cleanups registered
 *   since `mark`, newest first (one part's own resources)
 */

/**
 * The resources of one benchmark run: every child and every cleanup is released on every exit
 * path (normal end, error, SIGINT/SIGTERM, the `timeoutSeconds` watchdog).
 * @param {{ timeoutSeconds: number }} options
 * @returns {Lifecycle}
 */
export function createLifecycle({ timeoutSeconds }) {
  /** @type {Lifecycle['children']} */
  const children = new Set();
  /** @type {Cleanup[]} */
  const cleanups = [];
  /** @type {Promise<void> | undefined} */
  let cleaningUp;
  const runList = async (/** @type {Cleanup[]} */ list) => {
    while (list.length > 0) {
      const fn = /** @type {Cleanup} */ (list.pop());
      try {
        await Promise.race([fn(), sleepUnref(15_000)]);
      } catch (error) {
        console.error(`cleanup failed: ${failureText(error)}`);
      }
    }
  };
  /** @type {Lifecycle} */
  const lifecycle = {
    children,
    onCleanup(fn) {
      cleanups.push(fn);
      return fn;
    },
    runCleanups() {
      cleaningUp ??= runList(cleanups);
      return cleaningUp;
    },
    mark: () => cleanups.length,
    runCleanupsFrom: (mark) => runList(cleanups.splice(mark)),
  };
  process.on('exit', () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  });
  const abort = async (/** @type {string} */ reason, /** @type {number} */ code) => {
    console.error(`\n!!! ${reason}: stopping child processes and removing temporary data`);
    await lifecycle.runCleanups();
    process.exit(code);
  };
  process.once('SIGINT', () => void abort('interrupted', 130));
  process.once('SIGTERM', () => void abort('terminated', 143));
  const watchdog = setTimeout(
    () => void abort(`BENCHMARK TIMED OUT after ${timeoutSeconds} s`, 1),
    timeoutSeconds * 1000,
  );
  watchdog.unref();
  return lifecycle;
}

/**
 * @param {number} ms
 * @returns {Promise<void>}
 */
function sleepUnref(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/**
 * Keeps the last 50 lines of a child's output (and its first 64 KiB in `all`), counts lines by
 * message (`msg` of a JSON log line, else the line's start) and echoes its first 10 under `[tag]`.
 * @param {import('node:child_process').ChildProcess} child
 * @param {string} tag
 * @returns {ChildOutput}
 */
export function collectOutput(child, tag) {
  /** @type {ChildOutput} */
  const output = { lines: [], count: 0, all: '', byMessage: {} };
  const collect = (/** @type {Buffer} */ chunk) => {
    const text = chunk.toString('utf8');
    if (output.all.length < 64 * 1024) output.all += text;
    for (const line of text.split('\n')) {
      if (!line.trim()) continue;
      output.count++;
      let msg = line.slice(0, 120);
      try {
        msg = /** @type {{ msg?: string }} */ (JSON.parse(line)).msg ?? msg;
      } catch {
        // not a JSON log line
      }
      output.byMessage[msg] = (output.byMessage[msg] ?? 0) + 1;
      if (output.count <= 10) console.log(`    [${tag}] ${line.slice(0, 300)}`);
      else if (output.count === 11) console.log(`    [${tag}] (further output not shown)`);
      output.lines.push(line);
      if (output.lines.length > 50) output.lines.shift();
    }
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  return output;
}

/**
 * Runs `node <nodeArgs> <cli> <args>` as a child of the lifecycle with `env` (on top of this
 * shell's environment minus SERVER_ENV_DROPPED and the server's ANALYSIS_* / LIVE_* settings).
 * `stdin: 'pipe'` gives the child a stdin that closes when this process goes away. `stop()`
 * sends SIGTERM, SIGKILL after 15 s.
 * @param {Lifecycle} lifecycle
 * @param {{ cli: string, args?: string[], env?: Record<string, string | undefined>, tag: string,
 *   cwd?: string, nodeArgs?: string[], stdin?: 'pipe' | 'ignore' }} options
 * @returns {ChildHandle}
 */
export function spawnCli(lifecycle, { cli, args = [], env, tag, cwd, nodeArgs = [], stdin }) {
  const childEnv = { ...process.env };
  for (const name of SERVER_ENV_DROPPED) delete childEnv[name];
  for (const name of Object.keys(childEnv))
    if (/^(ANALYSIS|LIVE)_/.test(name) || name === 'SERVICE_MASTER_KEY') delete childEnv[name];
  Object.assign(childEnv, env);
  const child = spawn(process.execPath, [...nodeArgs, cli, ...args], {
    cwd,
    env: childEnv,
    stdio: [stdin ?? 'ignore', 'pipe', 'pipe'],
  });
  lifecycle.children.add(child);
  const output = collectOutput(child, tag);
  /** @type {ChildHandle['exited']} */
  const exited = new Promise((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  void exited.then(() => lifecycle.children.delete(child));
  /** @type {ChildHandle} */
  const handle = {
    child,
    output,
    exited,
    alive: () => child.exitCode === null && child.signalCode === null,
    async stop() {
      if (handle.alive()) {
        child.kill('SIGTERM');
        const result = await Promise.race([exited, sleepUnref(15_000)]);
        if (!result) {
          console.error(`!!! ${tag} did not stop within 15 s of SIGTERM: killing it`);
          child.kill('SIGKILL');
        }
      }
      return exited;
    },
    /** Resolves when the output matches `pattern` (the match), rejects if the child exits. */
    async waitFor(pattern, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const match = pattern.exec(output.all);
        if (match) return match;
        if (!handle.alive()) throw new Error(`${tag} exited:\n${output.lines.join('\n')}`);
        if (Date.now() > deadline) throw new Error(`${tag}: no ${pattern} after ${timeoutMs} ms`);
        await sleepUnref(50);
      }
    },
  };
  lifecycle.onCleanup(() => handle.stop());
  return handle;
}

/**
 * A bare baseline server run as a child, with the address it printed.
 * @typedef {ChildHandle & { port: number, base: string }} ChildServer
 */

/**
 * A baseline server child (one that calls serveUntilParentGoes), once it has printed its port.
 * @param {Lifecycle} lifecycle
 * @param {Parameters<typeof spawnCli>[1]} options
 * @returns {Promise<ChildServer>}
 */
export async function startChildServer(lifecycle, options) {
  const child = spawnCli(lifecycle, { stdin: 'pipe', ...options });
  const [, port] = await child.waitFor(/"port":(\d+)/, 10_000);
  return { ...child, port: Number(port), base: `http://127.0.0.1:${port}` };
}

/**
 * `flightlog serve` on a free port (node flags from BENCH_SERVER_NODE_ARGS), waited for until
 * /readyz answers 200. Its admin token and JWT secret are fresh unless `env` gives them (as
 * instances of one deployment share them).
 * @param {Lifecycle} lifecycle
 * @param {{ cli: string, env: Record<string, string | undefined>, tag?: string, cwd?: string }} options
 * @returns {Promise<ServerHandle>}
 */
export async function startFlightlogServer(lifecycle, { cli, env, tag = 'server', cwd }) {
  const port = await freePort();
  const adminToken = env.ADMIN_TOKEN ?? randomBytes(24).toString('hex');
  const jwtSecret = env.JWT_SECRET ?? randomBytes(32).toString('hex');
  const handle = spawnCli(lifecycle, {
    cli,
    cwd,
    nodeArgs: serverNodeArgs(),
    args: ['serve'],
    tag,
    env: {
      ...env,
      PORT: String(port),
      HOST: '127.0.0.1',
      ADMIN_TOKEN: adminToken,
      JWT_SECRET: jwtSecret,
      LOG_LEVEL: env.LOG_LEVEL ?? 'warn',
    },
  });
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (!handle.alive()) throw new Error(`${tag} exited during start-up:\n${handle.output.all}`);
    try {
      const { status } = await request('GET', `${base}/readyz`, { timeoutMs: 1_000 });
      if (status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${tag} not ready after 30 s`);
    await sleepUnref(100);
  }
  return { ...handle, base, port, adminToken, jwtSecret };
}
