// The suite's summary (run-all.mjs): one row per figure, with its same-run baseline, the ratio
// service / baseline, the target and whether it is met, drawn from the benchmarks' own
// result files; the text table; and bench/results/latest.svg, a small chart written by hand.

import { textTable } from './support.mjs';

/** @typedef {import('./support.mjs').Percentiles} Percentiles */

// A figure as read from a result file: a finite number, else null (absent, failed, NaN).
const num = (/** @type {unknown} */ x) => (typeof x === 'number' && Number.isFinite(x) ? x : null);
/**
 * Both figures are num()'s (the casts: num() does not narrow its argument).
 * @param {number | null} value
 * @param {number | null} baseline
 */
const ratioOf = (value, baseline) =>
  num(value) !== null && num(baseline) !== null && /** @type {number} */ (baseline) > 0.05
    ? /** @type {number} */ (value) / /** @type {number} */ (baseline)
    : null;

/**
 * A row as a summariser states it: what it left out is null in the row.
 * @typedef {object} RowSpec
 * @property {string} benchmark
 * @property {string} figure
 * @property {number | null} [value]
 * @property {string} [unit]
 * @property {number | null} [baseline]
 * @property {string} [baselineLabel]
 * @property {string} [target]
 * @property {(value: number) => boolean} [meets]
 * @property {string} [note]
 * @property {number | null} [ratio] the benchmark's own ratio, where it pairs its rounds (the median of
 *   the rounds' ratios); value / baseline when not given
 */

/**
 * A row of the summary (and of latest.json's `summary`).
 * @typedef {object} SummaryRow
 * @property {string} benchmark
 * @property {string} figure
 * @property {number | null} value
 * @property {string | undefined} unit
 * @property {number | null} baseline
 * @property {string | null} baselineLabel
 * @property {number | null} ratio value / baseline, or the benchmark's own (RowSpec.ratio)
 * @property {string | null} target
 * @property {boolean | null} met
 * @property {string} [note]
 */

/**
 * A summary row. `meets(value)` decides the target (null: no target, or no value). Figures a
 * benchmark did not produce keep a row with value null and `met: null`, plus `note`.
 * @param {RowSpec} spec
 * @returns {SummaryRow}
 */
function row({
  benchmark,
  figure,
  value,
  unit,
  baseline,
  baselineLabel,
  target,
  meets,
  note,
  ratio,
}) {
  const v = num(value);
  return {
    benchmark,
    figure,
    value: v,
    unit,
    baseline: num(baseline),
    baselineLabel: baselineLabel ?? null,
    ratio: ratio === undefined ? ratioOf(v, num(baseline)) : num(ratio),
    target: target ?? null,
    met: v === null || !meets ? null : Boolean(meets(v)),
    ...(note ? { note } : {}),
  };
}

/** @type {Record<string, string>} */
const ENGINE_LABEL = {
  postgres: 'PostgreSQL',
  pglite: 'PGlite',
  'pglite-process-crash': 'PGlite process-crash',
};
/** @type {Record<string, string>} */
const DB_BASELINE = {
  postgres: '(b) PostgreSQL, 1 statement',
  pglite: '(c) PGlite, 1 statement',
  'pglite-process-crash': '(c) PGlite process-crash, 1 statement',
};

/**
 * One side of an ingest mix (service, naive server, bare HTTP, database alone): medians of the
 * rounds.
 * @typedef {object} IngestSide
 * @property {number} batchesPerSec
 * @property {{ server: number | null }} [cpuUsPerBatch] µs of CPU per batch, the server's
 */

/**
 * An ingest mix's sides (`naive` since the naive baseline came in).
 * @typedef {{ service: IngestSide, naive?: IngestSide, http: IngestSide, db: IngestSide }}
 *   IngestMedians
 */

/**
 * A mix measured: its medians, with the ratios worked out from the rounds.
 * @typedef {object} IngestMeasuredMix
 * @property {string} [description]
 * @property {IngestMedians} median
 * @property {{ serverCpuVsNaive?: number | null }} ratios with a naive side
 * @property {{ rate: number, paced?: { p99Ms: number | null },
 *   dbPaced?: { p99Ms: number | null } }} [halfRate] dbPaced: the baseline's write, paced alike
 * @property {number} [serverRssPeakBytes]
 * @property {number} [serverRssAtEndBytes]
 */

/**
 * A mix that failed: its error, no figures.
 * @typedef {{ description?: string, error: string, median?: undefined, halfRate?: undefined }}
 *   IngestFailedMix
 */

/**
 * An engine of ingest-latest.json: skipped, or its mixes (and `error` if it stopped early).
 * @typedef {object} IngestEngine
 * @property {string} [skipped]
 * @property {string} [error]
 * @property {Record<string, IngestMeasuredMix | IngestFailedMix>} [mixes] by mix name
 */

