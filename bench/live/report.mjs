// The printed report: one table of service / baseline figures per bus, with ratios and the
// issue's targets, then notes (counts, CPU, anomalies).

import { textTable } from '../support.mjs';
import { CFG } from './config.mjs';
import { fmt } from './delivery.mjs';
import { mib } from './idle.mjs';

/**
 * @typedef {import('../support.mjs').MachineInfo} MachineInfo
 * @typedef {import('./bus.mjs').BusResult} BusResult
 * @typedef {import('./delivery.mjs').DeliveryComparison} DeliveryComparison
 * @typedef {import('./replay.mjs').ReplayComparison} ReplayComparison
 * @typedef {import('./replay.mjs').ReplayResult} ReplayResult
 * @typedef {import('./replay.mjs').PostSummary} PostSummary
 * @typedef {import('./idle.mjs').IdleComparison} IdleComparison
 */

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

/** @typedef {string[]} Row bus, figure, service, baseline, baseline is, ratio, target */

/**
 * "< limit: met" or not; n/a without a figure.
 * @param {number | null | undefined} value
 * @param {number} limit
 */
const target = (value, limit) =>
  value === null || value === undefined
    ? `< ${limit}: n/a`
    : `< ${limit}: ${value < limit ? 'met' : 'NOT MET'}`;

/**
 * @param {string} bus
 * @param {BusResult['bus']} busName
 * @param {DeliveryComparison} d
 * @returns {Row[]}
 */
function deliveryRows(bus, busName, d) {
  const s = d.service;
  const b = d.baseline;
  if (!b)
    return [
      [
        bus,
        'delivery p99 from 202, ms',
        fmt(s.fromReply.p99),
        'n/a',
        '',
        '',
        target(s.fromReply.p99, CFG.targets.p99Ms),
      ],
    ];
  const kind = busName === 'memory' ? 'bare node:http SSE' : 'bare XADD->XREAD';
  /**
   * A timing row: service, baseline and their ratio.
   * @param {string} label
   * @param {(x: import('./delivery.mjs').DeliveryResult) => number | null} pick
   * @returns {Row}
   */
  const timing = (label, pick, tgt = '') => [
    bus,
    label,
    fmt(pick(s)),
    fmt(pick(b)),
    kind,
    ratio(pick(s), pick(b)),
    tgt,
  ];
  return [
    timing('delivery p50 from 202, ms', (x) => x.fromReply.p50),
    timing(
      'delivery p99 from 202, ms',
      (x) => x.fromReply.p99,
      target(s.fromReply.p99, CFG.targets.p99Ms),
    ),
    timing('delivery max from 202, ms', (x) => x.fromReply.max),
    [
      bus,
      'arrived before the 202',
      `${s.beforeReply}/${s.delivered}`,
      `${b.beforeReply}/${b.delivered}`,
      kind,
      '',
      '',
    ],
    timing('end-to-end p50 from send, ms', (x) => x.fromSend.p50),
    timing('end-to-end p99 from send, ms', (x) => x.fromSend.p99),
    [
      bus,
      'lost / duplicated batches',
      `${s.lost} / ${s.duplicated} of ${s.accepted}`,
      `${b.lost} / ${b.duplicated} of ${b.accepted}`,
      kind,
      '',
      '0 / 0: ' +
        (s.lost + s.duplicated + s.misrouted === 0 && s.accepted === s.sent ? 'met' : 'NOT MET'),
    ],
  ];
}

/**
 * A replay's median, or what stopped it.
 * @param {ReplayResult} x
 */
const replayCell = (x) => {
  if (x.medianMs !== null) return fmt(x.medianMs);
  const bad = x.runs.find((run) => run.error || run.ms === null);
  if (bad?.error) return 'FAILED';
  return bad?.cut ? `CUT at ${bad.received}` : `TIMEOUT at ${bad?.received}`;
};

/**
 * @param {string} bus
 * @param {BusResult['bus']} busName
 * @param {ReplayComparison} rp
 * @returns {Row[]}
 */
function replayRows(bus, busName, rp) {
  const kind = busName === 'memory' ? 'bare node:http SSE' : 'bare node:http+XRANGE';
  /** @type {Row[]} */
  const rows = [
    [
      bus,
      'replay of 1000, median of 3, ms',
      replayCell(rp.service),
      replayCell(rp.baseline),
      kind,
      ratio(rp.service.medianMs, rp.baseline.medianMs),
      target(rp.service.medianMs, CFG.targets.replayMs),
    ],
  ];
  if (rp.serviceRaisedCap)
    rows.push([
      bus,
      '  same, LIVE_MAX_QUEUE_BYTES=64MiB',
      replayCell(rp.serviceRaisedCap),
      replayCell(rp.baseline),
      kind,
      ratio(rp.serviceRaisedCap.medianMs, rp.baseline.medianMs),
      target(rp.serviceRaisedCap.medianMs, CFG.targets.replayMs),
    ]);
  if (rp.xrange) {
    const best = rp.serviceRaisedCap ?? rp.service;
    rows.push([
      bus,
      rp.serviceRaisedCap ? '  64 MiB cap, vs the bus alone' : '  same, vs the bus alone',
      replayCell(best),
      fmt(rp.xrange.medianMs),
      'bare XRANGE alone',
      ratio(best.medianMs, rp.xrange.medianMs),
      '',
    ]);
  }
  return rows;
}

