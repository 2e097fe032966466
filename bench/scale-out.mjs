// Scale-out benchmark (issue 22, item 5): one Flightlog instance against two, on one PostgreSQL
// and one Redis, all on this machine: the load generator, PostgreSQL, Redis and every instance
// share its cores, so this measures what a second instance costs and what each process spends
// per batch, not what more machines would give. From those CPU figures it projects, on paper,
// where throughput goes with more cores.
//
// Two `flightlog serve` processes (the built server) share a fresh schema of BENCH_DATABASE_URL,
// a fresh Redis prefix of BENCH_REDIS_URL (the live bus), the admin token and the JWT secret. One
// agent; one live stream (SSE) of that agent open on each instance for the whole run. Sides, in
// alternating order, BENCH_ROUNDS (3) rounds of BENCH_SECONDS (6) after a warm-up of each:
//
//   one   autocannon with BENCH_CONNECTIONS (16) connections to instance A
//   two   two autocannons at once, half the connections each, to A and to B
//
// Bodies: the ingest benchmark's BENCH_MIX (large: 1 trace + 20 llm_call events, gzip), each used
// once, built before each run by worker threads. Per run: batches/s (2xx), p99, and the CPU time
// per batch of each process, from /proc: each instance, PostgreSQL (every process named
// `postgres`), Redis (`redis-server`) and the load generator (this process, autocannon in it).
// Nothing else should run meanwhile: other PostgreSQL sessions would be counted in.
//
// After the last run: every batch the instances stored must have reached both live streams (the
// trace ids in `accepted_batches` against those each stream received). Prints a table and the
// projection, writes bench/results/scale-out-latest.json. A benchmark, not a test: nothing is
// asserted; anomalies are printed loudly. PostgreSQL or Redis unreachable: skipped loudly.
//
// Env: BENCH_SECONDS (6), BENCH_ROUNDS (3), BENCH_WARMUP_SECONDS (2), BENCH_CONNECTIONS (16),
//      BENCH_MIX (large|small), BENCH_DATABASE_URL (postgres://postgres@127.0.0.1:5432/test),
//      BENCH_REDIS_URL (redis://127.0.0.1:6379), BENCH_TIMEOUT_SECONDS.

import { randomBytes } from 'node:crypto';
import http from 'node:http';
import os from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { SignJWT } from 'jose';
import pg from 'pg';
import { MIXES, createBodyPool } from './ingest-bodies.mjs';
import {
  autocannon,
  cpuMsOf,
  createLifecycle,
  envNumber,
  machineInfo,
  median,
  pidsNamed,
  reachable,
  redactUrl,
  request,
  runBenchmark,
  startFlightlogServer,
  textTable,
  writeJsonAtomic,
} from './support.mjs';

/**
 * @typedef {import('./support.mjs').ServerHandle} ServerHandle
 * @typedef {'one' | 'two'} Side one instance, or two sharing the connections
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLI = join(ROOT, 'packages/server/dist/cli.js');
const RESULTS = join(ROOT, 'bench/results/scale-out-latest.json');

/**
 * @typedef {object} Config
 * @property {number} seconds
 * @property {number} rounds
 * @property {number} warmupSeconds
 * @property {number} connections
 * @property {keyof typeof MIXES} mix BENCH_MIX (checked just below: the run stops otherwise)
 * @property {string} databaseUrl
 * @property {string} redisUrl
 * @property {number} plannedSeconds set below, from the rest
 * @property {number} timeoutSeconds set below, from plannedSeconds
 */

const CFG = /** @type {Config} */ ({
  seconds: envNumber('BENCH_SECONDS', 6, 1, 600),
  rounds: envNumber('BENCH_ROUNDS', 3, 1, 50),
  warmupSeconds: envNumber('BENCH_WARMUP_SECONDS', 2, 0, 60),
  connections: envNumber('BENCH_CONNECTIONS', 16, 2, 1000),
  mix: process.env.BENCH_MIX ?? 'large',
  databaseUrl: process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
  redisUrl: process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379',
});
if (!MIXES[CFG.mix]) {
  console.error(`BENCH_MIX must be one of ${Object.keys(MIXES).join(', ')}`);
  process.exit(2);
}
/** @type {Side[]} */
const SIDES = ['one', 'two'];
CFG.plannedSeconds = Math.round(
  30 + SIDES.length * (CFG.warmupSeconds + CFG.rounds * CFG.seconds) * 1.6,
);
CFG.timeoutSeconds = envNumber('BENCH_TIMEOUT_SECONDS', 2 * CFG.plannedSeconds + 120, 30, 7200);

