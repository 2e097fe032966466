// One engine and mix: the sides alternated round after round (A B C A B C), their medians and
// ratios, then the service's latency at half its median rate, and the server's peak memory.

import { MIXES, OneShotPool, createBatchMaker, createBodyPool } from '../ingest-bodies.mjs';
import { cpuMsOf, median, pidsNamed } from '../support.mjs';
import { CFG, ulid } from './config.mjs';
import { runDbBaseline, runPacedDbBaseline } from './db-baseline.mjs';
import { runAutocannon, runPaced } from './http-load.mjs';
import { peakRss, resetPeakRss, scrapeMetrics } from './servers.mjs';

/**
 * @typedef {import('../support.mjs').ServerHandle} ServerHandle
 * @typedef {import('../support.mjs').ChildServer} ChildServer
 * @typedef {import('../batch-statement.mjs').Batch} Batch
 * @typedef {import('../ingest-bodies.mjs').MixName} MixName
 * @typedef {import('../ingest-bodies.mjs').BodyPool} BodyPool
 * @typedef {import('./config.mjs').Engine} Engine
 * @typedef {import('./config.mjs').Side} Side
 * @typedef {import('./db-baseline.mjs').Baseline} Baseline
 * @typedef {import('./db-baseline.mjs').DbRun} DbRun
 * @typedef {import('./http-load.mjs').Target} Target
 * @typedef {import('./http-load.mjs').Figures} Figures
 * @typedef {import('./http-load.mjs').Run} Run
 * @typedef {import('./http-load.mjs').HttpRun} HttpRun
 * @typedef {import('./http-load.mjs').PacedRun} PacedRun
 * @typedef {import('./http-load.mjs').PerProcess} PerProcess
 */

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
export const sidesOf = (engine) =>
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
 * @property {PacedRun} dbPaced the database baseline's write alone, paced at the same rate
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

/**
 * What a mix's runs draw on: the sides' targets, bodies and baseline batches built for one use
 * only, and the highest rate seen per side (to size the next run's pool).
 * @typedef {object} MixLoad
 * @property {MixName} mixName
 * @property {{ service: Target, http: Target, naive?: Target }} targets
 * @property {BodyPool} bodies
 * @property {OneShotPool<Batch>} items
 * @property {Record<Side, number>} estimate
 * @property {{ eventsPerBatch: number }} options
 * @property {() => void} ensureAlive
 */

/** Bodies for `seconds` at `rate`, with room to spare. */
const poolFor = (/** @type {number} */ rate, /** @type {number} */ seconds) =>
  Math.ceil(rate * seconds * 1.5) + 4 * CFG.connections;

/**
 * @param {MixContext} ctx
 * @param {MixName} mixName
 * @returns {MixLoad}
 */
function mixLoad({ server, bare, naive, apiKey, agentId, baselineAgentId }, mixName) {
  const mix = MIXES[mixName];
  const headers = {
    'content-type': 'application/json',
    'content-encoding': 'gzip',
  };
  return {
    mixName,
    targets: {
      service: {
        url: `${server.base}/v1/traces/batch`,
        headers: { ...headers, authorization: `Bearer ${apiKey}` },
        metrics: () => scrapeMetrics(server.base),
      },
      http: { url: `${bare.base}/v1/traces/batch`, headers },
      ...(naive ? { naive: { url: `${naive.base}/v1/traces/batch`, headers } } : {}),
    },
    bodies: createBodyPool({ mix: mixName, agentId }),
    items: new OneShotPool(createBatchMaker({ ulid, mix: mixName, agentId: baselineAgentId })),
    estimate: { ...mix.initialRates },
    options: { eventsPerBatch: mix.meanEvents },
    ensureAlive: () => {
      if (!server.alive())
        throw new Error(`server died during the run:\n${server.output.lines.join('\n')}`);
    },
  };
}

/**
 * One run of `side`, charged its CPU; `label` (none for a warm-up) names it in warnings.
 * @param {MixContext} ctx
 * @param {MixLoad} load
 * @param {Side} side
 * @param {number} seconds
 * @param {string} [label]
 * @returns {Promise<SideRun>}
 */
async function runSide(ctx, load, side, seconds, label) {
  const { engine, server, naive, baseline, baselineAgentId, warn } = ctx;
  const { mixName, bodies, items, estimate } = load;
  /** @type {Partial<Record<Side, number>>} */
  const pidOf = { service: server.child.pid, naive: naive?.child.pid };
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
    const target = /** @type {Target} */ (load.targets[side]);
    r = await runAutocannon(target, bodies, seconds, load.options);
    bodies.drain();
    load.ensureAlive();
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
}

/**
 * The warm-up of every side, then CFG.rounds rounds of every side, back to back.
 * @param {MixContext} ctx
 * @param {MixLoad} load
 * @returns {Promise<Round[]>}
 */
async function measureRounds(ctx, load) {
  const sides = sidesOf(ctx.engine);
  const { mixName } = load;
  if (CFG.warmupSeconds > 0)
    for (const side of sides) {
      const r = await runSide(ctx, load, side, CFG.warmupSeconds);
      console.log(`   ${mixName} warm-up  ${fmtRun(side, r)}`);
    }
  /** @type {Round[]} */
  const rounds = [];
  for (let round = 1; round <= CFG.rounds; round++) {
    // every side of the engine, filled in just below
    const entry = /** @type {Round} */ ({ round });
    for (const side of sides) {
      entry[side] = await runSide(ctx, load, side, CFG.seconds, `round ${round}`);
      console.log(
        `   ${mixName} round ${round}  ${fmtRun(side, /** @type {SideRun} */ (entry[side]))}`,
      );
    }
    rounds.push(entry);
  }
  return rounds;
}

