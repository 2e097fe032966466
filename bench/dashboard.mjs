// Dashboard benchmark (`npm run bench:dashboard`, part of `npm run bench`): what a person sees in
// the browser, measured in Debian's Chromium (/usr/bin/chromium, CHROMIUM_PATH elsewhere) driven
// by playwright-core against the built server as a child process, each figure next to a baseline
// measured in the same run on the same machine:
//
//   live     after 10 unmeasured, BENCH_BATCHES (200) batches posted one after another (BENCH_INTERVAL_MS, 25 ms, apart)
//            to an agent whose runs page is open; per batch, the time from its 202 to its row in
//            the page (a MutationObserver in the page stamps each new row; both clocks are this
//            machine's wall clock, performance.timeOrigin + now()). Baseline: a plain SSE client
//            (node:http) on the same agent's stream, same batches: 202 → message parsed. The
//            ratio is what the browser, the page's parsing and its rendering add. Target: p99 <
//            100 ms (in-process bus, the embedded store).
//   big run  a run of 10,000 steps (10 batches of 1,000 events): from starting the navigation to
//            its first step rows painted, and to all 10,000 loaded (median of BENCH_ROUNDS, 3).
//            Baseline: reading the same run's events through the read API from node (all pages).
//            Target: first paint < 1 s.
//   runs list  an agent with 100,000 runs (written with one INSERT … generate_series into the
//            server's PostgreSQL schema; skipped, loudly, without PostgreSQL): GET
//            /v1/agents/:id/traces?limit=50, the first page and one 1,000 runs deep (its cursor),
//            median of 20 each, measured by the client over loopback (an upper bound of the
//            server's time). Baseline: the same page's SQL run directly with pg. Target < 200 ms.
//
// Figures are printed and written to bench/results/dashboard-latest.json.
// The functions given to page.addInitScript and page.evaluate run in the page: they reach its
// window, document and MutationObserver through globalThis (see PageGlobals).
import { existsSync } from 'node:fs';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { chromium } from 'playwright-core';
import { monotonicFactory } from 'ulidx';
import {
  createItemFactory,
  createLifecycle,
  envNumber,
  machineInfo,
  median,
  percentiles,
  reachable,
  request,
  startFlightlogServer,
  writeJsonAtomic,
} from './support.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLI = join(ROOT, 'packages/server/dist/cli.js');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const BATCHES = envNumber('BENCH_BATCHES', 200, 10, 5000);
const INTERVAL_MS = envNumber('BENCH_INTERVAL_MS', 25, 0, 1000);
const ROUNDS = envNumber('BENCH_ROUNDS', 3, 1, 20);
const RUNS = envNumber('BENCH_RUNS', 100_000, 1000, 1_000_000);
const DATABASE_URL =
  process.env.BENCH_DATABASE_URL?.trim() || 'postgres://postgres@127.0.0.1:5432/test';
const ulid = monotonicFactory();
const lifecycle = createLifecycle({
  timeoutSeconds: envNumber('BENCH_TIMEOUT_SECONDS', 600, 60, 3600),
});

// the ingest benchmark's items: 1 trace + llm_call events with tokens and cost
const makeItem = createItemFactory({ ulid, eventsPerBatch: 1 });
const oneRunBatch = (/** @type {string} */ agentId) => {
  const item = makeItem(agentId, 1);
  return { id: item.trace.id, body: { batchId: ulid(), items: [item] } };
};
/**
 * POSTs a batch with the agent's API key.
 * @param {string} base
 * @param {string} key
 * @param {unknown} body
 */