const lifecycle = createLifecycle({ timeoutSeconds: CFG.timeoutSeconds });

// ---------------------------------------------------------------------------------------------
// CPU time of processes, from /proc (Linux).

/**
 * CPU ms so far of each measured process (PostgreSQL and Redis summed over their processes). A
 * backend that exits meanwhile (the pool closes idle connections) would take its time with it:
 * each process's exited children are counted too, so the postmaster carries their time on.
 * @param {ServerHandle[]} instances
 */
function cpuSnapshot(instances) {
  const sum = (/** @type {number[]} */ pids) =>
    pids.reduce((total, pid) => total + (cpuMsOf(pid, { children: true }) ?? 0), 0);
  const own = process.cpuUsage();
  return {
    // a started server has a pid
    instances: instances.map(
      (instance) => cpuMsOf(/** @type {number} */ (instance.child.pid)) ?? 0,
    ),
    postgres: sum(pidsNamed('postgres')),
    redis: sum(pidsNamed('redis-server')),
    loadGenerator: (own.user + own.system) / 1000,
  };
}

// ---------------------------------------------------------------------------------------------
// Live streams: the trace ids each receives.

/**
 * @typedef {object} LiveStream
 * @property {Set<string>} traceIds
 * @property {number} warnings `warning` events (the server dropped messages for this stream)
 * @property {boolean} ended
 * @property {Error} [error]
 * @property {() => void} close
 */

/**
 * An agent's live stream on one instance, collecting the trace ids of its `trace` messages.
 * @param {string} base
 * @param {string} agentId
 * @param {string} token
 * @returns {Promise<LiveStream>}
 */
function openLiveStream(base, agentId, token) {
  return new Promise((resolve, reject) => {
    // `close` is set just below, once the request exists
    const stream = /** @type {LiveStream} */ ({ traceIds: new Set(), warnings: 0, ended: false });
    const req = http.request(`${base}/v1/agents/${agentId}/live`, {
      headers: { accept: 'text/event-stream', authorization: `Bearer ${token}` },
    });
    stream.close = () => req.destroy();
    req.on('response', (res) => {
      if (res.statusCode !== 200) {
        reject(new Error(`the live stream answered ${res.statusCode}`));
        res.resume();
        return;
      }
      res.setEncoding('utf8');
      let buffer = '';
      res.on('data', (chunk) => {
        buffer += chunk;
        let at;
        while ((at = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, at);
          buffer = buffer.slice(at + 2);
          if (/^event: warning$/m.test(block)) stream.warnings++;
          if (!/^event: trace$/m.test(block)) continue;
          const id = /^data: \{"trace":\{"id":"([^"]+)"/m.exec(block)?.[1];
          if (id) stream.traceIds.add(id);
        }
      });
      res.on('close', () => (stream.ended = true));
      resolve(stream);
    });
    req.on('error', (error) => {
      stream.ended = true;
      stream.error = error;
      reject(error);
    });
    req.end();
  });
}

// ---------------------------------------------------------------------------------------------
// The load.

/** @typedef {import('./ingest-bodies.mjs').BodyPool} BodyPool */

/**
 * @param {ServerHandle} target
 * @param {string} apiKey
 * @param {BodyPool} bodies
 * @param {number} connections
 * @param {number} seconds
 */
function runAutocannon(target, apiKey, bodies, connections, seconds) {
  return autocannon({
    url: `${target.base}/v1/traces/batch`,
    method: 'POST',
    connections,
    duration: seconds,
    timeout: 10,
    headers: {
      authorization: `Bearer ${apiKey}`,
      'content-type': 'application/json',
      'content-encoding': 'gzip',
    },
    requests: [{ setupRequest: (req) => ({ ...req, body: bodies.next().gz }) }],
  });
}

/**
 * CPU ms per batch of each process; null when no batch was answered 2xx.
 * @typedef {object} CpuPerBatch
 * @property {(number | null)[]} instances A, B
 * @property {number | null} postgres
 * @property {number | null} redis
 * @property {number | null} loadGenerator
 */

/**
 * @typedef {object} SideRun
 * @property {Side} side
 * @property {number} batchesPerSec
 * @property {number} p99Ms the worse of the targets'
 * @property {number} ok
 * @property {number} non2xx
 * @property {number} errors
 * @property {CpuPerBatch} cpuMsPerBatch
 * @property {number} bodiesBuiltDuringRun
 */

/** runSide keeps the fastest rate it has seen on itself, to size the next run's pool. */
/** @typedef {typeof runSide & { fastest?: number }} RunSideWithFastest */

