// Runs-search fairness: what one user's text searches cost everyone else on the embedded engine.
//
// On PGlite the database runs on the server's event loop, one statement at a time, so the time
// one request's statement takes is time every other request waits. This starts the built server
// (a fresh temporary DATA_DIR, written beforehand with one INSERT … generate_series: BENCH_RUNS
// (50,000) runs of one agent, "heavy", whose summaries never contain the searched text, and 1,000
// runs of another, "neighbour"), then, over loopback HTTP:
//
// 1. solo: BENCH_REPEAT (20) requests, one after another, of the heavy agent's runs list with
//    q=BENCH_Q (`%_%_%_`: no trigram, so no index can serve it): the time of each request, and a
//    walk that follows nextCursor to its end (how many pages, how long in all);
// 2. baseline: the neighbour's runs list (first page, 50 runs), one request every 20 ms for
//    BENCH_SECONDS (5): its latency alone;
// 3. contended: the same neighbour requests while BENCH_SEARCHERS (1) users loop the heavy
//    search back to back (following nextCursor, starting over at its end).
//
// It is a benchmark, not a test: nothing is asserted. Figures are printed and written to
// bench/results/runs-search-fairness-latest.json.
//
// Env: BENCH_RUNS (50000), BENCH_REPEAT (20), BENCH_SECONDS (5), BENCH_SEARCHERS (1),
//      BENCH_Q (%_%_%_)

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import {
  cpuMsOf,
  createLifecycle,
  envNumber,
  machineInfo,
  percentiles,
  request,
  startFlightlogServer,
  writeJsonAtomic,
} from './support.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DIST = join(ROOT, 'packages/server/dist');
const CLI = join(DIST, 'cli.js');
const RUNS = envNumber('BENCH_RUNS', 50_000, 1_000, 1_000_000);
const REPEAT = envNumber('BENCH_REPEAT', 20, 3, 1_000);
const SECONDS = envNumber('BENCH_SECONDS', 5, 1, 120);
const SEARCHERS = envNumber('BENCH_SEARCHERS', 1, 1, 16);
const QUERY = process.env.BENCH_Q ?? '%_%_%_';
const NEIGHBOUR_EVERY_MS = 20;
const lifecycle = createLifecycle({ timeoutSeconds: 900 });

/**
 * A runs list page as the server answers it (the store's TracePage, as JSON).
 * @typedef {import('../packages/server/dist/store/trace-store.js').TracePage} RunsPage
 */

const sleep = (/** @type {number} */ ms) => new Promise((resolve) => setTimeout(resolve, ms));
const round = (/** @type {number | null} */ ms) => (ms === null ? null : +ms.toFixed(1));
/** The count and latency percentiles of one series of requests, in ms. */
const figures = (/** @type {number[]} */ values) => {
  const { p50, p99, max } = percentiles(values);
  return { count: values.length, p50Ms: round(p50), p99Ms: round(p99), maxMs: round(max) };
};

/**
 * `n` runs of `agent`, ids `<prefix>0000001`…, one every 26 s back from now; no "%_%_%_" in them.
 * @param {string} prefix
 * @param {string} agent
 * @param {number} n
 */
function insertRuns(prefix, agent, n) {
  return `
INSERT INTO traces (id, agent_id, status, started_at, ended_at, duration_ms, input_summary,
  output_summary, error_message, tags, event_count, total_tokens, total_cost_usd,
  total_lamports, chain_tx_count, tools_called)
SELECT '${prefix}' || lpad(i::text, 7, '0'), '${agent}',
  CASE WHEN i % 20 = 0 THEN 'errored' ELSE 'completed' END,
  now() - make_interval(secs => i * 26), now() - make_interval(secs => i * 26 - 2), 2000,
  (ARRAY['Swap','Bridge','Quote','Pay','Stake'])[1 + i % 5] || ' ' || (i % 997) ||
    ' SOL for USDC via ' || (ARRAY['jupiter','orca','raydium'])[1 + i % 3] || ' order ' || md5(i::text),
  'Got ' || (i % 500) || '.17 USDC back, tx ' || substr(md5('o' || i), 1, 16),
  CASE WHEN i % 20 = 0 THEN 'slippage too high at step ' || (i % 7) END,
  ARRAY[CASE WHEN i % 2 = 0 THEN 'prod' ELSE 'dev' END], 12, 3400, 0.0013, 5000, 1,
  ARRAY['jupiter.quote']
FROM generate_series(1, ${n}) AS i`;
}

