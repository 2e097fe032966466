// The benchmark suite (`npm run bench`): runs ingest.mjs, live.mjs, client.mjs, analysis.mjs,
// instrumentations.mjs, dashboard.mjs, otlp.mjs, scale-out.mjs and anchoring.mjs
// one after the other as child processes, each with bounded durations, each with its baselines
// in the same run (see each file), then prints one summary table (figure, value, baseline, ratio,
// target, met) and writes the figures to bench/results/latest.json (and as a Markdown table to
// latest.md) and a chart to bench/results/latest.svg. Every benchmark still writes its own
// bench/results/<name>-latest.json.
//
// Knobs reach the benchmarks as their own BENCH_* variables. A variable BENCH_<NAME>_<KNOB> (e.g.
// BENCH_INGEST_SECONDS, BENCH_CLIENT_ROUNDS) sets BENCH_<KNOB> for that benchmark alone; the
// suite's defaults below apply where neither is set (BENCH_SECONDS=2 shortens ingest and live).
//
//   BENCH_ONLY=ingest,live          run only these (the others' figures are left out)
//   BENCH_QUICK=1                   a smoke run: 1 round of 1 s, fewer samples; marked as such
//                                   in the table, latest.json and the chart; not for figures
//   BENCH_SUITE_TIMEOUT_SECONDS     stops the suite (default 1200)
//   node bench/run-all.mjs --report-only   rebuilds table, latest.json and latest.svg from the
//                                   existing <name>-latest.json files without running anything

import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { SUMMARISE, markdownTable, renderSvg, summaryTable } from './report.mjs';
import { envNumber, machineInfo, writeJsonAtomic } from './support.mjs';

/**
 * @typedef {import('./report.mjs').BenchmarkName} BenchmarkName
 * @typedef {import('./report.mjs').ResultFile} ResultFile
 * @typedef {import('./report.mjs').Results} Results
 * @typedef {import('./report.mjs').SummaryRow} SummaryRow
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const RESULTS = join(ROOT, 'bench/results');
const QUICK = /** @type {(string | undefined)[]} */ (['1', 'true', 'yes']).includes(
  process.env.BENCH_QUICK?.trim().toLowerCase(),
);
const REPORT_ONLY = process.argv.includes('--report-only');
const SUITE_TIMEOUT = envNumber('BENCH_SUITE_TIMEOUT_SECONDS', 1200, 60, 7200);

/**
 * A benchmark of the suite, bench/<name>.mjs, with its BENCH_* variables by kind of run.
 * @typedef {object} Benchmark
 * @property {BenchmarkName} name
 * @property {Record<string, string>} defaults
 * @property {Record<string, string>} quick for a smoke run (BENCH_QUICK)
 */

/**
 * The benchmarks, in order, with the suite's defaults (chosen so the whole suite stays under
 * 15 minutes on a 2-core machine: ~5 min ingest, ~1.5 min live, ~0.7 min client, ~1.5 min
 * analysis, ~2.5 min otlp, ~1.5 min scale-out) and the quick smoke-run settings.
 * @type {Benchmark[]}
 */
const BENCHMARKS = [
  {
    name: 'ingest',
    defaults: { BENCH_SECONDS: '4', BENCH_ROUNDS: '3', BENCH_WARMUP_SECONDS: '1' },
    quick: { BENCH_SECONDS: '1', BENCH_ROUNDS: '1', BENCH_WARMUP_SECONDS: '0' },
  },
  {
    name: 'live',
    defaults: { BENCH_SECONDS: '5', BENCH_WARMUP_SECONDS: '1' },
    quick: { BENCH_SECONDS: '2', BENCH_WARMUP_SECONDS: '1', BENCH_IDLE_STREAMS: '1000' },
  },
  {
    name: 'client',
    // 1,000 calls a round: langfuse's queued work takes ~5 ms per event, 2,000 took 80 s.
    defaults: { BENCH_EVENTS: '1000' },
    quick: { BENCH_ROUNDS: '3', BENCH_EVENTS: '500', BENCH_FLUSHES: '5' },
  },
  {
    name: 'analysis',
    defaults: { BENCH_JOBS: '200', BENCH_ROUNDS: '3', BENCH_DELAY_SAMPLES: '50' },
    quick: { BENCH_JOBS: '30', BENCH_ROUNDS: '1', BENCH_DELAY_SAMPLES: '10' },
  },
  {
    name: 'instrumentations',
    defaults: { BENCH_CALLS: '500', BENCH_ROUNDS: '5' },
    quick: { BENCH_CALLS: '100', BENCH_ROUNDS: '1' },
  },
  {
    name: 'dashboard',
    defaults: { BENCH_BATCHES: '200', BENCH_ROUNDS: '3' },
    quick: { BENCH_BATCHES: '50', BENCH_ROUNDS: '1', BENCH_RUNS: '10000' },
  },
  {
    // ~2.5 min: 3 sides x (1 + 3 x 4 s) per engine, plus start-up and body building
    name: 'otlp',
    defaults: { BENCH_SECONDS: '4', BENCH_ROUNDS: '3', BENCH_WARMUP_SECONDS: '1' },
    quick: { BENCH_SECONDS: '1', BENCH_ROUNDS: '1', BENCH_WARMUP_SECONDS: '1' },
  },
  {
    // ~1.5 min: 2 sides x (2 + 3 x 6 s), plus start-up and body building
    name: 'scale-out',
    defaults: { BENCH_SECONDS: '6', BENCH_ROUNDS: '3', BENCH_WARMUP_SECONDS: '2' },
    quick: { BENCH_SECONDS: '1', BENCH_ROUNDS: '1', BENCH_WARMUP_SECONDS: '0' },
  },
  {
    // ~4 min: 2 engines x 2 sides x (1 + 5 rounds) x (3 + 5 s and a start-up)
    name: 'anchoring',
    defaults: { BENCH_SECONDS: '5', BENCH_ROUNDS: '5' },
    quick: { BENCH_SECONDS: '1', BENCH_ROUNDS: '1' },
  },
];