/**
 * One side for `seconds`: batches/s, p99 and CPU ms per batch of each process.
 * @param {Side} side
 * @param {ServerHandle[]} instances A and B
 * @param {string} apiKey
 * @param {BodyPool} bodies
 * @param {number} seconds
 * @returns {Promise<SideRun>}
 */
async function runSide(side, instances, apiKey, bodies, seconds) {
  const targets = side === 'one' ? [/** @type {ServerHandle} */ (instances[0])] : instances;
  const perTarget = Math.max(1, Math.floor(CFG.connections / targets.length));
  // bodies for the fastest rate seen so far, doubled: none is built during the run (the outer
  // cast keeps prettier from moving the inner one onto the whole sum)
  await bodies.fill(
    Math.ceil(
      /** @type {number} */ (/** @type {RunSideWithFastest} */ (runSide).fastest ?? 1500) *
        seconds *
        2,
    ),
  );
  const before = cpuSnapshot(instances);
  const results = await Promise.all(
    targets.map((target) => runAutocannon(target, apiKey, bodies, perTarget, seconds)),
  );
  await sleep(300); // requests cut off at the end of the run finish on the server
  const after = cpuSnapshot(instances);
  bodies.drain();
  const ok = results.reduce((n, r) => n + r['2xx'], 0);
  const duration = Math.max(...results.map((r) => r.duration));
  const perBatch = (/** @type {number} */ a, /** @type {number} */ b) =>
    ok > 0 ? (b - a) / ok : null;
  const batchesPerSec = ok / duration;
  /** @type {RunSideWithFastest} */ (runSide).fastest = Math.max(
    /** @type {RunSideWithFastest} */ (runSide).fastest ?? 0,
    batchesPerSec,
  );
  return {
    side,
    batchesPerSec,
    p99Ms: Math.max(...results.map((r) => r.latency.p99)),
    ok,
    non2xx: results.reduce((n, r) => n + r.non2xx, 0),
    errors: results.reduce((n, r) => n + r.errors, 0),
    cpuMsPerBatch: {
      // both snapshots are of `instances`
      instances: instances.map((_, i) =>
        perBatch(
          /** @type {number} */ (before.instances[i]),
          /** @type {number} */ (after.instances[i]),
        ),
      ),
      postgres: perBatch(before.postgres, after.postgres),
      redis: perBatch(before.redis, after.redis),
      loadGenerator: perBatch(before.loadGenerator, after.loadGenerator),
    },
    bodiesBuiltDuringRun: bodies.madeDuringRun,
  };
}

const ms = (/** @type {number | null | undefined} */ v) =>
  v === null || v === undefined ? 'n/a' : v.toFixed(3);

/**
 * @param {string} label
 * @param {SideRun} r
 */