/**
 * What the summary reads of ingest-latest.json. `targetRssBytes` was one number before the
 * naive baseline came in, then one per engine.
 * @typedef {object} IngestResult
 * @property {{ targetRatio?: number, targetP99Ms?: number,
 *   targetRssBytes?: number | Record<string, number> }} [config]
 * @property {Record<string, IngestEngine>} [engines]
 * @property {Record<string, { service: { powerLoss: number, processCrash: number } }>}
 *   [pgliteFsyncCost] by mix, with BENCH_ENGINES=...,pglite,pglite-process-crash
 */

/** @param {IngestResult} json */
function ingestRows(json) {
  /** @type {SummaryRow[]} */
  const rows = [];
  const benchmark = 'ingest';
  const targetRatio = json.config?.targetRatio ?? 0.8;
  const targetP99 = json.config?.targetP99Ms ?? 50;
  // per engine since the naive baseline came in; a number before
  const targetRssOf = (/** @type {string} */ engine) =>
    typeof json.config?.targetRssBytes === 'number'
      ? json.config.targetRssBytes
      : (json.config?.targetRssBytes?.[engine] ?? 250e6);
  for (const [engine, r] of Object.entries(json.engines ?? {})) {
    const label = ENGINE_LABEL[engine] ?? engine;
    if (r.skipped || r.error) {
      rows.push(row({ benchmark, figure: `${label}: not measured`, note: r.skipped ?? r.error }));
      if (r.skipped) continue;
    }
    const targetRss = targetRssOf(engine);
    let rssPeak = null;
    for (const [mix, m] of Object.entries(r.mixes ?? {})) {
      const at = `${label} ${mix}`;
      if (!m.median) {
        rows.push(row({ benchmark, figure: `${at}: not measured`, note: m.error }));
        continue;
      }
      rows.push(
        row({
          benchmark,
          figure: `${at}: service vs database, batches/s`,
          value: m.median.service.batchesPerSec,
          unit: '/s',
          baseline: m.median.db.batchesPerSec,
          baselineLabel: DB_BASELINE[engine],
          target: `ratio >= ${targetRatio}`,
          meets: (v) => v / m.median.db.batchesPerSec >= targetRatio,
        }),
        row({
          benchmark,
          figure: `${at}: service vs bare HTTP, batches/s`,
          value: m.median.service.batchesPerSec,
          unit: '/s',
          baseline: m.median.http.batchesPerSec,
          baselineLabel: '(a) bare node:http',
        }),
        row({
          benchmark,
          figure: `${at}: p99 at half rate (${m.halfRate?.rate}/s, paced)`,
          value: m.halfRate?.paced?.p99Ms,
          unit: 'ms',
          // what the database alone gives at that rate on this machine: the p99's floor
          baseline: m.halfRate?.dbPaced?.p99Ms ?? undefined,
          baselineLabel: m.halfRate?.dbPaced ? `${DB_BASELINE[engine]}, paced alike` : undefined,
          target: `< ${targetP99} ms`,
          meets: (v) => v < targetP99,
        }),
      );
      const naiveCpu = m.median.naive?.cpuUsPerBatch?.server;
      if (typeof naiveCpu === 'number')
        rows.push(
          row({
            benchmark,
            figure: `${at}: service's own CPU per batch vs a naive node:http + pg server's`,
            value: m.median.service.cpuUsPerBatch?.server,
            unit: 'µs',
            baseline: naiveCpu,
            baselineLabel: '(d) naive server, same statement',
            target: 'ratio <= 1.5',
            // the median of the rounds' ratios (paired), which value / baseline is not
            // (there with a naive side; the cast only says so)
            meets: () => /** @type {number} */ (m.ratios.serverCpuVsNaive) <= 1.5,
            note: `median of the rounds' ratios ${m.ratios.serverCpuVsNaive?.toFixed(2)}`,
          }),
        );
      rssPeak = Math.max(rssPeak ?? 0, m.serverRssPeakBytes ?? m.serverRssAtEndBytes ?? 0) || null;
    }
    if (rssPeak !== null)
      rows.push(
        row({
          benchmark,
          figure: `${label}: server RSS peak under load`,
          value: rssPeak / 1e6,
          unit: 'MB',
          target: `< ${targetRss / 1e6} MB`,
          meets: (v) => v < targetRss / 1e6,
        }),
      );
  }
  // run with BENCH_ENGINES=...,pglite,pglite-process-crash: what the fsync of each commit costs
  for (const [mix, c] of Object.entries(json.pgliteFsyncCost ?? {}))
    rows.push(
      row({
        benchmark,
        figure: `PGlite ${mix}: fsynced (power-loss) vs not (process-crash), batches/s`,
        value: c.service.powerLoss,
        unit: '/s',
        baseline: c.service.processCrash,
        baselineLabel: 'PGlite process-crash, service',
      }),
    );
  return rows;
}

/**
 * @typedef {object} LiveReplay a replay of the last 1000 messages to a new stream
 * @property {number | null} [medianMs]
 */