const post = (base, key, body) =>
  request('POST', `${base}/v1/traces/batch`, {
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

/** The agent the admin API created. @typedef {{ agentId: string, apiKey: string }} Agent */

/**
 * A server with an agent and a token of its viewer.
 * @param {Record<string, string>} env the server's
 * @returns {Promise<{ server: import('./support.mjs').ServerHandle, agent: Agent, token: string }>}
 */
async function setUp(env) {
  const server = await startFlightlogServer(lifecycle, { cli: CLI, env, tag: 'server' });
  const admin = {
    authorization: `Bearer ${server.adminToken}`,
    'content-type': 'application/json',
  };
  const created = await request('POST', `${server.base}/admin/v1/agents`, {
    headers: admin,
    body: '{"name":"bench"}',
  });
  const agent = /** @type {Agent} */ (JSON.parse(created.text));
  await request('PUT', `${server.base}/admin/v1/agents/${agent.agentId}/members/bench-viewer`, {
    headers: admin,
    body: '{"role":"viewer"}',
  });
  const { mintDevToken } =
    /** @type {typeof import('../packages/server/dist/auth/dev-token.js')} */ (
      await import(join(ROOT, 'packages/server/dist/auth/dev-token.js'))
    );
  const token = await mintDevToken(server.jwtSecret, 'bench-viewer');
  return { server, agent, token };
}

/**
 * A plain SSE client: the arrival time of each trace message, by trace id.
 * @param {string} base
 * @param {string} agentId
 * @param {string} token
 */
function sseClient(base, agentId, token) {
  /** @type {Map<string, number>} */
  const arrivals = new Map();
  let buffer = '';
  const req = http.get(`${base}/v1/agents/${agentId}/live`, {
    headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
  });
  /** @type {Promise<void>} */
  const ready = new Promise((resolve, reject) => {
    req.on('response', (res) => {
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        buffer += chunk;
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const message = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = message.split('\n').find((line) => line.startsWith('data: '));
          if (!message.includes('event: trace') || !data) continue;
          const at = performance.timeOrigin + performance.now();
          const id = /** @type {{ trace: { id: string } }} */ (JSON.parse(data.slice(6))).trace.id;
          if (!arrivals.has(id)) arrivals.set(id, at);
        }
      });
      resolve();
    });
    req.on('error', reject);
  });
  return { arrivals, ready, close: () => req.destroy() };
}

/**
 * What the functions run in the page use of its globals, which this program's types (Node's, no
 * DOM) do not have. They reach them through `globalThis`, which in the page is `window`.
 * @typedef {{ nodeType: number, matches(selector: string): boolean,
 *   querySelectorAll(selector: string): Iterable<PageElement>,
 *   getAttribute(name: string): string | null }} PageElement
 * @typedef {object} PageGlobals
 * @property {Record<string, number>} __rows when each run's row appeared, by trace id
 *   (performance.timeOrigin + now(), as this process's clock)
 * @property {{ querySelector(selector: string): PageElement | null }} document
 * @property {new (callback: (records: { addedNodes: Iterable<PageElement> }[]) => void) =>
 *   { observe(target: unknown, options: { childList: boolean, subtree: boolean }): void }}
 *   MutationObserver
 * @typedef {typeof globalThis & PageGlobals} PageWindow
 */

/**
 * @typedef {object} LiveFigures
 * @property {number} batches
 * @property {number} shownInBrowser
 * @property {import('./support.mjs').Percentiles} browser ms from 202 to the row in the page
 * @property {import('./support.mjs').Percentiles} plainSse ms from 202 to the SSE message
 */

/**
 * @param {import('playwright-core').Browser} browser
 * @param {string} base
 * @param {Agent} agent
 * @param {string} token
 * @returns {Promise<LiveFigures>}
 */