function describeRun(label, r) {
  const c = r.cpuMsPerBatch;
  return (
    `${label.padEnd(14)} ${r.side.padEnd(4)} ${r.batchesPerSec.toFixed(1).padStart(8)} batches/s` +
    `  p99 ${String(r.p99Ms).padStart(5)} ms  CPU ms/batch: A ${ms(c.instances[0])}` +
    ` B ${ms(c.instances[1])} postgres ${ms(c.postgres)} redis ${ms(c.redis)}` +
    ` load ${ms(c.loadGenerator)}${r.non2xx + r.errors > 0 ? `  !!! ${r.non2xx} non-2xx, ${r.errors} errors` : ''}`
  );
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const db = new URL(CFG.databaseUrl);
  const redis = new URL(CFG.redisUrl);
  for (const [what, host, port] of /** @type {[string, string, number][]} */ ([
    ['PostgreSQL', db.hostname, Number(db.port || 5432)],
    ['Redis', redis.hostname, Number(redis.port || 6379)],
  ]))
    if (!(await reachable(host, port))) {
      console.log(`\n${'!'.repeat(78)}\n!!! SKIPPING: ${what} at ${host}:${port} is unreachable`);
      console.log('!'.repeat(78));
      return;
    }
  const loadBefore = os.loadavg();
  console.log(
    `Flightlog scale-out benchmark: one instance vs two on one PostgreSQL and Redis; ${CFG.mix} ` +
      `batches, ${CFG.connections} connections; ${CFG.rounds} rounds x ${CFG.seconds} s per side ` +
      `(+ ${CFG.warmupSeconds} s warm-up); planned ~${CFG.plannedSeconds} s; load average ` +
      loadBefore.map((l) => l.toFixed(2)).join(' '),
  );

  const tag = randomBytes(4).toString('hex');
  const schema = `bench_scale_${tag}`;
  lifecycle.onCleanup(async () => {
    const client = new pg.Client({ connectionString: CFG.databaseUrl });
    await client.connect();
    try {
      await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    } finally {
      await client.end();
    }
  });
  const env = {
    DATABASE_URL: CFG.databaseUrl,
    DATABASE_SCHEMA: schema,
    REDIS_URL: CFG.redisUrl,
    LIVE_REDIS_PREFIX: `flightlog-bench-scale:${tag}:`,
    ADMIN_TOKEN: randomBytes(24).toString('hex'),
    JWT_SECRET: randomBytes(32).toString('hex'),
  };
  // one after the other: the first applies the migrations
  const a = await startFlightlogServer(lifecycle, { cli: CLI, cwd: ROOT, env, tag: 'A' });
  const b = await startFlightlogServer(lifecycle, { cli: CLI, cwd: ROOT, env, tag: 'B' });
  const instances = [a, b];

  const admin = { authorization: `Bearer ${env.ADMIN_TOKEN}`, 'content-type': 'application/json' };
  const created = await request('POST', `${a.base}/admin/v1/agents`, {
    headers: admin,
    body: '{}',
  });
  if (created.status !== 201) throw new Error(`agent creation answered ${created.status}`);
  const agent = /** @type {{ agentId: string, apiKey: string }} */ (JSON.parse(created.text));
  const granted = await request(
    'PUT',
    `${a.base}/admin/v1/agents/${agent.agentId}/members/bench-viewer`,
    { headers: admin, body: '{"role":"viewer"}' },
  );
  if (granted.status !== 200) throw new Error(`member grant answered ${granted.status}`);
  const token = await new SignJWT({})
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject('bench-viewer')
    .setIssuedAt()
    .setExpirationTime('2h')
    .sign(Buffer.from(env.JWT_SECRET, 'utf8'));
  const streams = await Promise.all(
    instances.map((instance) => openLiveStream(instance.base, agent.agentId, token)),
  );
  lifecycle.onCleanup(() => streams.forEach((s) => s.close()));

  const bodies = createBodyPool({ mix: CFG.mix, agentId: agent.agentId });
  lifecycle.onCleanup(() => bodies.close());
  /**
   * One round: each side once, in alternating order.
   * @typedef {{ round: number } & Record<Side, SideRun>} Round
   */
  /** @type {Round[]} */
  const rounds = [];
  try {
    for (const side of SIDES)
      console.log(
        describeRun(
          'warm-up',
          await runSide(side, instances, agent.apiKey, bodies, CFG.warmupSeconds),
        ),
      );
    for (let round = 1; round <= CFG.rounds; round++) {
      // the sides are filled in just below
      const entry = /** @type {Round} */ ({ round });
      // alternating which side goes first: neighbouring runs see the same machine
      for (const side of round % 2 === 1 ? SIDES : [...SIDES].reverse()) {
        entry[side] = await runSide(side, instances, agent.apiKey, bodies, CFG.seconds);
        console.log(describeRun(`round ${round}`, entry[side]));
      }
      rounds.push(entry);
    }
  } finally {
    await bodies.close();
  }

  // every stored batch on both streams (published after each commit; give them a moment)
  await sleep(2_000);
  const client = new pg.Client({ connectionString: CFG.databaseUrl });
  await client.connect();
  /** @type {string[]} */
  let stored;
  try {
    const { rows } = await client.query(
      `SELECT trace_id FROM "${schema}".accepted_batches WHERE agent_id = $1`,
      [agent.agentId],
    );
    stored = rows.map((r) => r.trace_id);
  } finally {
    await client.end();
  }
  const live = streams.map((stream, i) => ({
    instance: i === 0 ? 'A' : 'B',
    received: stream.traceIds.size,
    missing: stored.filter((id) => !stream.traceIds.has(id)).length,
    warnings: stream.warnings,
    endedEarly: stream.ended,
  }));

  /**
   * The median over the rounds of what `pick` takes from `side`'s run.
   * @param {Side} side
   * @param {(run: SideRun) => number | null | undefined} pick
   */
  const med = (side, pick) => median(rounds.map((r) => pick(r[side])).filter((v) => v !== null));
  /**
   * Medians over the rounds; CPU ms per batch null when no run of the side had one.
   * @typedef {object} SideSummary
   * @property {number} batchesPerSec
   * @property {number} p99Ms
   * @property {{ instanceA: number | null, instanceB: number | null, postgres: number | null,
   *   redis: number | null, loadGenerator: number | null }} cpuMsPerBatch
   */
  // every side is in SIDES
  const summary = /** @type {Record<Side, SideSummary>} */ (
    Object.fromEntries(
      SIDES.map((side) => [
        side,
        {
          // CFG.rounds >= 1, and these are never null: never empty
          batchesPerSec: /** @type {number} */ (med(side, (r) => r.batchesPerSec)),
          p99Ms: /** @type {number} */ (med(side, (r) => r.p99Ms)),
          cpuMsPerBatch: {
            instanceA: med(side, (r) => r.cpuMsPerBatch.instances[0]),
            instanceB: med(side, (r) => r.cpuMsPerBatch.instances[1]),
            postgres: med(side, (r) => r.cpuMsPerBatch.postgres),
            redis: med(side, (r) => r.cpuMsPerBatch.redis),
            loadGenerator: med(side, (r) => r.cpuMsPerBatch.loadGenerator),
          },
        },
      ]),
    )
  );
  const ratio = summary.two.batchesPerSec / summary.one.batchesPerSec;
  const perRound = rounds.map((r) => r.two.batchesPerSec / r.one.batchesPerSec);

  // The projection, on paper: a core per instance carries 1000 / (its CPU ms per batch)
  // batches/s; PostgreSQL's CPU per batch says how many batches/s one of its cores carries.
  const service = summary.one.cpuMsPerBatch.instanceA;
  const database = summary.one.cpuMsPerBatch.postgres;
  const projection = {
    batchesPerSecPerInstanceCore: service ? 1000 / service : null,
    batchesPerSecPerPostgresCore: database ? 1000 / database : null,
    instancesPerPostgresCore: service && database ? service / database : null,
  };

  console.log(
    `\nFlightlog scale-out benchmark — ${new Date().toISOString()}, node ${process.version}, ` +
      `${os.cpus()[0]?.model ?? 'cpu'} x ${os.cpus().length}\n`,
  );
  const f = (/** @type {number | null | undefined} */ v, d = 3) =>
    v === null || v === undefined ? 'n/a' : v.toFixed(d);
  console.log(
    textTable(
      [
        [
          'side',
          'batches/s',
          'p99 ms',
          'A ms/batch',
          'B ms/batch',
          'postgres',
          'redis',
          'load gen',
        ],
        ...SIDES.map((side) => {
          const s = summary[side];
          const c = s.cpuMsPerBatch;
          return [
            `${side} MEDIAN`,
            f(s.batchesPerSec, 1),
            f(s.p99Ms, 1),
            f(c.instanceA),
            side === 'one' ? '-' : f(c.instanceB),
            f(c.postgres),
            f(c.redis),
            f(c.loadGenerator),
          ];
        }),
      ],
      (c) => c < 1,
    ),
  );
  console.log(
    `\ntwo instances / one: ${ratio.toFixed(2)} (per round ${perRound.map((r) => r.toFixed(2)).join(', ')}); ` +
      `target: within 10 % (>= 0.90): ${ratio >= 0.9 ? 'met' : 'MISSED'}`,
  );
  for (const l of live)
    console.log(
      `live stream on ${l.instance}: ${l.received} of ${stored.length} stored batches received, ` +
        `${l.missing} missing${l.missing > 0 || l.endedEarly ? '  !!!' : ''}` +
        `${l.warnings ? `, ${l.warnings} warnings` : ''}${l.endedEarly ? ', ENDED EARLY' : ''}`,
    );
  console.log(
    `projection: one core per instance carries ~${f(projection.batchesPerSecPerInstanceCore, 0)} ` +
      `${CFG.mix} batches/s; one PostgreSQL core ~${f(projection.batchesPerSecPerPostgresCore, 0)}/s, ` +
      `so PostgreSQL binds at ~${f(projection.instancesPerPostgresCore, 1)} instance cores per core of its own`,
  );
  writeJsonAtomic(RESULTS, {
    ...machineInfo(ROOT),
    date: new Date().toISOString(),
    config: { ...CFG, databaseUrl: redactUrl(CFG.databaseUrl) },
    loadAverageBefore: loadBefore,
    loadAverageAfter: os.loadavg(),
    rounds,
    summary,
    twoOverOne: ratio,
    twoOverOnePerRound: perRound,
    meetsTarget: ratio >= 0.9,
    live: { stored: stored.length, streams: live },
    projection,
  });
  console.log(`\nwrote ${RESULTS}`);
}

await runBenchmark(lifecycle, main);
