// HTTP load on a side: autocannon (closed loop, or overallRate), and an evenly paced open-loop
// sender.

import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { paced, post } from '../load.mjs';
import { autocannon, percentiles } from '../support.mjs';
import { CFG } from './config.mjs';

/**
 * @typedef {import('../ingest-bodies.mjs').BodyPool} BodyPool
 * @typedef {import('./servers.mjs').ServerMetrics} ServerMetrics
 */

/**
 * Where an HTTP side's load goes; `metrics` (the service's) counts what the server accepted.
 * @typedef {{ url: string, headers: Record<string, string>,
 *   metrics?: () => Promise<ServerMetrics> }} Target
 */

/**
 * The figures of a run that a table row shows; also those of a side's median.
 * @typedef {object} Figures
 * @property {number} batchesPerSec
 * @property {number} eventsPerSec
 * @property {number | null} p50Ms
 * @property {number | null} p99Ms
 */

/**
 * CPU of the server that answered a run and of PostgreSQL; null where not measured (no /proc,
 * no such process).
 * @typedef {{ server: number | null, postgres: number | null }} PerProcess
 */

/**
 * What every run reports: an HTTP side's, a database baseline's, a paced one's.
 * @typedef {object} RunFields
 * @property {number | null} maxMs
 * @property {number} ok batches that succeeded within the run
 * @property {number} errors
 * @property {number} [non2xx] HTTP runs only
 * @property {number} [timeouts] autocannon runs only
 * @property {PerProcess} [cpuUsPerBatch] µs per batch, set once the run is over
 * @typedef {Figures & RunFields} Run
 */

/**
 * An autocannon run of an HTTP side (`serverAccepted` / `serverDuplicates` with a `metrics`).
 * @typedef {Run & { non2xx: number, timeouts: number, statusCodes: Record<string, number>,
 *   durationSec: number, serverAccepted?: number, serverDuplicates?: number,
 *   bodiesBuiltDuringRun: number }} HttpRun
 */

/**
 * @param {Target} target
 * @param {BodyPool} bodies
 * @param {number} seconds
 * @param {{ overallRate?: number, eventsPerBatch: number }} load
 * @returns {Promise<HttpRun>}
 */
export async function runAutocannon(target, bodies, seconds, { overallRate, eventsPerBatch }) {
  const before = target.metrics ? await target.metrics() : undefined;
  const result = await autocannon({
    url: target.url,
    method: 'POST',
    connections: CFG.connections,
    duration: seconds,
    timeout: 10,
    headers: target.headers,
    requests: [{ setupRequest: (req) => ({ ...req, body: bodies.next().gz }) }],
    ...(overallRate
      ? // autocannon corrects for coordinated omission with an interval of ceil(1 / rate) ms
        // (1 ms at these rates), which adds synthetic 1..n ms samples and drags p50 down.
        { overallRate, ignoreCoordinatedOmission: true }
      : {}),
  });
  await sleep(300); // let the requests cut off at the end of the run finish on the server
  const after = target.metrics ? await target.metrics() : undefined;
  const ok = result['2xx'];
  return {
    batchesPerSec: ok / result.duration,
    eventsPerSec: (ok * eventsPerBatch) / result.duration,
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
    ...(after
      ? {
          // `before` is there when `after` is; a count /metrics left out makes this NaN
          serverAccepted:
            /** @type {number} */ (after.accepted) -
            /** @type {number} */ (/** @type {ServerMetrics} */ (before).accepted),
          serverDuplicates:
            /** @type {number} */ (after.duplicate) -
            /** @type {number} */ (/** @type {ServerMetrics} */ (before).duplicate),
        }
      : {}),
    bodiesBuiltDuringRun: bodies.madeDuringRun,
  };
}
/** @typedef {Run & { targetRate: number, non2xx: number, sent: number }} PacedRun */

/**
 * Open loop: request i is due at start + i / rate; latency runs from that due time.
 * @param {Target} target
 * @param {BodyPool} bodies
 * @param {number} seconds
 * @param {{ rate: number, eventsPerBatch: number }} load
 * @returns {Promise<PacedRun>}
 */
export async function runPaced(target, bodies, seconds, load) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CFG.connections });
  try {
    return await runPacedSends(seconds, load, () =>
      post(target.url, bodies.next().gz, target.headers, agent),
    );
  } finally {
    agent.destroy();
  }
}

/**
 * The paced sender over any send: send i is started at start + i / rate (the integer product
 * keeps the count within the run exact), its latency runs from that due time to its `tReply`;
 * a 2xx status is ok, 0 an error, any other a non-2xx. Waits at most 15 s for the last answers.
 * @param {number} seconds
 * @param {{ rate: number, eventsPerBatch: number }} load
 * @param {() => Promise<import('../load.mjs').SendResult>} send
 * @returns {Promise<PacedRun>}
 */
export async function runPacedSends(seconds, { rate, eventsPerBatch }, send) {
  /** @type {number[]} */
  const latencies = [];
  const tally = { ok: 0, non2xx: 0, errors: 0, sent: 0 };
  /** @type {Set<Promise<void>>} */
  const pending = new Set();
  const start = await paced(rate, Math.ceil(seconds * rate), (_i, due) => {
    tally.sent++;
    const done = send().then(({ status, tReply }) => {
      if (status === 0) tally.errors++;
      else if (status >= 200 && status < 300) {
        tally.ok++;
        latencies.push(tReply - due);
      } else tally.non2xx++;
    });
    pending.add(done);
    done.then(() => pending.delete(done));
  });
  await Promise.race([Promise.all(pending), sleep(15_000)]);
  const elapsed = (performance.now() - start) / 1000;
  const stats = percentiles(latencies);
  return {
    targetRate: rate,
    batchesPerSec: tally.ok / elapsed,
    eventsPerSec: (tally.ok * eventsPerBatch) / elapsed,
    p50Ms: stats.p50,
    p99Ms: stats.p99,
    maxMs: stats.max,
    ...tally,
  };
}
