// Runs-list benchmark: how long the store takes to answer a page of an agent's runs, filtered
// (tag, time range, text search) or not, and the agent's stats, on an agent with 100,000 runs.
//
// On PostgreSQL (BENCH_DATABASE_URL; a fresh DATABASE_SCHEMA, dropped afterwards; the benchmark
// stops loudly when PostgreSQL is unreachable), or on in-memory PGlite with BENCH_ENGINE=pglite,
// it opens the built store (migrations applied), inserts BENCH_RUNS (100,000) runs of one agent
// and as many again spread over 10 other agents (so the GIN indexes hold other agents' rows too),
// each with one generate_series INSERT, then ANALYZE. The runs span about 30 days; 5 % errored,
// 1 % timed out; tags `prod`/`dev` (half each), `canary` on 1 run in 200, `region-0..3`; input
// summaries like "Swap 412 SOL for USDC via orca order <md5>", error messages from three kinds;
// the oldest 2 % of the agent's runs also carry the tag `legacy` and the words "legacy gateway".
//
// Each query is run through the store exactly as the server runs it (TraceStore.listTraces,
// StatsStore.agentStats): BENCH_REPEAT (7) times after one warm-up, median and max of the wall
// time in this process (round trips included), then once more recording the statements the store
// sent (one a page), each run as EXPLAIN (ANALYZE, BUFFERS): the server's execution and planning
// time, summed, and each plan's top nodes. A search page reads at most SCAN_ROWS runs: one that
// stops there before it is full is marked "(partial)"; "walk to the end" follows its cursors.
// Target: under 200 ms of server time per page. It is a benchmark, not a test: nothing is
// asserted. Figures are printed and written to bench/results/runs-list-latest.json.
//
// Env: BENCH_ENGINE (postgres | pglite), BENCH_RUNS (100000), BENCH_REPEAT (7),
//      BENCH_DATABASE_URL (postgres://postgres@127.0.0.1:5432/test)

import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { mkdirSync, writeFileSync } from 'node:fs';
import pg from 'pg';
import { openStore } from '../packages/server/dist/store/open-store.js';
import { TraceStore } from '../packages/server/dist/store/trace-store.js';
import { StatsStore } from '../packages/server/dist/store/stats-store.js';

const ENGINE = process.env.BENCH_ENGINE ?? 'postgres';
const RUNS = Number(process.env.BENCH_RUNS ?? 100_000);
const REPEAT = Number(process.env.BENCH_REPEAT ?? 7);
const DATABASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const AGENT = 'bench-agent';

/**
 * @typedef {import('../packages/server/dist/store/sql-client.js').SqlClient} SqlClient
 * @typedef {import('../packages/server/dist/store/trace-store.js').TraceFilters} TraceFilters
 */

// (of a non-empty list: BENCH_REPEAT timings)
const median = (/** @type {number[]} */ xs) =>
  /** @type {number} */ ([...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]);

/** Every run's columns from `i` (1..n), for one INSERT … SELECT … FROM generate_series. */
const RUN_COLUMNS = `
  CASE WHEN i % 20 = 0 THEN 'errored' WHEN i % 100 = 1 THEN 'timeout'
       WHEN i <= 20 THEN 'running' ELSE 'completed' END AS status,
  now() - make_interval(secs => i * 26) AS started_at,
  (ARRAY['Swap','Bridge','Quote','Pay','Stake'])[1 + i % 5] || ' ' || (i % 997) ||
    ' SOL for USDC via ' || (ARRAY['jupiter','orca','raydium'])[1 + i % 3] || ' order ' ||
    md5(i::text) AS input_summary,
  'Got ' || (i % 500) || '.17 USDC back, tx ' || substr(md5('o' || i), 1, 16) AS output_summary,
  CASE WHEN i % 20 = 0 THEN (ARRAY['slippage too high','RPC timeout while sending the transfer',
       'insufficient funds for fee'])[1 + (i / 20) % 3] || ' at step ' || (i % 7) END
    AS error_message,
  ARRAY[CASE WHEN i % 2 = 0 THEN 'prod' ELSE 'dev' END, 'region-' || (i % 4)] ||
    CASE WHEN i % 200 = 7 THEN ARRAY['canary'] ELSE ARRAY[]::text[] END AS tags,
  200 + (i * 7919) % 30000 AS duration_ms,
  ((i % 1000) * 0.000013)::numeric AS total_cost_usd,
  ((i % 5000) * 1000 + 5000)::numeric AS total_lamports`;