async function liveFigures(browser, base, agent, token) {
  const page = await (await browser.newContext()).newPage();
  await page.addInitScript(() => {
    /** @type {PageWindow} */ (globalThis).__rows = {};
    new /** @type {PageWindow} */ (globalThis).MutationObserver((records) => {
      const at = performance.timeOrigin + performance.now();
      for (const record of records)
        for (const node of record.addedNodes) {
          if (node.nodeType !== 1) continue;
          // the first row arrives inside the table that replaces the empty state
          const rows = node.matches('tr[data-trace-id]')
            ? [node]
            : node.querySelectorAll('tr[data-trace-id]');
          for (const row of rows) {
            // matched by its data-trace-id
            const id = /** @type {string} */ (row.getAttribute('data-trace-id'));
            if (!(id in /** @type {PageWindow} */ (globalThis).__rows))
              /** @type {PageWindow} */ (globalThis).__rows[id] = at;
          }
        }
    }).observe(/** @type {PageWindow} */ (globalThis).document, { childList: true, subtree: true });
  });
  await page.goto(`${base}/agents/${agent.agentId}#token=${token}`);
  await page.locator('[data-live-state="live"]').waitFor({ timeout: 10_000 });
  const plain = sseClient(base, agent.agentId, token);
  await plain.ready;
  /** @type {Map<string, number>} */
  const acked = new Map();
  // warm-up, not measured: the first rows build the table and compile the page's code paths
  for (let i = 0; i < 10; i++) await post(base, agent.apiKey, oneRunBatch(agent.agentId).body);
  await new Promise((resolve) => setTimeout(resolve, 500));
  for (let i = 0; i < BATCHES; i++) {
    const { id, body } = oneRunBatch(agent.agentId);
    const answer = await post(base, agent.apiKey, body);
    if (answer.status !== 202) throw new Error(`batch ${i}: ${answer.status} ${answer.text}`);
    acked.set(id, performance.timeOrigin + performance.now());
    if (INTERVAL_MS) await new Promise((resolve) => setTimeout(resolve, INTERVAL_MS));
  }
  const deadline = Date.now() + 10_000;
  /** @type {PageGlobals['__rows']} */
  let rows = {};
  while (Date.now() < deadline) {
    rows = await page.evaluate(() => /** @type {PageWindow} */ (globalThis).__rows);
    if (
      [...acked.keys()].every((id) => id in rows) &&
      [...acked.keys()].every((id) => plain.arrivals.has(id))
    )
      break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  plain.close();
  const missing = [...acked.keys()].filter((id) => !(id in rows));
  if (missing.length > 0) {
    const inPage = await page.evaluate(
      (ids) =>
        ids.map(
          (id) =>
            /** @type {PageWindow} */ (globalThis).document.querySelector(
              `tr[data-trace-id="${id}"]`,
            ) !== null,
        ),
      missing,
    );
    console.log(
      `!!! ${missing.length} batches not stamped as new rows; in the page now: ${JSON.stringify(inPage)}; first ids ${[...acked.keys()].slice(0, 2)}; missing ${missing}`,
    );
  }
  // the filters keep the ids that arrived
  const browserMs = [...acked]
    .filter(([id]) => id in rows)
    .map(([id, at]) => /** @type {number} */ (rows[id]) - at);
  const sseMs = [...acked]
    .filter(([id]) => plain.arrivals.has(id))
    .map(([id, at]) => /** @type {number} */ (plain.arrivals.get(id)) - at);
  await page.context().close();
  return {
    batches: BATCHES,
    shownInBrowser: browserMs.length,
    browser: percentiles(browserMs),
    plainSse: percentiles(sseMs),
  };
}

/**
 * A run of 10,000 steps in the page (first steps painted, all loaded) and through the read API;
 * medians over ROUNDS (≥ 1) rounds, in ms.
 * @typedef {{ firstPaintMs: number, allLoadedMs: number, apiReadAllMs: number }} BigRunFigures
 */

/**
 * @param {import('playwright-core').Browser} browser
 * @param {string} base
 * @param {Agent} agent
 * @param {string} token
 * @returns {Promise<BigRunFigures>}
 */
async function bigRunFigures(browser, base, agent, token) {
  const run = makeItem(agent.agentId, 10_000);
  const traceId = run.trace.id;
  for (let from = 0; from < 10_000; from += 1000) {
    const events = run.events.slice(from, from + 1000);
    const answer = await post(base, agent.apiKey, {
      batchId: ulid(),
      items: [{ trace: { ...run.trace, eventCount: from + 1000 }, events }],
    });
    if (answer.status !== 202) throw new Error(`big run: ${answer.status} ${answer.text}`);
  }
  const firstPaint = [];
  const allLoaded = [];
  const apiRead = [];
  for (let round = 0; round < ROUNDS; round++) {
    const started = performance.now();
    /** @type {string | null} */
    let cursor = null;
    let count = 0;
    do {
      const page = await request(
        'GET',
        `${base}/v1/traces/${traceId}?limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        {
          headers: { authorization: `Bearer ${token}` },
        },
      );
      const body = /** @type {{ events: unknown[], nextCursor: string | null }} */ (
        JSON.parse(page.text)
      );
      count += body.events.length;
      cursor = body.nextCursor;
    } while (cursor);
    if (count !== 10_000) throw new Error(`the read API gave ${count} events`);
    apiRead.push(performance.now() - started);

    const context = await browser.newContext();
    const page = await context.newPage();
    const opened = performance.now();
    await page.goto(`${base}/runs/${traceId}#token=${token}`);
    await page.locator('li.step').first().waitFor({ timeout: 10_000 });
    firstPaint.push(performance.now() - opened);
    await page.locator('ol[data-rows="10000"]').waitFor({ timeout: 30_000 });
    allLoaded.push(performance.now() - opened);
    await context.close();
  }
  return {
    firstPaintMs: /** @type {number} */ (median(firstPaint)),
    allLoadedMs: /** @type {number} */ (median(allLoaded)),
    apiReadAllMs: /** @type {number} */ (median(apiRead)),
  };
}

/**
 * The runs list of an agent with RUNS runs: ms per page (median of 20), first and 1,000 runs deep,
 * and the page's SQL run directly.
 * @typedef {{ runs: number, firstPageMs: number, deepPageMs: number, rawSqlMs: number }}
 *   RunsListFigures
 */
/**
 * A page of GET /v1/agents/:id/traces.
 * @typedef {{ traces: unknown[], nextCursor: string | null }} RunsPage
 */

/** @returns {Promise<RunsListFigures | null>} null without PostgreSQL */
async function runsListFigures() {
  if (!(await reachable('127.0.0.1', Number(new URL(DATABASE_URL).port || 5432)))) {
    console.log(`!!! SKIPPING the runs-list figure: no PostgreSQL at ${DATABASE_URL} !!!`);
    return null;
  }
  const schema = `bench_dashboard_${Date.now()}`;
  const db = new pg.Client({ connectionString: DATABASE_URL });
  await db.connect();
  try {
    const { server, agent, token } = await setUp({
      DATABASE_URL,
      DATABASE_SCHEMA: schema,
      ANALYSIS_WORKER: 'off',
    });
    await db.query(`SET search_path TO ${schema}`);
    await db.query(
      `INSERT INTO traces (id, agent_id, status, started_at, input_summary, tags, event_count, total_tokens,
         total_cost_usd, total_lamports, chain_tx_count, tools_called)
       SELECT 'run' || lpad(g::text, 8, '0'), $1, (ARRAY['completed','errored','running'])[1 + g % 3],
         now() - make_interval(secs => g), 'bench run ' || g, ARRAY['bench'], 3, 120, 0.0042, 5000, 1, ARRAY['quote']
       FROM generate_series(1, ${RUNS}) g`,
      [agent.agentId],
    );
    await db.query('ANALYZE traces');
    const get = (/** @type {string} */ query) =>
      request('GET', `${server.base}/v1/agents/${agent.agentId}/traces?${query}`, {
        headers: { authorization: `Bearer ${token}` },
      });
    const first = /** @type {RunsPage} */ (JSON.parse((await get('limit=50')).text));
    if (first.traces.length !== 50) throw new Error('runs list: not 50 runs');
    // RUNS ≥ 1,000: the 20 pages read here each have a next one
    let deep = /** @type {string} */ (first.nextCursor);
    for (let i = 0; i < 19; i++)
      deep = /** @type {string} */ (
        /** @type {RunsPage} */ (
          JSON.parse((await get(`limit=50&cursor=${encodeURIComponent(deep)}`)).text)
        ).nextCursor
      );
    const time = async (/** @type {string} */ query) => {
      const times = [];
      for (let i = 0; i < 20; i++) {
        const started = performance.now();
        const answer = await get(query);
        if (answer.status !== 200) throw new Error(`runs list: ${answer.status}`);
        times.push(performance.now() - started);
      }
      return /** @type {number} */ (median(times)); // of 20
    };
    const raw = async () => {
      const times = [];
      for (let i = 0; i < 20; i++) {
        const started = performance.now();
        await db.query(
          `SELECT * FROM traces WHERE agent_id = $1 ORDER BY started_at DESC, id DESC LIMIT 51`,
          [agent.agentId],
        );
        times.push(performance.now() - started);
      }
      return /** @type {number} */ (median(times));
    };
    const result = {
      runs: RUNS,
      firstPageMs: await time('limit=50'),
      deepPageMs: await time(`limit=50&cursor=${encodeURIComponent(deep)}`),
      rawSqlMs: await raw(),
    };
    await server.stop();
    return result;
  } finally {
    await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
    await db.end();
  }
}

async function main() {
  if (!existsSync(CHROMIUM)) {
    console.log(
      `!!! SKIPPING the dashboard benchmark: no Chromium at ${CHROMIUM} (apt-get install -y chromium) !!!`,
    );
    return;
  }
  const dataDir = mkdtempSync(join(tmpdir(), 'flightlog-bench-dashboard-'));
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  try {
    const { server, agent, token } = await setUp({ DATA_DIR: dataDir, ANALYSIS_WORKER: 'off' });
    const live = await liveFigures(browser, server.base, agent, token);
    const bigRun = await bigRunFigures(browser, server.base, agent, token);
    await server.stop();
    const runsList = await runsListFigures();
    const result = {
      machine: machineInfo(ROOT),
      config: { batches: BATCHES, intervalMs: INTERVAL_MS, rounds: ROUNDS },
      live,
      bigRun,
      runsList,
    };
    writeJsonAtomic(join(ROOT, 'bench/results/dashboard-latest.json'), result);
    const f = (/** @type {number | null | undefined} */ x) =>
      x === null || x === undefined ? 'n/a' : `${x.toFixed(1)} ms`;
    console.log(
      `\n202 → row in the browser (${live.shownInBrowser}/${live.batches} batches): p50 ${f(live.browser.p50)}, p99 ${f(live.browser.p99)} ` +
        `(plain SSE client p50 ${f(live.plainSse.p50)}, p99 ${f(live.plainSse.p99)}; ratio p99 ${/** @type {number} */ (/** @type {number} */ (live.browser.p99) / /** @type {number} */ (live.plainSse.p99)).toFixed(2)}); target p99 < 100 ms`,
    );
    console.log(
      `a run of 10,000 steps: first steps painted ${f(bigRun.firstPaintMs)}, all loaded ${f(bigRun.allLoadedMs)} ` +
        `(read API, all pages, from node: ${f(bigRun.apiReadAllMs)}; ratio ${(bigRun.allLoadedMs / bigRun.apiReadAllMs).toFixed(2)}); target first paint < 1 s`,
    );
    if (runsList)
      console.log(
        `runs list of an agent with ${runsList.runs.toLocaleString()} runs (PostgreSQL): first page ${f(runsList.firstPageMs)}, ` +
          `1,000 runs deep ${f(runsList.deepPageMs)} (its SQL alone ${f(runsList.rawSqlMs)}; ratio ${(runsList.firstPageMs / runsList.rawSqlMs).toFixed(2)}); target < 200 ms`,
      );
  } finally {
    await browser.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().then(
  async () => {
    await lifecycle.runCleanups();
    process.exit(0);
  },
  async (error) => {
    console.error(error);
    await lifecycle.runCleanups();
    process.exit(1);
  },
);
