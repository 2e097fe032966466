// The suite's summary (run-all.mjs): one row per figure, with its same-run baseline, the ratio
// service / baseline, the target and whether it is met, drawn from the benchmarks' own
// result files; the text table; and bench/results/latest.svg, a small chart written by hand.

import { textTable } from './support.mjs';

const num = (x) => (typeof x === 'number' && Number.isFinite(x) ? x : null);
const ratioOf = (value, baseline) =>
  num(value) !== null && num(baseline) !== null && baseline > 0.05 ? value / baseline : null;

/**
 * A summary row. `meets(value)` decides the target (null: no target, or no value). Figures a
 * benchmark did not produce keep a row with value null and `met: null`, plus `note`.
 */
function row({ benchmark, figure, value, unit, baseline, baselineLabel, target, meets, note }) {
  const v = num(value);
  return {
    benchmark,
    figure,
    value: v,
    unit,
    baseline: num(baseline),
    baselineLabel: baselineLabel ?? null,
    ratio: ratioOf(v, num(baseline)),
    target: target ?? null,
    met: v === null || !meets ? null : Boolean(meets(v)),
    ...(note ? { note } : {}),
  };
}

const ENGINE_LABEL = {
  postgres: 'PostgreSQL',
  pglite: 'PGlite',
  'pglite-process-crash': 'PGlite process-crash',
};
const DB_BASELINE = {
  postgres: '(b) PostgreSQL, 1 statement',
  pglite: '(c) PGlite, 1 statement',
  'pglite-process-crash': '(c) PGlite process-crash, 1 statement',
};

function ingestRows(json) {
  const rows = [];
  const benchmark = 'ingest';
  const targetRatio = json.config?.targetRatio ?? 0.8;
  const targetP99 = json.config?.targetP99Ms ?? 50;
  // per engine since the naive baseline came in; a number before
  const targetRssOf = (engine) =>
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
            meets: () => m.ratios.serverCpuVsNaive <= 1.5,
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

function liveRows(json) {
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

function analysisRows(json) {
  const benchmark = 'analysis';
  const target = json.config?.targetDelayMs ?? 1000;
  const delay = (key, label) =>
    json.delay?.[key] &&
    row({
      benchmark,
      figure: `delay to the autopsy, median (${label})`,
      value: json.delay[key].medianMs,
      unit: 'ms',
      target: `< ${target} ms`,
      meets: (v) => v < target,
    });
  const jobs = (key, label) =>
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
  const score = (key, label) =>
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
  return [
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
  ].filter(Boolean);
}

function dashboardRows(json) {
  const benchmark = 'dashboard';
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

function instrumentationsRows(json) {
  const benchmark = 'instrumentations';
  const scenarios = json.scenarios ?? [];
  if (scenarios.length === 0) return [row({ benchmark, figure: 'instrumentations: not measured' })];
  const rows = [];
  const load = json.loadAverage?.before;
  for (const s of scenarios) {
    // The ratio is a figure of calls with a cost of their own (a socket, an MCP round trip); with
    // the SDK's fetch answering from memory only the absolute cost is.
    if (s.transport !== 'sdk')
      rows.push(
        row({
          benchmark,
          figure: `${s.name}: wrapped vs unwrapped, µs/call`,
          value: s.wrappedUsPerCall,
          unit: 'µs',
          baseline: s.plainUsPerCall,
          baselineLabel: 'unwrapped client',
          target: '< 5 % slower',
          // The median of paired batch differences (s.ratio), steadier than value / baseline.
          meets: () => s.ratio < 1.05,
          ...(load ? { note: `load average ${load.join(' / ')}` } : {}),
        }),
      );
    rows.push(
      row({
        benchmark,
        figure: `${s.name}: instrumentation's own CPU per call`,
        value: s.instrumentationCpuUsPerCall,
        unit: 'µs',
        ...(typeof s.baselineInstrumentationCpuUsPerCall === 'number'
          ? {
              baseline: s.baselineInstrumentationCpuUsPerCall,
              baselineLabel: 'baseline build, same run',
            }
          : {}),
        target: '< 20 µs',
        meets: (v) => v < 20,
        note: `CPU over the unwrapped call ${s.overheadCpuUsPerCall?.toFixed(1)} µs, recording the event included`,
      }),
    );
  }
  return rows;
}

function otlpRows(json) {
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
    for (const [side, encoding] of [
      ['otlp-protobuf', 'protobuf'],
      ['otlp-json', 'JSON'],
    ]) {
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
                meets: (v) => v / baseline >= targetRatio,
                note: `load average ${r.loadAvgBefore?.[0]}–${r.loadAvgAfter?.[0]} during the run`,
              }
            : {}),
        }),
      );
    }
  }
  return rows;
}

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