/**
 * @param {string} idPrefix
 * @param {string} agentSql the agent_id column, as SQL
 * @param {number} n
 */
function insertRuns(idPrefix, agentSql, n) {
  return `
INSERT INTO traces (id, agent_id, status, started_at, ended_at, duration_ms, input_summary,
  output_summary, error_message, tags, event_count, total_tokens, total_cost_usd,
  total_lamports, chain_tx_count, tools_called)
SELECT '${idPrefix}' || lpad(i::text, 7, '0'), ${agentSql}, r.status, r.started_at,
  CASE WHEN r.status = 'running' THEN NULL
       ELSE r.started_at + make_interval(secs => r.duration_ms / 1000.0) END,
  CASE WHEN r.status = 'running' THEN NULL ELSE r.duration_ms END,
  r.input_summary, CASE WHEN r.status = 'completed' THEN r.output_summary END, r.error_message,
  r.tags, 12, 3400, r.total_cost_usd, r.total_lamports, 1, ARRAY['jupiter.quote']
FROM generate_series(1, ${n}) AS i, LATERAL (SELECT ${RUN_COLUMNS}) AS r`;
}

/** @typedef {{ text: string, params: readonly unknown[] }} Statement */

/**
 * A SqlClient that remembers the statements sent, so they can be explained as they ran.
 * @param {SqlClient} sql
 * @returns {{ seen: Statement[], client: SqlClient }}
 */
function recording(sql) {
  /** @type {Statement[]} */
  const seen = [];
  return {
    seen,
    client: {
      engine: sql.engine,
      query(text, params) {
        seen.push({ text, params: params ?? [] });
        return sql.query(text, params);
      },
      transaction: (work) => sql.transaction(work),
      ping: () => sql.ping(),
      close: () => sql.close(),
    },
  };
}

/**
 * One query's figures: timings in ms, the server's summed over the statements it took.
 * @typedef {object} QueryFigures
 * @property {string} name
 * @property {number} rows runs on the page, or runs in the stats
 * @property {string | null} searchedTo where a search page stopped at its bound, before it was full
 * @property {number} pages
 * @property {number} wallMedianMs
 * @property {number} wallMaxMs
 * @property {number} statements
 * @property {number} executionMs
 * @property {number} planningMs
 * @property {string} plan the plans' outlines
 */

/**
 * What bench/results/runs-list-<engine>-latest.json holds.
 * @typedef {object} RunsListResult
 * @property {string} engine
 * @property {number} runs
 * @property {number} repeat
 * @property {QueryFigures[]} queries
 * @property {number} [loadMs] time to insert and analyse the runs
 */

/**
 * What a case answers: a runs page (a walk's pages as one, with `pages`), or an agent's stats.
 * @typedef {object} Answer
 * @property {unknown[]} [traces]
 * @property {string | null} [searchedTo]
 * @property {number} [pages]
 * @property {{ runs: number }} [totals]
 */

/** A decoded runs-list cursor, as listTraces takes it. */
/** @typedef {[startedAt: string, id: string]} Cursor */

/**
 * Of an EXPLAIN (ANALYZE, FORMAT JSON): one statement's plan and times, and a node of the plan.
 * @typedef {{ Plan: PlanNode, 'Execution Time': number, 'Planning Time': number }} Explained
 * @typedef {{ 'Node Type': string, 'Index Name'?: string, Plans?: PlanNode[] }} PlanNode
 */