/**
 * @param {string} bus
 * @param {IdleComparison} idle
 * @returns {Row}
 */
const idleRow = (bus, idle) => [
  bus,
  `idle stream memory (${idle.service.streams}), KiB`,
  fmt(idle.service.kibPerStream),
  fmt(idle.baseline.kibPerStream),
  'bare node:http SSE',
  ratio(idle.service.kibPerStream, idle.baseline.kibPerStream),
  target(idle.service.kibPerStream, CFG.targets.idleKiB),
];

/** @param {ReplayResult} replay */
const replayRunsNote = (replay) =>
  replay.runs
    .map((x) =>
      x.ms === null ? `ENDED after ${x.received}` : `${/** @type {number} */ (x.ms).toFixed(0)} ms`,
    )
    .join(', ');

/**
 * The notes of one measured bus: delivery counts, replay runs, idle memory, anomalies.
 * @param {string} bus
 * @param {BusResult} r
 * @returns {string[]}
 */
function busNotes(bus, r) {
  /** @type {string[]} */
  const notes = [];
  const s = r.delivery?.service;
  if (s)
    notes.push(
      `${bus}: delivery ${s.accepted}/${s.sent} batches accepted, sent at ${s.sendRate.toFixed(0)}/s over ${s.agents} streams ` +
        `(POST p50 ${fmt(s.postLatency.p50)} / p99 ${fmt(s.postLatency.p99)} ms, server CPU ${s.serverCpuPercent?.toFixed(0)}%); ` +
        `${s.lost} lost, ${s.duplicated} duplicated, ${s.misrouted} misrouted, ${s.unknownMessages} unknown; ` +
        `server accepted ${s.serverAccepted} (warm-up included), ${s.publishFailures} publish failures`,
    );
  const rp = r.replay;
  if (rp) {
    // set by compareReplay once posted
    const sp = /** @type {PostSummary} */ (rp.service.post);
    // A run that failed to open has no ms (nor bytes): it would throw (or show NaN) here.
    notes.push(
      `${bus}: replay: 1000 batches posted in ${sp.seconds.toFixed(1)} s (${(1000 / sp.seconds).toFixed(0)}/s); ` +
        `service runs ${replayRunsNote(rp.service)}` +
        (rp.serviceRaisedCap
          ? `; with a 64 MiB queue cap ${replayRunsNote(rp.serviceRaisedCap)}` +
            // prettier would move the cast's comment out of the parentheses (a cast of the
            // quotient, the operand unchecked)
            // prettier-ignore
            ` (~${(
              /** @type {number} */ (rp.serviceRaisedCap.runs[0]?.bytes) / 2 ** 20
            ).toFixed(1)} MiB per replay)`
          : ''),
    );
  }
  const idle = r.idle;
  if (idle)
    notes.push(
      `${bus}: idle: server RSS ${mib(idle.service.before.rss)} -> ${mib(idle.service.after.rss)} MiB ` +
        `(heap ${idle.service.heapKibPerStream.toFixed(1)} KiB/stream), opened at ${Math.round(idle.service.opensPerSec)}/s; ` +
        `bare RSS ${mib(idle.baseline.before.rss)} -> ${mib(idle.baseline.after.rss)} MiB`,
    );
  if (r.error) notes.push(`${bus}: FAILED (${r.error})`);
  for (const w of r.warnings ?? []) notes.push(`${bus}: !!! ${w}`);
  return notes;
}

/**
 * @param {BusResult[]} results
 * @param {RunMeta} meta
 */
export function report(results, meta) {
  /** @type {string[][]} */
  const rows = [['bus', 'figure', 'service', 'baseline', 'baseline is', 'ratio', 'target']];
  /** @type {string[]} */
  const notes = [];
  for (const r of results) {
    if (r.skipped) {
      notes.push(`${r.bus}: SKIPPED (${r.skipped})`);
      continue;
    }
    const bus = `${r.bus} (${r.database ?? '?'})`;
    if (r.delivery?.service) rows.push(...deliveryRows(bus, r.bus, r.delivery));
    if (r.replay) rows.push(...replayRows(bus, r.bus, r.replay));
    if (r.idle) rows.push(idleRow(bus, r.idle));
    notes.push(...busNotes(bus, r));
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