export const SUMMARISE = {
  ingest: ingestRows,
  live: liveRows,
  client: clientRows,
  analysis: analysisRows,
  instrumentations: instrumentationsRows,
  dashboard: dashboardRows,
  otlp: otlpRows,
  'scale-out': scaleOutRows,
};

// ---------------------------------------------------------------------------------------------
// Text.

const fmt = (x, unit) => {
  if (x === null || x === undefined) return 'n/a';
  const digits = Math.abs(x) >= 100 ? 0 : Math.abs(x) >= 10 ? 1 : 2;
  return `${x.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })}${unit === '/s' ? '/s' : ` ${unit ?? ''}`}`.trim();
};

/** One summary row's cells: benchmark, figure, value, baseline, ratio, target, met. */
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

export function summaryTable(rows) {
  const table = [['benchmark', 'figure', 'value', 'baseline', 'ratio', 'target', 'met?']];
  for (const r of rows) table.push(summaryCells(r, 'MISSED'));
  const notes = rows.filter((r) => r.note).map((r) => `  ${r.benchmark}: ${r.figure}: ${r.note}`);
  return `${textTable(table, (c) => c < 2 || c === 3 || c === 5)}${notes.length ? `\n${notes.join('\n')}` : ''}`;
}

/** The same summary as a Markdown table (bench/results/latest.md, pasted into the README). */
export function markdownTable(rows) {
  const cell = (s) => String(s).replace(/\|/g, '\\|');
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

const esc = (s) =>
  String(s).replace(
    /[&<>"]/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c],
  );
const COLORS = { service: '#2563eb', http: '#9ca3af', db: '#f59e0b', target: '#dc2626' };

export function renderSvg(latest) {
  const W = 760;
  const labelW = 250;
  const barMax = W - labelW - 150;
  const parts = [];
  let y = 28;
  const text = (x, ty, s, attrs = '') =>
    parts.push(`<text x="${+x.toFixed(1)}" y="${ty}"${attrs ? ` ${attrs}` : ''}>${esc(s)}</text>`);
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
  const engines = Object.entries(ingest?.engines ?? {}).filter(([, r]) => r.mixes);
  const mixes = [...new Set(engines.flatMap(([, r]) => Object.keys(r.mixes)))];
  text(
    12,
    y,
    'Ingest throughput, batches/s (median of the rounds; one scale per mix)',
    'font-weight="bold"',
  );
  y += 10;
  for (const mix of mixes) {
    const sets = engines.map(([engine, r]) => [engine, r.mixes[mix]?.median]).filter(([, m]) => m);
    const max = Math.max(
      ...sets.flatMap(([, m]) => [m.service, m.http, m.db].map((s) => s.batchesPerSec ?? 0)),
      1,
    );
    y += 16;
    text(
      12,
      y,
      `${mix} batches: ${ingest.engines[sets[0]?.[0]]?.mixes?.[mix]?.description ?? ''}`,
      'font-style="italic"',
    );
    y += 6;
    for (const [engine, m] of sets) {
      const name = ENGINE_LABEL[engine] ?? engine;
      for (const [side, label] of [
        ['service', `${name}: service`],
        ['db', `${name}: ${engine === 'postgres' ? '(b)' : '(c)'} database only`],
        ['http', `${name}: (a) bare node:http`],
      ]) {
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
  const lat = [];
  for (const [engine, r] of engines)
    for (const [mix, m] of Object.entries(r.mixes))
      if (num(m.halfRate?.paced?.p99Ms) !== null)
        lat.push([
          `ingest ${ENGINE_LABEL[engine] ?? engine} ${mix}, half rate`,
          m.halfRate.paced.p99Ms,
        ]);
  for (const [bus, r] of Object.entries(latest.results?.live?.buses ?? {}))
    if (num(r.delivery?.service?.fromReply?.p99) !== null)
      lat.push([
        `live ${bus === 'memory' ? 'in-process' : bus} bus delivery`,
        r.delivery.service.fromReply.p99,
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
  const m = latest.machine ?? {};
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