/**
 * The service over the baselines, by median batches/s (and CPU per batch against naive).
 * @param {BySide<SideSummary>} medians
 * @param {Round[]} rounds
 * @returns {Ratios}
 */
function ratiosOf(medians, rounds) {
  const { service, http: bareHttp, db, naive: naiveSide } = medians;
  return {
    serviceVsDb: service.batchesPerSec / db.batchesPerSec,
    ...(naiveSide
      ? {
          serviceVsNaive: service.batchesPerSec / naiveSide.batchesPerSec,
          // Item 1's figure: the service's own CPU per batch over the naive server's, the
          // median of the rounds' ratios (the two run back to back in each round; CPU per
          // batch drifts by a quarter between rounds on this virtual machine).
          serverCpuVsNaive: pairedCpuRatio(rounds, 'server'),
          postgresCpuVsNaive: pairedCpuRatio(rounds, 'postgres'),
        }
      : {}),
    serviceVsHttp: service.batchesPerSec / bareHttp.batchesPerSec,
    dbVsHttp: db.batchesPerSec / bareHttp.batchesPerSec,
  };
}

/**
 * The service at half its median rate, with autocannon's overallRate and the paced sender, then
 * the database baseline's write paced at the same rate: the p99 the database alone has there.
 * @param {MixContext} ctx
 * @param {MixLoad} load
 * @param {number} rate
 * @returns {Promise<HalfRate>}
 */
async function measureHalfRate(ctx, load, rate) {
  const { warn } = ctx;
  const { mixName, bodies, items, targets, options } = load;
  await bodies.fill(poolFor(rate, CFG.seconds));
  const ac = await runAutocannon(targets.service, bodies, CFG.seconds, {
    ...options,
    overallRate: rate,
  });
  bodies.drain();
  load.ensureAlive();
  for (const w of checkHttpRun(`${mixName} half-rate autocannon`, ac)) warn(w);
  console.log(`   ${mixName} half-rate ${rate}/s autocannon  ${fmtRun('service', ac)}`);
  await bodies.fill(poolFor(rate, CFG.seconds));
  const paced = await runPaced(targets.service, bodies, CFG.seconds, { ...options, rate });
  bodies.drain();
  load.ensureAlive();
  if (paced.non2xx + paced.errors > 0)
    warn(`${mixName} half-rate paced: ${paced.non2xx} non-2xx, ${paced.errors} errors`);
  console.log(`   ${mixName} half-rate ${rate}/s paced       ${fmtRun('service', paced)}`);
  await items.fill(poolFor(rate, CFG.seconds));
  const dbPaced = await runPacedDbBaseline(ctx.baseline, ctx.baselineAgentId, items, CFG.seconds, {
    ...options,
    rate,
  });
  items.drain();
  if (dbPaced.errors > 0) warn(`${mixName} half-rate db paced: ${dbPaced.errors} failed writes`);
  console.log(`   ${mixName} half-rate ${rate}/s db paced    ${fmtRun('db', dbPaced)}`);
  return {
    rate,
    autocannon: { ...ac, targetRate: rate },
    paced,
    dbPaced,
    meetsP99Target: {
      autocannon: ac.p99Ms !== null && ac.p99Ms < CFG.targetP99Ms,
      paced: paced.p99Ms !== null && paced.p99Ms < CFG.targetP99Ms,
    },
  };
}

/**
 * @param {MixContext} ctx
 * @param {MixName} mixName
 * @returns {Promise<MixResult>}
 */
export async function benchMix(ctx, mixName) {
  const { engine, server } = ctx;
  // the rest is filled in below, before it is returned
  const result = /** @type {MixResult} */ ({
    mix: mixName,
    description: MIXES[mixName].description,
    rounds: /** @type {Round[]} */ ([]),
  });
  const load = mixLoad(ctx, mixName);
  try {
    const sample = Array.from({ length: 60 }, () => load.bodies.make());
    result.bodyJsonBytes = Math.round(sample.reduce((s, b) => s + b.jsonBytes, 0) / 60);
    result.bodyGzipBytes = Math.round(sample.reduce((s, b) => s + b.gz.length, 0) / 60);
    const rssReset = resetPeakRss(server.child.pid);
    result.rounds.push(...(await measureRounds(ctx, load)));
    // a round has every side of the engine, and so has the median
    result.median = /** @type {BySide<SideSummary>} */ (
      Object.fromEntries(
        sidesOf(engine).map((side) => [
          side,
          summarise(result.rounds.map((r) => /** @type {SideRun} */ (r[side]))),
        ]),
      )
    );
    result.ratios = ratiosOf(result.median, result.rounds);
    result.meetsRatioTarget = result.ratios.serviceVsDb >= CFG.targetRatio;
    const rate = Math.max(1, Math.round(result.median.service.batchesPerSec / 2));
    result.halfRate = await measureHalfRate(ctx, load, rate);
    const end = await scrapeMetrics(server.base);
    const peak = peakRss(server.child.pid);
    result.serverRssPeakBytes = rssReset && peak ? peak : null;
    result.serverRssAtEndBytes = end.rssBytes ?? null;
    const rss = result.serverRssPeakBytes ?? result.serverRssAtEndBytes;
    result.meetsRssTarget = rss === null ? null : rss < CFG.targetRssBytes[engine];
    return result;
  } finally {
    await load.bodies.close();
  }
}