const only = process.env.BENCH_ONLY?.trim()
  ? process.env.BENCH_ONLY.split(',').map((s) => s.trim())
  : null;
const selected = BENCHMARKS.filter((b) => !only || only.includes(b.name));

/**
 * The environment of one benchmark: BENCH_<NAME>_<KNOB> over BENCH_<KNOB> over the defaults.
 * @param {Benchmark} bench
 */
function envFor(bench) {
  const env = { ...process.env };
  const prefix = `BENCH_${bench.name.toUpperCase().replaceAll('-', '_')}_`;
  /** @type {Record<string, string | undefined>} */
  const own = {};
  for (const [name, value] of Object.entries(process.env))
    if (name.startsWith(prefix)) own[`BENCH_${name.slice(prefix.length)}`] = value;
  for (const [name, value] of Object.entries(QUICK ? bench.quick : bench.defaults))
    if (env[name] === undefined || QUICK) env[name] = value;
  Object.assign(env, own);
  const knobs = Object.fromEntries(
    Object.entries(env).filter(
      ([name]) =>
        /^BENCH_[A-Z_]+$/.test(name) &&
        !/^BENCH_(INGEST|LIVE|CLIENT|ANALYSIS|INSTRUMENTATIONS|DASHBOARD|OTLP|SCALE_OUT)_/.test(
          name,
        ) &&
        !['BENCH_ONLY', 'BENCH_QUICK', 'BENCH_SUITE_TIMEOUT_SECONDS'].includes(name) &&
        !/URL$/.test(name),
    ),
  );
  return { env, knobs };
}

/** @type {import('node:child_process').ChildProcess | undefined} */
let current;
let stopping = false;
/** @param {string} reason */
function stopCurrent(reason) {
  if (stopping) return;
  stopping = true;
  console.error(`\n!!! ${reason}: stopping the running benchmark`);
  current?.kill('SIGTERM');
}
process.on('SIGINT', () => stopCurrent('interrupted')); // the child gets the terminal's SIGINT too
process.on('SIGTERM', () => stopCurrent('terminated'));

/** @typedef {{ code: number | null, signal: NodeJS.Signals | null }} Exit */

/**
 * @param {Benchmark} bench
 * @param {NodeJS.ProcessEnv} env
 * @returns {Promise<Exit>}
 */
function runBenchmark(bench, env) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(ROOT, 'bench', `${bench.name}.mjs`)], {
      cwd: ROOT,
      env,
      stdio: 'inherit',
    });
    current = child;
    child.once('exit', (code, signal) => {
      current = undefined;
      resolve({ code, signal });
    });
  });
}

/**
 * When a result was measured: benchmarks write it at the top or in their machine record.
 * @typedef {{ date?: string, measuredAt?: string, machine?: { date?: string } }} Measured
 */
const measuredAt = (/** @type {Measured} */ json) =>
  json.date ?? json.measuredAt ?? json.machine?.date;

/**
 * A benchmark's result file, and whether it was written since `since` (ms since the epoch).
 * @param {BenchmarkName} name
 * @param {number} [since]
 * @returns {{ json: null, fresh: false } | { json: ResultFile & Measured, fresh: boolean }}
 */
function readResult(name, since) {
  const file = join(RESULTS, `${name}-latest.json`);
  if (!existsSync(file)) return { json: null, fresh: false };
  const json = /** @type {ResultFile & Measured} */ (JSON.parse(readFileSync(file, 'utf8')));
  const date = Date.parse(measuredAt(json) ?? '');
  return { json, fresh: since === undefined || date >= since };
}

/**
 * What the suite records of one benchmark (latest.json's `runs`): run, rebuilt from its file
 * (--report-only), or skipped.
 * @typedef {object} RunRecord
 * @property {BenchmarkName} name
 * @property {boolean} [reportOnly]
 * @property {string} [measuredAt]
 * @property {string} [skipped]
 * @property {Record<string, string | undefined>} [knobs]
 * @property {number} [seconds]
 * @property {Exit} [exit]
 * @property {boolean} [resultFresh]
 */