/**
 * A bus of live-latest.json: skipped, or its delivery, replay and idle-stream figures.
 * @typedef {object} LiveBus
 * @property {string} [skipped]
 * @property {string} [error]
 * @property {{ service?: { fromReply?: Percentiles }, baseline?: { fromReply?: Percentiles } }}
 *   [delivery] ms from the 202 to the message on the stream
 * @property {{ service?: LiveReplay, serviceRaisedCap?: LiveReplay, baseline?: LiveReplay }}
 *   [replay] `serviceRaisedCap`: again with a 64 MiB queue cap, when the default cut it
 * @property {{ service: { kibPerStream: number }, baseline: { kibPerStream: number } }} [idle]
 *   memory per idle stream (KiB), both sides
 */

/**
 * What the summary reads of live-latest.json.
 * @typedef {object} LiveResult
 * @property {{ targets?: { p99Ms: number, replayMs: number, idleKiB: number } }} [config]
 * @property {Record<string, LiveBus>} [buses] by bus: memory, redis
 */

/** @param {LiveResult} json */
function liveRows(json) {
  /** @type {SummaryRow[]} */
  const rows = [];
  const benchmark = 'live';
  const t = json.config?.targets ?? { p99Ms: 50, replayMs: 250, idleKiB: 30 };
  for (const [bus, r] of Object.entries(json.buses ?? {})) {
    const label = bus === 'memory' ? 'in-process bus' : `${bus} bus`;
    if (r.skipped) {
      rows.push(row({ benchmark, figure: `${label}: not measured`, note: r.skipped }));
      continue;
    }
    if (r.error) rows.push(row({ benchmark, figure: `${label}: failed`, note: r.error }));
    const d = r.delivery;
    if (d)
      rows.push(
        row({
          benchmark,
          figure: `${label}: delivery p99 from the 202`,
          value: d.service?.fromReply?.p99,
          unit: 'ms',
          baseline: d.baseline?.fromReply?.p99,
          baselineLabel: bus === 'memory' ? 'bare node:http SSE' : 'bare XADD/XREAD',
          target: `< ${t.p99Ms} ms`,
          meets: (v) => v < t.p99Ms,
        }),
      );
    const replay = r.replay;
    if (replay) {
      const cut = replay.service?.medianMs === null || replay.service?.medianMs === undefined;
      rows.push(
        row({
          benchmark,
          figure: `${label}: replay of 1000 to a new stream`,
          value: cut ? replay.serviceRaisedCap?.medianMs : replay.service?.medianMs,
          unit: 'ms',
          baseline: replay.baseline?.medianMs,
          baselineLabel: bus === 'memory' ? 'bare node:http' : 'bare node:http + XRANGE',
          target: `< ${t.replayMs} ms`,
          meets: (v) => !cut && v < t.replayMs,
          note: cut ? 'cut by the default queue cap; figure with a 64 MiB cap' : undefined,
        }),
      );
    }
    if (r.idle)
      rows.push(
        row({
          benchmark,
          figure: `${label}: memory per idle stream`,
          value: num(r.idle.service?.kibPerStream) && (r.idle.service.kibPerStream * 1024) / 1000,
          unit: 'KB',
          baseline:
            num(r.idle.baseline?.kibPerStream) && (r.idle.baseline.kibPerStream * 1024) / 1000,
          baselineLabel: 'bare node:http SSE',
          target: `< ${t.idleKiB} KB`,
          meets: (v) => v < t.idleKiB,
        }),
      );
  }
  return rows;
}

/**
 * What the summary reads of client-latest.json.
 * @typedef {object} ClientResult
 * @property {{ library: string, callNsMedian: number }[]} [record] ours first, then the peers
 * @property {{ longestStallMs?: number }[]} [stall] one per mode of flushing
 */

/** @param {ClientResult} json */
function clientRows(json) {
  const benchmark = 'client';
  const [ours, ...peers] = json.record ?? [];
  if (!ours) return [row({ benchmark, figure: 'client: not measured' })];
  const fastestPeer = Math.min(...peers.map((p) => p.callNsMedian));
  const rows = peers.map((peer) =>
    row({
      benchmark,
      figure: `recording one event vs ${peer.library.split(' ')[0]}`,
      value: ours.callNsMedian,
      unit: 'ns',
      baseline: peer.callNsMedian,
      baselineLabel: peer.library,
      target: '< 2000 ns and <= peers',
      meets: (v) => v < 2000 && v <= fastestPeer,
    }),
  );
  const longest = Math.max(...(json.stall ?? []).map((s) => s.longestStallMs ?? 0));
  if (json.stall?.length)
    rows.push(
      row({
        benchmark,
        figure: 'longest event-loop stall flushing 100 KB',
        value: longest,
        unit: 'ms',
        target: '< 5 ms',
        meets: (v) => v < 5,
      }),
    );
  return rows;
}

/**
 * A labelled-set score, and one of its 10,000-event runs.
 * @typedef {{ right: number, total: number }} AnalysisScore
 * @typedef {{ events: number, medianMs: number, baselineMs: number, heapJustAfterBytes: number }}
 *   AnalysisLargeRun
 */

