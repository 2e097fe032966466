// Delivery: batches evenly paced (open loop) over one SSE stream per agent; per batch the
// scheduled send time, the 202, and each arrival on a stream. Every accepted batch must arrive
// exactly once, on its own agent's stream.

import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { paced, pool, post } from '../load.mjs';
import { openSse } from '../sse.mjs';
import { percentiles } from '../support.mjs';
import { makeBatch, traceIdOf } from './batches.mjs';
import { CFG } from './config.mjs';
import { cpuBetween, cpuSnapshot, fmtCpu } from './cpu.mjs';
import { bareBusTransport } from './redis.mjs';
import { readMemory } from './servers.mjs';

/**
 * @typedef {import('../support.mjs').Percentiles} Percentiles
 * @typedef {import('../load.mjs').SendResult} SendResult
 * @typedef {import('../sse.mjs').SseStream} SseStream
 * @typedef {import('./batches.mjs').Batch} Batch
 * @typedef {import('./cpu.mjs').CpuUse} CpuUse
 * @typedef {import('./servers.mjs').CreatedAgent} CreatedAgent
 * @typedef {import('./servers.mjs').MetricsReading} MetricsReading
 * @typedef {import('./bus.mjs').BusRun} BusRun
 */

export const fmt = (/** @type {number | null | undefined} */ ms) =>
  ms === null || ms === undefined ? 'n/a' : ms.toFixed(1);

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
 * The records of a run, and the `onArrive` that fills them in (`unknown()`: messages of no
 * batch sent).
 * @param {Batch[]} batches
 */
function arrivalLog(batches) {
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
  return { records, onArrive, unknown: () => unknown };
}

/**
 * Sends every batch at CFG.rate, then waits for the answers and (at most 5 s) for every accepted
 * batch to arrive, then a little more for duplicates.
 * @param {Transport} transport
 * @param {Batch[]} batches
 * @param {DeliveryRecord[]} records
 * @returns {Promise<{ sendErrors: number, sendSeconds: number, cpu: CpuUse | null }>}
 */
async function sendAndWait(transport, batches, records) {
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
  const deadline = performance.now() + 5_000;
  while (performance.now() < deadline) {
    if (records.every((r) => r.status !== 202 || r.arrivals.length > 0)) break;
    await sleep(50);
  }
  await sleep(300);
  const sendSeconds = (sentAt - /** @type {DeliveryRecord} */ (records[0]).due) / 1000;
  return { sendErrors, sendSeconds, cpu };
}

/**
 * The warm-up's own figures: its losses and duplicates are reported, not counted.
 * @param {DeliveryRecord[]} warm
 * @returns {DeliveryResult['warmup']}
 */
function warmupFigures(warm) {
  return {
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
  };
}

/**
 * A run's figures from its records (those past the warm-up are measured).
 * @param {DeliveryRecord[]} records
 * @param {number} warmupCount
 * @param {{ agents: number, unknown: number, sendErrors: number, sendSeconds: number,
 *   cpu: CpuUse | null, streams: OpenStreams }} run
 * @returns {DeliveryResult}
 */
function deliveryFigures(
  records,
  warmupCount,
  { agents, unknown, sendErrors, sendSeconds, cpu, streams },
) {
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
  return {
    rate: CFG.rate,
    agents,
    sent: measured.length,
    sendSeconds,
    sendRate: records.length / sendSeconds,
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
    warmup: warmupFigures(records.slice(0, warmupCount)),
    cpu,
    streamsEnded: streams.ended(),
    warnings: streams.warnings(),
    fromReply: percentiles(fromReply),
    fromSend: percentiles(fromSend),
  };
}

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
export async function measureDelivery(label, transport, batches, warmupCount) {
  const log = arrivalLog(batches);
  const streams = await transport.open(log.onArrive);
  try {
    // Let the bus settle on the new subscriptions (the Redis reader adds a newly watched agent
    // to its blocking read when the current one returns, within its 1 s block).
    await sleep(1_200);
    const sent = await sendAndWait(transport, batches, log.records);
    const result = deliveryFigures(log.records, warmupCount, {
      ...sent,
      agents: new Set(batches.map((b) => b.agentIdx)).size,
      unknown: log.unknown(),
      streams,
    });
    const f = result.fromReply;
    const s = result.fromSend;
    console.log(
      `   delivery ${label.padEnd(26)} from 202: p50 ${fmt(f.p50)} p99 ${fmt(f.p99)} max ${fmt(f.max)} ms ` +
        `(${result.beforeReply} before the 202) | from send: p50 ${fmt(s.p50)} p99 ${fmt(s.p99)} ` +
        `max ${fmt(s.max)} ms | POST p50 ${fmt(result.postLatency.p50)} p99 ${fmt(result.postLatency.p99)} ms | ` +
        `${result.accepted}/${result.sent} accepted at ${result.sendRate.toFixed(0)}/s, lost ${result.lost}, ` +
        `dup ${result.duplicated}`,
    );
    console.log(`            ${fmtCpu(sent.cpu)}`);
    return result;
  } finally {
    streams.close();
  }
}