/**
 * Each benchmark's own file under its name. The types cannot pair a name held in a variable with
 * its file: hence the casts where a summariser is picked by name and where `latest` takes them.
 * @typedef {Partial<Record<BenchmarkName, ResultFile & Measured>>} ResultsByName
 */

async function main() {
  const started = performance.now();
  /** @type {RunRecord[]} */
  const runs = [];
  /** @type {ResultsByName} */
  const results = {};
  const watchdog = setTimeout(
    () => stopCurrent(`SUITE TIMED OUT after ${SUITE_TIMEOUT} s`),
    SUITE_TIMEOUT * 1000,
  );
  watchdog.unref();
  for (const bench of selected) {
    if (REPORT_ONLY) {
      const { json } = readResult(bench.name);
      if (json) results[bench.name] = json;
      runs.push({ name: bench.name, reportOnly: true, measuredAt: json?.date ?? json?.measuredAt });
      continue;
    }
    if (stopping) {
      runs.push({ name: bench.name, skipped: 'suite stopped' });
      continue;
    }
    const { env, knobs } = envFor(bench);
    console.log(
      `\n${'='.repeat(78)}\n== ${bench.name}: ${JSON.stringify(knobs)}\n${'='.repeat(78)}`,
    );
    const t0 = Date.now();
    const exit = await runBenchmark(bench, env);
    const seconds = Math.round((Date.now() - t0) / 100) / 10;
    const { json, fresh } = readResult(bench.name, t0);
    /** @type {RunRecord} */
    const run = { name: bench.name, knobs, seconds, exit, resultFresh: fresh };
    if (fresh) results[bench.name] = json;
    else console.error(`\n!!! ${bench.name} wrote no result (exit ${JSON.stringify(exit)})`);
    runs.push(run);
  }
  clearTimeout(watchdog);

  const summary = Object.entries(results).flatMap(([name, json]) =>
    /** @type {(json: ResultFile) => SummaryRow[]} */ (
      SUMMARISE[/** @type {BenchmarkName} */ (name)]
    )(json),
  );
  const missing = runs.filter((r) => !results[r.name]).map((r) => r.name);
  const meta = machineInfo(ROOT);
  const latest = {
    date: meta.date,
    quick: QUICK,
    reportOnly: REPORT_ONLY,
    machine: {
      cpuModel: meta.cpuModel,
      cores: meta.cores,
      memoryBytes: meta.memoryBytes,
      node: meta.node,
      platform: meta.platform,
    },
    gitCommit: meta.gitCommit,
    totalSeconds: Math.round((performance.now() - started) / 100) / 10,
    runs,
    missing,
    summary,
    targets: {
      met: summary.filter((r) => r.met === true).length,
      missed: summary.filter((r) => r.met === false).map((r) => `${r.benchmark}: ${r.figure}`),
    },
    results: /** @type {Results} */ (results),
  };
  // A report rebuilt from runs made at different times says when each was made.
  const whenMeasured = (/** @type {ResultsByName} */ byName) =>
    Object.entries(byName)
      .map(([name, json]) => `${name} ${measuredAt(json) ?? '?'}`)
      .join(', ');
  writeJsonAtomic(join(RESULTS, 'latest.json'), latest);
  writeFileSync(join(RESULTS, 'latest.svg'), renderSvg(latest));
  writeFileSync(
    join(RESULTS, 'latest.md'),
    `Measured ${whenMeasured(results) || latest.date} on ${meta.cpuModel} x ${meta.cores}, node ${meta.node}` +
      `${QUICK ? ' (QUICK SMOKE RUN: not for figures)' : ''}; ratio = service / baseline, same run.\n\n` +
      markdownTable(summary),
  );

  console.log(
    `\n${'='.repeat(78)}\nFlightlog benchmark suite — ${latest.date}, ${meta.cpuModel} x ${meta.cores}, ` +
      `node ${meta.node}${QUICK ? '  *** QUICK SMOKE RUN: not for figures ***' : ''}\n` +
      `ratio = service / baseline, both measured in the same run (medians of interleaved rounds)\n`,
  );
  console.log(summaryTable(summary));
  for (const r of runs)
    if (!r.reportOnly)
      console.log(
        `  ${r.name}: ${r.seconds ?? '-'} s${r.exit && r.exit.code !== 0 ? `, exit ${JSON.stringify(r.exit)}` : ''}`,
      );
  if (missing.length) console.log(`\n!!! no figures from: ${missing.join(', ')}`);
  console.log(
    `\n${latest.targets.met} targets met, ${latest.targets.missed.length} missed; total ${latest.totalSeconds} s\n` +
      'wrote bench/results/latest.json, latest.md and latest.svg',
  );
  process.exitCode = missing.length > 0 || stopping ? 1 : 0;
}

await main();