/**
 * What the summary reads of analysis-latest.json.
 * @typedef {object} AnalysisResult
 * @property {{ targetDelayMs?: number }} [config]
 * @property {{ inProcessWorker?: { medianMs: number }, standAloneWorker?: { medianMs: number } }}
 *   [delay] from a run's end to its autopsy, by worker
 * @property {{ baseline?: { medianJobsPerSec: number }, oneWorker?: { medianJobsPerSec: number },
 *   twoWorkers?: { medianJobsPerSec: number } }} [throughput]
 * @property {{ heuristic?: AnalysisScore, llm?: AnalysisScore, large?: AnalysisLargeRun[],
 *   targetLargeMs?: number }} [labelled]
 */

/** @param {AnalysisResult} json */
function analysisRows(json) {
  const benchmark = 'analysis';
  const target = json.config?.targetDelayMs ?? 1000;
  const delay = (
    /** @type {keyof NonNullable<AnalysisResult['delay']>} */ key,
    /** @type {string} */ label,
  ) =>
    json.delay?.[key] &&
    row({
      benchmark,
      figure: `delay to the autopsy, median (${label})`,
      value: json.delay[key].medianMs,
      unit: 'ms',
      target: `< ${target} ms`,
      meets: (v) => v < target,
    });
  const jobs = (/** @type {'oneWorker' | 'twoWorkers'} */ key, /** @type {string} */ label) =>
    json.throughput?.[key] &&
    row({
      benchmark,
      figure: `jobs/s, ${label}`,
      value: json.throughput[key].medianJobsPerSec,
      unit: '/s',
      baseline: json.throughput.baseline?.medianJobsPerSec,
      baselineLabel: 'analyzer in-process, no queue',
    });
  const labelled = json.labelled;
  const score = (/** @type {'heuristic' | 'llm'} */ key, /** @type {string} */ label) =>
    labelled?.[key] &&
    row({
      benchmark,
      figure: `labelled set (${labelled[key].total} runs): ${label}, cases right`,
      value: (100 * labelled[key].right) / labelled[key].total,
      unit: '%',
      target: '100 %',
      meets: (v) => v === 100,
    });
  // the slowest of the 10,000-event runs, next to a JSON round trip of the same run
  const slowest = labelled?.large?.reduce((a, b) => (b.medianMs > a.medianMs ? b : a));
  const largeTarget = labelled?.targetLargeMs ?? 200;
  // (filter(Boolean) leaves the rows, which the cast says)
  return /** @type {SummaryRow[]} */ (
    [
      delay('inProcessWorker', 'in-server worker'),
      delay('standAloneWorker', 'stand-alone worker'),
      jobs('oneWorker', '1 worker process'),
      jobs('twoWorkers', '2 worker processes'),
      score('heuristic', 'heuristic analyzer'),
      score('llm', 'LLM analyzer, recorded answers'),
      slowest &&
        row({
          benchmark,
          figure: `analysis of a ${slowest.events.toLocaleString('en-US')}-event run (slowest labelled), median`,
          value: slowest.medianMs,
          unit: 'ms',
          baseline: slowest.baselineMs,
          baselineLabel: 'JSON round trip of the run',
          target: `< ${largeTarget} ms`,
          meets: (v) => v < largeTarget,
        }),
      slowest &&
        row({
          benchmark,
          figure: 'heap used just after analysing it (retained: the autopsy)',
          value: slowest.heapJustAfterBytes / 2 ** 20,
          unit: 'MiB',
        }),
    ].filter(Boolean)
  );
}

/**
 * What the summary reads of dashboard-latest.json.
 * @typedef {object} DashboardResult
 * @property {{ browser?: Percentiles, plainSse?: Percentiles }} [live] ms from the 202
 * @property {{ firstPaintMs: number, apiReadAllMs: number }} [bigRun] a 10,000-step run
 * @property {{ runs: number, firstPageMs: number, rawSqlMs: number }} [runsList]
 */

/** @param {DashboardResult} json */
function dashboardRows(json) {
  const benchmark = 'dashboard';
  /** @type {SummaryRow[]} */
  const rows = [];
  if (json.live)
    rows.push(
      row({
        benchmark,
        figure: '202 → row in the browser, p99 (in-process bus)',
        value: json.live.browser?.p99,
        unit: 'ms',
        baseline: json.live.plainSse?.p99,
        baselineLabel: 'plain SSE client',
        target: '< 100 ms',
        meets: (v) => v < 100,
      }),
    );
  if (json.bigRun)
    rows.push(
      row({
        benchmark,
        figure: 'a 10,000-step run: first steps painted',
        value: json.bigRun.firstPaintMs,
        unit: 'ms',
        baseline: json.bigRun.apiReadAllMs,
        baselineLabel: 'read API, all pages, from node',
        target: '< 1000 ms',
        meets: (v) => v < 1000,
      }),
    );
  if (json.runsList)
    rows.push(
      row({
        benchmark,
        figure: `runs list page, agent with ${json.runsList.runs} runs`,
        value: json.runsList.firstPageMs,
        unit: 'ms',
        baseline: json.runsList.rawSqlMs,
        baselineLabel: 'its SQL alone',
        target: '< 200 ms',
        meets: (v) => v < 200,
      }),
    );
  return rows;
}

