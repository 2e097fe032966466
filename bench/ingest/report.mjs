// The printed report: every run and median per engine and mix, then notes (CPU per batch, the
// ratios against their targets, the stored counts, PGlite's fsync cost).

import { textTable } from '../support.mjs';
import { CFG } from './config.mjs';
import { sidesOf } from './mix.mjs';

/**
 * @typedef {import('../support.mjs').MachineInfo} MachineInfo
 * @typedef {import('./config.mjs').Side} Side
 * @typedef {import('./engine.mjs').EngineResult} EngineResult
 * @typedef {import('./http-load.mjs').Figures} Figures
 * @typedef {import('./http-load.mjs').Run} Run
 * @typedef {import('./http-load.mjs').PerProcess} PerProcess
 * @typedef {import('./mix.mjs').MixResult} MixResult
 * @typedef {import('./mix.mjs').SideRun} SideRun
 * @typedef {import('./mix.mjs').SideSummary} SideSummary
 */

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
export function fsyncCost(results) {
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
 * The table rows of one engine's mix (every round, the medians, half rate) and its notes.
 * @param {EngineResult} r
 * @param {MixResult} m
 * @param {(string | number)[][]} rows
 * @param {string[]} notes
 */
function mixReport(r, m, rows, notes) {
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
  const failed = (/** @type {Run} */ x) => (x.non2xx ?? 0) + (x.errors ?? 0) + (x.timeouts ?? 0);
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
  const { autocannon: ac, paced, dbPaced, rate } = m.halfRate;
  row(`half rate ${rate}/s autocannon`, ac, failed(ac));
  row(`half rate ${rate}/s paced`, paced, failed(paced));
  // results written before the database was paced too have none
  if (dbPaced) row(`half rate ${rate}/s db paced`, dbPaced, failed(dbPaced));
  notes.push(
    `${r.engine} ${m.mix}: service/db = ${n(m.ratios.serviceVsDb, 2)} (target >= ${CFG.targetRatio}: ${met(m.meetsRatioTarget)}), ` +
      `service/http = ${n(m.ratios.serviceVsHttp, 2)}, db/http = ${n(m.ratios.dbVsHttp, 2)}; ` +
      `half-rate p99 ${n(paced.p99Ms)} ms paced (target < ${CFG.targetP99Ms} ms: ${met(m.halfRate.meetsP99Target.paced)}; ` +
      `the database's write alone, paced the same: ${n(dbPaced?.p99Ms)} ms), ` +
      `${n(ac.p99Ms)} ms autocannon; server RSS peak ${mb(m.serverRssPeakBytes)} (target < ${mb(CFG.targetRssBytes[r.engine])}: ${met(m.meetsRssTarget)})`,
  );
}

/**
 * @param {EngineResult[]} results
 * @param {RunInfo} meta
 */
export function report(results, meta) {
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
      if (m.median) mixReport(r, m, rows, notes);
      else notes.push(`${r.engine} ${m.mix}: FAILED (${m.error})`);
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