/** @param {string} dataDir */
async function writeData(dataDir) {
  // imported from the built server, found at run time (DIST)
  const { openStore } =
    /** @type {typeof import('../packages/server/dist/store/open-store.js')} */ (
      await import(join(DIST, 'store/open-store.js'))
    );
  const store = await openStore({ dataDir, dataDirDurability: 'process-crash' });
  try {
    await store.sql.query(
      `INSERT INTO agents (id, name) VALUES ('heavy', 'heavy'), ('neighbour', 'neighbour')`,
    );
    await store.sql.query(insertRuns('heavy-', 'heavy', RUNS));
    await store.sql.query(insertRuns('neigh-', 'neighbour', 1_000));
    await store.sql.query('ANALYZE traces');
  } finally {
    await store.close();
  }
}

async function main() {
  const dataDir = mkdtempSync(join(tmpdir(), 'flightlog-bench-search-'));
  lifecycle.onCleanup(() => rmSync(dataDir, { recursive: true, force: true }));
  const loadStarted = performance.now();
  await writeData(dataDir);
  console.log(`${RUNS} runs written in ${((performance.now() - loadStarted) / 1000).toFixed(1)} s`);

  const server = await startFlightlogServer(lifecycle, {
    cli: CLI,
    env: { DATA_DIR: dataDir, ANALYSIS_WORKER: 'off' },
  });
  const admin = {
    authorization: `Bearer ${server.adminToken}`,
    'content-type': 'application/json',
  };
  for (const [agent, user] of [
    ['heavy', 'heavy-user'],
    ['neighbour', 'neighbour-user'],
  ]) {
    const res = await request('PUT', `${server.base}/admin/v1/agents/${agent}/members/${user}`, {
      headers: admin,
      body: '{"role":"viewer"}',
    });
    if (res.status !== 200) throw new Error(`member ${user}: ${res.status} ${res.text}`);
  }
  const { mintDevToken } =
    /** @type {typeof import('../packages/server/dist/auth/dev-token.js')} */ (
      await import(join(DIST, 'auth/dev-token.js'))
    );
  const heavyToken = await mintDevToken(server.jwtSecret, 'heavy-user');
  const neighbourToken = await mintDevToken(server.jwtSecret, 'neighbour-user');

  /**
   * One request of a runs list: its time, and its page.
   * @param {string} agent
   * @param {string} token
   * @param {string} query
   * @returns {Promise<{ ms: number, page: RunsPage }>}
   */
  const list = async (agent, token, query) => {
    const t0 = performance.now();
    const res = await request('GET', `${server.base}/v1/agents/${agent}/traces?${query}`, {
      headers: { authorization: `Bearer ${token}` },
      timeoutMs: 60_000,
    });
    const ms = performance.now() - t0;
    if (res.status !== 200) throw new Error(`${agent} ${query}: ${res.status} ${res.text}`);
    return { ms, page: /** @type {RunsPage} */ (JSON.parse(res.text)) };
  };
  const search = (/** @type {string | null} */ cursor) =>
    list(
      'heavy',
      heavyToken,
      `q=${encodeURIComponent(QUERY)}&limit=50${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
    );
  const neighbourPage = () => list('neighbour', neighbourToken, 'limit=50');

  // warm-up: the first statements of a kind plan, and PGlite's caches fill
  for (let i = 0; i < 3; i++) {
    await search(null);
    await neighbourPage();
  }

  // 1. solo
  const solo = [];
  // the server's pid is there (it answered /readyz), hence the casts
  const cpuBefore = cpuMsOf(/** @type {number} */ (server.child.pid));
  for (let i = 0; i < REPEAT; i++) solo.push((await search(null)).ms);
  const cpuAfter = cpuMsOf(/** @type {number} */ (server.child.pid));
  const cpuPerSearch =
    cpuBefore === null || cpuAfter === null ? null : (cpuAfter - cpuBefore) / REPEAT;
  let pages = 0;
  let found = 0;
  let partial = 0;
  const walkStarted = performance.now();
  for (let cursor = /** @type {string | null} */ (null); ;) {
    const { page } = await search(cursor);
    pages++;
    found += page.traces.length;
    if (page.searchedTo) partial++;
    cursor = page.nextCursor;
    if (!cursor) break;
  }
  const walkMs = performance.now() - walkStarted;

  // 2. and 3.: the neighbour's requests, paced, alone and then beside the searchers
  const paced = async () => {
    const times = [];
    const end = performance.now() + SECONDS * 1000;
    while (performance.now() < end) {
      const started = performance.now();
      times.push((await neighbourPage()).ms);
      await sleep(Math.max(0, NEIGHBOUR_EVERY_MS - (performance.now() - started)));
    }
    return times;
  };
  const cpuBaseline = cpuMsOf(/** @type {number} */ (server.child.pid));
  const baseline = await paced();
  const cpuBaselineEnd = cpuMsOf(/** @type {number} */ (server.child.pid));
  const cpuPerNeighbourPage =
    cpuBaseline === null || cpuBaselineEnd === null
      ? null
      : (cpuBaselineEnd - cpuBaseline) / baseline.length;
  let stop = false;
  /** @type {number[]} */
  const searcherTimes = [];
  const searchers = Array.from({ length: SEARCHERS }, async () => {
    /** @type {string | null} */
    let cursor = null;
    while (!stop) {
      const { ms, page } = await search(cursor);
      searcherTimes.push(ms);
      cursor = page.nextCursor;
    }
  });
  await sleep(200);
  const contended = await paced();
  stop = true;
  await Promise.all(searchers);
  await server.stop();

  const result = {
    machine: machineInfo(ROOT),
    config: { runs: RUNS, repeat: REPEAT, seconds: SECONDS, searchers: SEARCHERS, q: QUERY },
    soloSearch: {
      ...figures(solo),
      serverCpuMs: cpuPerSearch === null ? null : round(cpuPerSearch),
    },
    walk: { pages, partialPages: partial, found, totalMs: round(walkMs) },
    neighbourAlone: {
      ...figures(baseline),
      serverCpuMs: cpuPerNeighbourPage === null ? null : round(cpuPerNeighbourPage),
    },
    neighbourBesideSearchers: figures(contended),
    searchesDuringContention: figures(searcherTimes),
  };
  console.log(
    [
      `q=${QUERY} over ${RUNS.toLocaleString()} runs (PGlite, HTTP over loopback):`,
      `  one request          p50 ${result.soloSearch.p50Ms} ms, max ${result.soloSearch.maxMs} ms (${REPEAT} requests), server CPU ${result.soloSearch.serverCpuMs} ms each`,
      `  walk to the end      ${pages} page(s), ${partial} partial, ${found} runs found, ${result.walk.totalMs} ms in all`,
      `  neighbour alone      p50 ${result.neighbourAlone.p50Ms} ms, p99 ${result.neighbourAlone.p99Ms} ms, max ${result.neighbourAlone.maxMs} ms (${result.neighbourAlone.count} requests), server CPU ${result.neighbourAlone.serverCpuMs} ms each`,
      `  neighbour beside ${SEARCHERS}   p50 ${result.neighbourBesideSearchers.p50Ms} ms, p99 ${result.neighbourBesideSearchers.p99Ms} ms, max ${result.neighbourBesideSearchers.maxMs} ms (${result.neighbourBesideSearchers.count} requests)`,
      `  the searches then    p50 ${result.searchesDuringContention.p50Ms} ms, p99 ${result.searchesDuringContention.p99Ms} ms (${result.searchesDuringContention.count} requests)`,
    ].join('\n'),
  );
  writeJsonAtomic(join(ROOT, 'bench/results/runs-search-fairness-latest.json'), result);
}

try {
  await main();
} finally {
  await lifecycle.runCleanups();
}