/**
 * An instrumented client call, wrapped and not, per call.
 * @typedef {object} InstrumentationScenario
 * @property {string} name
 * @property {string} transport `memory` (`sdk` before 2026-12-01): the SDK's fetch, or MCP's
 *   transport, answers from memory
 * @property {number} wrappedUsPerCall
 * @property {number} plainUsPerCall
 * @property {number} ratio the median of paired batch differences, wrapped / unwrapped
 * @property {number} instrumentationCpuUsPerCall
 * @property {number} [baselineInstrumentationCpuUsPerCall] of a baseline build, same run
 * @property {number} [overheadCpuUsPerCall]
 * @property {number} [callOverheadUs] median of per-call paired differences, wrapped − unwrapped
 * @property {number} [callPlainUs] median unwrapped call
 * @property {number} [callRatio]
 * @property {number} [fixedWorkHotUs]
 * @property {number} [fixedWorkAfterCallUs]
 */

/**
 * What the summary reads of instrumentations-latest.json.
 * @typedef {object} InstrumentationsResult
 * @property {InstrumentationScenario[]} [scenarios]
 * @property {{ before?: number[] }} [loadAverage]
 */

/** @param {InstrumentationsResult} json */
function instrumentationsRows(json) {
  const benchmark = 'instrumentations';
  const scenarios = json.scenarios ?? [];
  if (scenarios.length === 0) return [row({ benchmark, figure: 'instrumentations: not measured' })];
  /** @type {SummaryRow[]} */
  const rows = [];
  const load = json.loadAverage?.before;
  for (const s of scenarios) {
    // With the SDK answering from memory (or MCP's in-memory transport) there is no call of its
    // own to be 5 % of: only the absolute target applies there.
    const ratioCounts = s.transport !== 'memory' && s.transport !== 'sdk';
    if (typeof s.callOverheadUs === 'number' && typeof s.callPlainUs === 'number') {
      const callRatio = s.callRatio ?? 1 + s.callOverheadUs / s.callPlainUs;
      rows.push(
        row({
          benchmark,
          figure: `${s.name}: a wrapped call's added time (median of per-call pairs; ratio: of the unwrapped call)`,
          value: s.callOverheadUs,
          unit: 'µs',
          baseline: s.callPlainUs,
          baselineLabel: 'unwrapped call',
          target: ratioCounts ? '< 20 µs and < 5 %' : '< 20 µs',
          meets: (v) => v < 20 && (!ratioCounts || callRatio < 1.05),
          note: `ratio ${callRatio.toFixed(3)}${
            typeof s.fixedWorkAfterCallUs === 'number' && typeof s.fixedWorkHotUs === 'number'
              ? `; a fixed ${s.fixedWorkHotUs.toFixed(1)} µs of hot work takes ${s.fixedWorkAfterCallUs.toFixed(1)} µs right after this call`
              : ''
          }${load ? `; load average ${load.join(' / ')}` : ''}`,
        }),
      );
    }
    rows.push(
      row({
        benchmark,
        figure: `${s.name}: CPU per call over the unwrapped one, flush of the event included`,
        value: s.overheadCpuUsPerCall,
        unit: 'µs',
        note: `of it the instrumentation's own ${s.instrumentationCpuUsPerCall.toFixed(1)} µs${
          typeof s.baselineInstrumentationCpuUsPerCall === 'number'
            ? ` (baseline build ${s.baselineInstrumentationCpuUsPerCall.toFixed(1)} µs)`
            : ''
        }; the rest is what recording any event costs, by hand too`,
      }),
    );
  }
  return rows;
}

/** @typedef {'batch' | 'otlp-protobuf' | 'otlp-json'} OtlpSide the same spans, three ways */

/**
 * An engine of otlp-latest.json: skipped, or the medians of its sides.
 * @typedef {object} OtlpEngine
 * @property {string} [skipped]
 * @property {string} [error]
 * @property {{ [side in OtlpSide]?: { spansPerSec: number } }} [median]
 * @property {number[]} [loadAvgBefore]
 * @property {number[]} [loadAvgAfter]
 */

/**
 * What the summary reads of otlp-latest.json.
 * @typedef {object} OtlpResult
 * @property {{ targetRatio?: number, spansPerTrace?: number }} [config]
 * @property {Record<string, OtlpEngine>} [engines]
 */