/**
 * The delivery comparison of one bus; the baseline is measured after the service.
 * @typedef {{ service: DeliveryResult, baseline?: DeliveryResult, baselineKind?: string }}
 *   DeliveryComparison
 */

/**
 * Streams over SSE, one per agent index (the sending side is the caller's).
 * @param {(idx: number) => string} urlFor
 * @param {Record<string, string>} headers
 * @param {import('node:http').Agent} sseAgent
 * @returns {Pick<Transport, 'open'>}
 */
const sseTransport = (urlFor, headers, sseAgent) => ({
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

/**
 * The service: each agent's batches posted with its API key, its stream read as the viewer.
 * @param {BusRun} run
 * @returns {Transport}
 */
const serviceTransport = ({ server, agents, viewerToken, sseAgent, postAgent }) => ({
  ...sseTransport(
    (idx) => `${server.base}/v1/agents/${/** @type {CreatedAgent} */ (agents[idx]).agentId}/live`,
    { authorization: `Bearer ${viewerToken}` },
    sseAgent,
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
});

/**
 * The memory bus's baseline: the bare node:http server's publish and streams.
 * @param {BusRun} run
 * @returns {Transport}
 */
const bareHttpTransport = ({ bare, sseAgent, postAgent }) => ({
  ...sseTransport((idx) => `${bare.base}/live/a${idx}`, {}, sseAgent),
  send: (b) =>
    post(
      `${bare.base}/publish/a${b.agentIdx}`,
      b.gz,
      { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      postAgent,
    ),
});

/**
 * The service's delivery, with what the server itself counted meanwhile, then the bus's
 * baseline, into `result` as they are measured (a failure keeps the figures up to there).
 * @param {BusRun} run
 * @param {import('./bus.mjs').BusResult} result
 */
export async function compareDelivery(run, result) {
  const { server, agents } = run;
  const warmupCount = Math.round(CFG.rate * CFG.warmupSeconds);
  const count = warmupCount + Math.round(CFG.rate * CFG.seconds);
  const batches = Array.from({ length: count }, (_, i) =>
    makeBatch(i % CFG.agents, /** @type {CreatedAgent} */ (agents[i % CFG.agents]).agentId),
  );
  result.messageBytes = Math.round(batches.reduce((s, b) => s + b.itemJson.length, 0) / count);
  result.bodyGzipBytes = Math.round(batches.reduce((s, b) => s + b.gz.length, 0) / count);
  // the service's /metrics has prom-client's default metrics, process_cpu_seconds_total too
  /** @typedef {MetricsReading & { cpuSeconds: number }} ServiceMetrics */
  const metricsBefore = /** @type {ServiceMetrics} */ (await readMemory(`${server.base}/metrics`));
  const deliveryStarted = performance.now();
  /** @type {DeliveryComparison} */
  const delivery = {
    service: await measureDelivery('service', serviceTransport(run), batches, warmupCount),
  };
  result.delivery = delivery;
  run.ensureAlive();
  const metricsAfter = /** @type {ServiceMetrics} */ (await readMemory(`${server.base}/metrics`));
  delivery.service.serverAccepted = metricsAfter.accepted - metricsBefore.accepted;
  delivery.service.serverCpuPercent =
    ((metricsAfter.cpuSeconds - metricsBefore.cpuSeconds) /
      ((performance.now() - deliveryStarted) / 1000)) *
    100;
  delivery.service.publishFailures =
    (metricsAfter.publishFailures ?? 0) - (metricsBefore.publishFailures ?? 0);
  if (run.busName === 'memory') {
    delivery.baselineKind =
      'bare node:http server: POST inflates + parses the body, writes the SSE message, answers 202';
    delivery.baseline = await measureDelivery(
      'bare node:http',
      bareHttpTransport(run),
      batches,
      warmupCount,
    );
  } else {
    delivery.baselineKind =
      'bare Redis bus from this process: XADD MAXLEN 1000 + EXPIRE pipeline -> blocking XREAD loop on another connection';
    // the redis bus (the only other one) has set `redis`
    const bareBus = bareBusTransport(/** @type {import('./redis.mjs').RunRedis} */ (run.redis));
    delivery.baseline = await measureDelivery('bare Redis bus', bareBus, batches, warmupCount);
  }
  warnDelivery(delivery, count, run.warn);
  batches.length = 0;
}

/**
 * Anomalies of both sides, loudly: losses, duplicates, failed sends, cut streams, a disturbed
 * machine, and the server's own counts against what was sent.
 * @param {DeliveryComparison} delivery
 * @param {number} count batches sent, warm-up included
 * @param {(warning: string) => void} warn
 */
function warnDelivery(delivery, count, warn) {
  for (const [side, r] of Object.entries({
    service: delivery.service,
    baseline: delivery.baseline,
  })) {
    // both measured by now
    if (!r) continue;
    if (r.lost) warn(`delivery ${side}: ${r.lost} accepted batches never arrived on their stream`);
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
  if (delivery.service.publishFailures)
    warn(`server counted ${delivery.service.publishFailures} live publish failures`);
  if (delivery.service.serverAccepted !== count)
    warn(`server counted ${delivery.service.serverAccepted} accepted batches for ${count} sent`);
}