async function main() {
  const schema = `bench_runs_${randomBytes(4).toString('hex')}`;
  const location = ENGINE === 'pglite' ? {} : { databaseUrl: DATABASE_URL, databaseSchema: schema };
  if (ENGINE !== 'pglite') {
    const probe = new pg.Client({ connectionString: DATABASE_URL, connectionTimeoutMillis: 2000 });
    try {
      await probe.connect();
      await probe.end();
    } catch (error) {
      console.error(
        `!!! PostgreSQL is unreachable at ${DATABASE_URL}: ${
          /** @type {Error} */ (error).message
        } !!!`,
      );
      process.exit(1);
    }
  }
  const store = await openStore({ ...location, poolSize: 2, statementTimeoutMs: 120_000 });
  /** @type {RunsListResult} */
  const results = { engine: ENGINE, runs: RUNS, repeat: REPEAT, queries: [] };
  try {
    const started = performance.now();
    await store.sql.query(
      `INSERT INTO agents (id) SELECT '${AGENT}' UNION ALL
       SELECT 'bench-other-' || k FROM generate_series(0, 9) AS k`,
    );
    await store.sql.query(insertRuns('run-', `'${AGENT}'`, RUNS));
    await store.sql.query(insertRuns('other-', `'bench-other-' || (i % 10)`, RUNS));
    // The planner's blind spot: a tag and a word on 2 % of the runs, all of them the oldest. Read
    // newest first, an ordered scan that expects them spread evenly walks 98 % of the agent first.
    await store.sql.query(
      `UPDATE traces SET tags = tags || ARRAY['legacy'],
         error_message = coalesce(error_message, '') || ' via the legacy gateway'
       WHERE agent_id = '${AGENT}' AND id > 'run-' || lpad('${Math.floor(RUNS * 0.98)}', 7, '0')`,
    );
    await store.sql.query('ANALYZE traces');
    const loadMs = performance.now() - started;
    console.log(
      `${ENGINE}: ${2 * RUNS} runs inserted and analysed in ${(loadMs / 1000).toFixed(1)} s`,
    );
    results.loadMs = Math.round(loadMs);

    const { seen, client } = recording(store.sql);
    const traces = new TraceStore(client);
    const stats = new StatsStore(client);
    // one row: a SELECT without FROM
    const [needle] = /** @type {[{ q: string }]} */ (
      await store.sql.query(`SELECT substr(md5('${Math.floor(RUNS / 2)}'), 5, 10) AS q`)
    );
    const tenDaysAgo = new Date(Date.now() - 10 * 86_400_000);
    const dayAfter = new Date(tenDaysAgo.getTime() + 86_400_000);
    const list = (/** @type {TraceFilters} */ filters) => () =>
      traces.listTraces(AGENT, { limit: 50, ...filters });
    /** Every page of a filtered walk (following nextCursor): its pages and runs, as one answer. */
    const walk = async (/** @type {TraceFilters} */ filters) => {
      const found = [];
      let pages = 0;
      for (let after; ;) {
        const page = await traces.listTraces(AGENT, { limit: 50, ...filters, after });
        pages++;
        found.push(...page.traces);
        if (!page.nextCursor) return { traces: found, pages };
        after = /** @type {Cursor} */ (
          JSON.parse(Buffer.from(page.nextCursor, 'base64url').toString())
        );
      }
    };
    /** @type {Cursor | undefined} */
    let slippageCursor;
    /** @type {[name: string, run: () => Promise<Answer>][]} */
    const cases = [
      ['list, no filter', list({})],
      ['status=errored', list({ status: 'errored' })],
      ['tag=prod (50 %)', list({ tag: 'prod' })],
      ['tag=canary (0.5 %)', list({ tag: 'canary' })],
      ['tag=absent (0)', list({ tag: 'no-such-tag' })],
      ['tag=legacy (2 %, all oldest)', list({ tag: 'legacy' })],
      ['q=usdc (every run)', list({ text: 'usdc' })],
      ['q=legacy gateway (2 %, all oldest)', list({ text: 'legacy gateway' })],
      ['q=slippage (1.7 %)', list({ text: 'slippage' })],
      [`q=${needle.q} (1 run)`, list({ text: needle.q })],
      ['q=zebra (no run)', list({ text: 'zebra' })],
      ['q=so (2 characters)', list({ text: 'so' })],
      // what no index can bound: no trigram at all, and every trigram on every run but the text
      // on none (the rest of the walk is the same, a window further each page)
      ['q=%_%_%_ (no trigram, no run)', list({ text: '%_%_%_' })],
      ['q=usdc usdc (no run)', list({ text: 'usdc usdc' })],
      ['q=%_%_%_, walk to the end', () => walk({ text: '%_%_%_' })],
      ['from/to (one day)', list({ from: tenDaysAgo.toISOString(), to: dayAfter.toISOString() })],
      [
        'tag=prod&q=slippage&from/to (7 days)',
        list({
          tag: 'prod',
          text: 'Slippage',
          from: new Date(Date.now() - 7 * 86_400_000).toISOString(),
        }),
      ],
      [
        'q=slippage, page 2 (cursor)',
        async () => {
          if (!slippageCursor) {
            const first = await traces.listTraces(AGENT, { limit: 50, text: 'slippage' });
            // (slippage runs fill more than one page: there is a next one)
            slippageCursor = /** @type {Cursor} */ (
              JSON.parse(
                Buffer.from(/** @type {string} */ (first.nextCursor), 'base64url').toString(),
              )
            );
          }
          return traces.listTraces(AGENT, { limit: 50, text: 'slippage', after: slippageCursor });
        },
      ],
      ['stats window=24h', () => stats.agentStats(AGENT, '24h')],
      ['stats window=7d', () => stats.agentStats(AGENT, '7d')],
    ];

    for (const [name, run] of cases) {
      let answer = await run(); // warm-up (and the statement to explain)
      const wall = [];
      for (let k = 0; k < REPEAT; k++) {
        const t0 = performance.now();
        answer = await run();
        wall.push(performance.now() - t0);
      }
      // once more, recorded (a walk sends one statement a page)
      seen.length = 0;
      await run();
      /** @type {Explained[]} */
      const plans = [];
      for (const { text, params } of [...seen]) {
        // one row, of one column: the plan, as text or as JSON by engine
        const [row] = /** @type {[Record<string, unknown>]} */ (
          await store.sql.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${text}`, params)
        );
        const explained = Object.values(row)[0];
        plans.push(
          /** @type {[Explained]} */ (
            typeof explained === 'string' ? JSON.parse(explained) : explained
          )[0],
        );
      }
      // (without traces, the answer is an agent's stats)
      const rows = answer.traces
        ? answer.traces.length
        : /** @type {{ runs: number }} */ (answer.totals).runs;
      /** @type {QueryFigures} */
      const figures = {
        name,
        rows,
        // a search page that stopped at its bound (SCAN_ROWS, SCAN_BYTES) before it was full
        searchedTo: answer.searchedTo ?? null,
        pages: answer.pages ?? 1,
        wallMedianMs: +median(wall).toFixed(2),
        wallMaxMs: +Math.max(...wall).toFixed(2),
        statements: plans.length,
        executionMs: +plans.reduce((sum, p) => sum + p['Execution Time'], 0).toFixed(2),
        planningMs: +plans.reduce((sum, p) => sum + p['Planning Time'], 0).toFixed(2),
        plan: plans.map((p) => outline(p.Plan)).join('\n    then: '),
      };
      results.queries.push(figures);
      const partial = figures.searchedTo
        ? ' (partial)'
        : figures.pages > 1
          ? ` (${figures.pages} pages)`
          : '';
      console.log(
        `${name.padEnd(40)} ${String(rows).padStart(6)} rows${partial}  wall median ${figures.wallMedianMs
          .toFixed(1)
          .padStart(7)} ms (max ${figures.wallMaxMs.toFixed(1)})  server ${figures.executionMs
          .toFixed(1)
          .padStart(7)} ms + plan ${figures.planningMs.toFixed(1)} ms` +
          ` (${figures.statements} statement${figures.statements > 1 ? 's' : ''})\n    ${figures.plan}`,
      );
    }
  } finally {
    await store.close();
    if (ENGINE !== 'pglite') {
      const admin = new pg.Client({ connectionString: DATABASE_URL });
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    }
  }
  mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
  writeFileSync(
    new URL(`./results/runs-list-${ENGINE}-latest.json`, import.meta.url),
    `${JSON.stringify(results, null, 2)}\n`,
  );
}

/**
 * The plan's node types, outermost first, with the index each scan used.
 * @param {PlanNode} node
 */
function outline(node) {
  /** @type {string[]} */
  const parts = [];
  const walk = (/** @type {PlanNode} */ n, /** @type {number} */ depth) => {
    if (depth > 5) return;
    parts.push(`${n['Node Type']}${n['Index Name'] ? ` (${n['Index Name']})` : ''}`);
    for (const child of n.Plans ?? []) walk(child, depth + 1);
  };
  walk(node, 0);
  return parts.join(' > ');
}

await main();