/** @param {OtlpResult} json */
function otlpRows(json) {
  /** @type {SummaryRow[]} */
  const rows = [];
  const benchmark = 'otlp';
  const targetRatio = json.config?.targetRatio ?? 0.8;
  const spans = json.config?.spansPerTrace ?? 20;
  for (const [engine, r] of Object.entries(json.engines ?? {})) {
    const label = ENGINE_LABEL[engine] ?? engine;
    if (r.skipped || !r.median) {
      rows.push(row({ benchmark, figure: `${label}: not measured`, note: r.skipped ?? r.error }));
      continue;
    }
    const baseline = r.median.batch?.spansPerSec;
    for (const [side, encoding] of /** @type {const} */ ([
      ['otlp-protobuf', 'protobuf'],
      ['otlp-json', 'JSON'],
    ])) {
      const m = r.median[side];
      if (!m) continue;
      rows.push(
        row({
          benchmark,
          figure: `${label}: OTLP ${encoding} spans/s vs the same as batches, events/s`,
          value: m.spansPerSec,
          unit: '/s',
          baseline,
          baselineLabel: `POST /v1/traces/batch, ${spans} events a batch`,
          ...(side === 'otlp-protobuf'
            ? {
                target: `ratio >= ${targetRatio}`,
                // (without a batch side NaN, which misses, as in JS: the cast only says so)
                meets: (v) => v / /** @type {number} */ (baseline) >= targetRatio,
                note: `load average ${r.loadAvgBefore?.[0]}–${r.loadAvgAfter?.[0]} during the run`,
              }
            : {}),
        }),
      );
    }
  }
  return rows;
}

/**
 * One or two instances: the medians of the rounds.
 * @typedef {{ batchesPerSec: number, cpuMsPerBatch?: { instanceA: number, postgres: number } }}
 *   ScaleOutSide
 */

/**
 * What the summary reads of scale-out-latest.json.
 * @typedef {object} ScaleOutResult
 * @property {{ mix?: string }} [config]
 * @property {{ one?: ScaleOutSide, two?: ScaleOutSide }} [summary]
 * @property {{ streams?: { missing: number }[] }} [live] a live stream on each instance
 */

/** @param {ScaleOutResult} json */
function scaleOutRows(json) {
  const benchmark = 'scale-out';
  const one = json.summary?.one;
  const two = json.summary?.two;
  if (!one || !two) return [row({ benchmark, figure: 'one vs two instances: not measured' })];
  const streams = json.live?.streams ?? [];
  return [
    row({
      benchmark,
      figure: `two instances vs one, one PostgreSQL and Redis, ${json.config?.mix ?? 'large'} batches/s`,
      value: two.batchesPerSec,
      unit: '/s',
      baseline: one.batchesPerSec,
      baselineLabel: 'one instance, same machine',
      target: 'ratio >= 0.9',
      meets: (v) => v / one.batchesPerSec >= 0.9,
    }),
    row({
      benchmark,
      figure: 'stored batches missing from a live stream of either instance',
      value: streams.reduce((n, s) => n + s.missing, 0),
      unit: 'batches',
      target: '0',
      meets: (v) => v === 0,
    }),
    row({
      benchmark,
      figure: 'service CPU per batch, one instance',
      value: one.cpuMsPerBatch?.instanceA,
      unit: 'ms',
      baseline: one.cpuMsPerBatch?.postgres,
      baselineLabel: "PostgreSQL's CPU per batch",
    }),
  ];
}

/**
 * What the summary reads of anchoring-latest.json.
 * @typedef {object} AnchoringResult
 * @property {{ engine: string, ratio: number, offBatchesPerSecond: number,
 *   onBatchesPerSecond: number, runsAnchoredDuringLoad: number }[]} [results]
 */

/** @param {AnchoringResult} json */
function anchoringRows(json) {
  const benchmark = 'anchoring';
  const results = json.results ?? [];
  if (results.length === 0)
    return [row({ benchmark, figure: 'anchoring on vs off: not measured' })];
  return results.map((r) => {
    // Its figure is the median of the rounds' ratios, each round's two sides measured back to
    // back: the medians of the sides apart pair figures of different moments.
    const ratio = num(r.ratio) ?? ratioOf(num(r.onBatchesPerSecond), num(r.offBatchesPerSecond));
    return row({
      benchmark,
      figure: `${r.engine}: ingest with anchoring on vs off, batches/s (${r.runsAnchoredDuringLoad} runs anchored meanwhile)`,
      value: r.onBatchesPerSecond,
      unit: '/s',
      baseline: r.offBatchesPerSecond,
      baselineLabel: 'anchoring off, same run',
      ratio,
      target: 'ratio >= 0.95',
      meets: () => ratio !== null && ratio >= 0.95,
    });
  });
}

/**
 * The result files the summary reads, by benchmark: bench/results/<name>-latest.json.
 * @typedef {{ ingest: IngestResult, live: LiveResult, client: ClientResult,
 *   analysis: AnalysisResult, instrumentations: InstrumentationsResult,
 *   dashboard: DashboardResult, otlp: OtlpResult, 'scale-out': ScaleOutResult,
 *   anchoring: AnchoringResult }} ResultFiles
 * @typedef {keyof ResultFiles} BenchmarkName
 * @typedef {ResultFiles[BenchmarkName]} ResultFile
 * @typedef {Partial<ResultFiles>} Results the files of the benchmarks that produced one
 */

/** @type {{ [name in BenchmarkName]: (json: ResultFiles[name]) => SummaryRow[] }} */
export const SUMMARISE = {
  ingest: ingestRows,
  live: liveRows,
  client: clientRows,
  analysis: analysisRows,
  instrumentations: instrumentationsRows,
  dashboard: dashboardRows,
  otlp: otlpRows,
  'scale-out': scaleOutRows,
  anchoring: anchoringRows,
};

// ---------------------------------------------------------------------------------------------
// Text.

const fmt = (/** @type {number | null} */ x, /** @type {string | undefined} */ unit) => {
  if (x === null || x === undefined) return 'n/a';
  const digits = Math.abs(x) >= 100 ? 0 : Math.abs(x) >= 10 ? 1 : 2;
  return `${x.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })}${unit === '/s' ? '/s' : ` ${unit ?? ''}`}`.trim();
};

/**
 * One summary row's cells: benchmark, figure, value, baseline, ratio, target, met.
 * @param {SummaryRow} r
 * @param {string} missed
 */
function summaryCells(r, missed) {
  return [
    r.benchmark,
    r.figure,
    fmt(r.value, r.unit),
    r.baseline === null ? '' : `${fmt(r.baseline, r.unit)} ${r.baselineLabel ?? ''}`.trim(),
    r.ratio === null ? '' : r.ratio.toFixed(2),
    r.target ?? '',
    r.met === null ? (r.note ? 'n/a' : '') : r.met ? 'met' : missed,
  ];
}

/** @param {SummaryRow[]} rows */
export function summaryTable(rows) {
  const table = [['benchmark', 'figure', 'value', 'baseline', 'ratio', 'target', 'met?']];
  for (const r of rows) table.push(summaryCells(r, 'MISSED'));
  const notes = rows.filter((r) => r.note).map((r) => `  ${r.benchmark}: ${r.figure}: ${r.note}`);
  return `${textTable(table, (c) => c < 2 || c === 3 || c === 5)}${notes.length ? `\n${notes.join('\n')}` : ''}`;
}

/**
 * The same summary as a Markdown table (bench/results/latest.md, pasted into the README).
 * @param {SummaryRow[]} rows
 */
export function markdownTable(rows) {
  const cell = (/** @type {string} */ s) => String(s).replace(/\|/g, '\\|');
  const lines = [
    '| benchmark | figure | value | baseline | ratio | target | met? |',
    '| --- | --- | ---: | --- | ---: | --- | --- |',
  ];
  for (const r of rows) lines.push(`| ${summaryCells(r, '**missed**').map(cell).join(' | ')} |`);
  return `${lines.join('\n')}\n`;
}

// ---------------------------------------------------------------------------------------------
// The chart: ingest throughput of the service and its baselines per engine and mix (bars, one
// scale per mix), and p99 latencies against the 50 ms target.

const esc = (/** @type {string} */ s) =>
  String(s).replace(
    /[&<>"]/g,
    // (c is one of the keys: the pattern matches nothing else)
    (c) =>
      /** @type {string} */ (
        /** @type {Record<string, string>} */ ({
          '&': '&amp;',
          '<': '&lt;',
          '>': '&gt;',
          '"': '&quot;',
        })[c]
      ),
  );
const COLORS = { service: '#2563eb', http: '#9ca3af', db: '#f59e0b', target: '#dc2626' };

/**
 * What the chart reads of latest.json.
 * @typedef {object} Latest
 * @property {string} [date]
 * @property {boolean} [quick]
 * @property {{ cpuModel?: string, cores?: number, node?: string, platform?: string }} [machine]
 * @property {Results} [results]
 */

/** @typedef {IngestEngine & { mixes: NonNullable<IngestEngine['mixes']> }} IngestEngineWithMixes */

/** @param {Latest} latest */
export function renderSvg(latest) {
  const W = 760;
  const labelW = 250;
  const barMax = W - labelW - 150;
  /** @type {string[]} */
  const parts = [];
  let y = 28;
  /**
   * @param {number} x
   * @param {number} ty
   * @param {string} s
   */
  const text = (x, ty, s, attrs = '') =>
    parts.push(`<text x="${+x.toFixed(1)}" y="${ty}"${attrs ? ` ${attrs}` : ''}>${esc(s)}</text>`);
  /**
   * @param {number} ty
   * @param {number} width
   * @param {string} color
   * @param {string} label
   * @param {string} value
   */
  const bar = (ty, width, color, label, value) => {
    text(labelW - 8, ty + 11, label, 'text-anchor="end"');
    parts.push(
      `<rect x="${labelW}" y="${ty}" width="${Math.max(1, width).toFixed(1)}" height="14" fill="${color}"/>`,
    );
    text(labelW + Math.max(1, width) + 6, ty + 11, value);
  };
  text(12, y, 'Flightlog benchmark suite', 'font-size="16" font-weight="bold"');
  y += 24;

  // Ingest throughput.
  const ingest = latest.results?.ingest;
  const engines = /** @type {[string, IngestEngineWithMixes][]} */ (
    Object.entries(ingest?.engines ?? {}).filter(([, r]) => r.mixes)
  );
  const mixes = [...new Set(engines.flatMap(([, r]) => Object.keys(r.mixes)))];
  text(
    12,
    y,
    'Ingest throughput, batches/s (median of the rounds; one scale per mix)',
    'font-weight="bold"',
  );
  y += 10;
  for (const mix of mixes) {
    const sets = /** @type {[string, IngestMedians][]} */ (
      engines.map(([engine, r]) => [engine, r.mixes[mix]?.median]).filter(([, m]) => m)
    );
    const max = Math.max(
      ...sets.flatMap(([, m]) => [m.service, m.http, m.db].map((s) => s.batchesPerSec ?? 0)),
      1,
    );
    y += 16;
    text(
      12,
      y,
      // (ingest and its engines are there: a mix came from them; a missing set reads undefined)
      `${mix} batches: ${
        /** @type {{ engines: Record<string, IngestEngine> }} */ (ingest).engines[
          /** @type {string} */ (sets[0]?.[0])
        ]?.mixes?.[mix]?.description ?? ''
      }`,
      'font-style="italic"',
    );
    y += 6;
    for (const [engine, m] of sets) {
      const name = ENGINE_LABEL[engine] ?? engine;
      for (const [side, label] of /** @type {const} */ ([
        ['service', `${name}: service`],
        ['db', `${name}: ${engine === 'postgres' ? '(b)' : '(c)'} database only`],
        ['http', `${name}: (a) bare node:http`],
      ])) {
        const v = m[side].batchesPerSec ?? 0;
        const ratio =
          side === 'service' ? '' : ` (service ${(m.service.batchesPerSec / v).toFixed(2)}x)`;
        bar(y, (v / max) * barMax, COLORS[side], label, `${Math.round(v)}${ratio}`);
        y += 18;
      }
      y += 4;
    }
  }

  // p99 latencies vs the target.
  /** @type {[label: string, ms: number][]} */
  const lat = [];
  for (const [engine, r] of engines)
    for (const [mix, m] of Object.entries(r.mixes))
      if (num(m.halfRate?.paced?.p99Ms) !== null)
        lat.push([
          `ingest ${ENGINE_LABEL[engine] ?? engine} ${mix}, half rate`,
          // (num() above: the figure is there)
          /** @type {{ paced: { p99Ms: number } }} */ (m.halfRate).paced.p99Ms,
        ]);
  for (const [bus, r] of Object.entries(latest.results?.live?.buses ?? {}))
    if (num(r.delivery?.service?.fromReply?.p99) !== null)
      lat.push([
        `live ${bus === 'memory' ? 'in-process' : bus} bus delivery`,
        /** @type {{ service: { fromReply: { p99: number } } }} */ (r.delivery).service.fromReply
          .p99,
      ]);
  const target = 50;
  y += 20;
  text(12, y, `p99 latency, ms (target < ${target} ms, red line)`, 'font-weight="bold"');
  y += 12;
  const scale = Math.max(target * 1.25, ...lat.map(([, v]) => v));
  const top = y;
  for (const [label, v] of lat) {
    bar(
      y,
      (Math.max(0, v) / scale) * barMax,
      v < target ? COLORS.service : COLORS.target,
      label,
      `${v.toFixed(1)} ms`,
    );
    y += 18;
  }
  const tx = labelW + (target / scale) * barMax;
  parts.push(
    `<line x1="${tx.toFixed(1)}" y1="${top - 4}" x2="${tx.toFixed(1)}" y2="${y}" stroke="${COLORS.target}" stroke-dasharray="4 3"/>`,
  );
  text(tx + 3, top - 6, `${target} ms`, `fill="${COLORS.target}"`);

  // Caption.
  const m = /** @type {NonNullable<Latest['machine']>} */ (latest.machine ?? {});
  y += 22;
  text(
    12,
    y,
    `${latest.date?.slice(0, 10) ?? ''} · ${m.cpuModel ?? '?'} · ${m.cores ?? '?'} cores · Node ${m.node ?? '?'} · ${m.platform ?? ''}` +
      (latest.quick ? ' · QUICK SMOKE RUN (not for figures)' : ''),
    'fill="#555"',
  );
  y += 16;
  text(
    12,
    y,
    'Service and baselines measured in the same run, interleaved; load generator on the same machine.',
    'fill="#555"',
  );
  y += 14;
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${y}" viewBox="0 0 ${W} ${y}" ` +
    `font-family="system-ui, sans-serif" font-size="12">\n` +
    `<rect width="100%" height="100%" fill="#fff"/>\n${parts.join('\n')}\n</svg>\n`
  );
}
