// One engine end to end: a fresh schema / data directory for the server and the baseline, the
// server and an agent, every mix, then what the server accepted checked against its tables.

import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { reachable, startFlightlogServer } from '../support.mjs';
import { CFG, CLI, ROOT, lifecycle, messageOf, ulid } from './config.mjs';
import { countServerRows, durabilityOf, openBaseline } from './db-baseline.mjs';
import { benchMix } from './mix.mjs';
import { createAgent, scrapeMetrics, startNaiveServer } from './servers.mjs';

/**
 * @typedef {import('../support.mjs').ServerHandle} ServerHandle
 * @typedef {import('../support.mjs').ChildServer} ChildServer
 * @typedef {import('./config.mjs').Engine} Engine
 * @typedef {import('./config.mjs').Thrown} Thrown
 * @typedef {import('./db-baseline.mjs').Baseline} Baseline
 * @typedef {import('./db-baseline.mjs').ServerEnv} ServerEnv
 * @typedef {import('./db-baseline.mjs').StoredRows} StoredRows
 * @typedef {import('./mix.mjs').MixContext} MixContext
 * @typedef {import('./mix.mjs').MixResult} MixResult
 * @typedef {import('./mix.mjs').FailedMix} FailedMix
 * @typedef {import('./servers.mjs').ServerMetrics} ServerMetrics
 */

/**
 * One engine, as written to the results file: every field but `engine` may be missing, as
 * where it was skipped or failed.
 * @typedef {object} EngineResult
 * @property {Engine} engine
 * @property {string} [skipped] why it did not run
 * @property {string} [error] what stopped it
 * @property {Record<string, MixResult | FailedMix>} [mixes] by mix name
 * @property {string[]} [warnings]
 * @property {string[]} [schemas] PostgreSQL: the server's, then the baseline's
 * @property {string} [baselineKind]
 * @property {number[]} [loadAvgBefore]
 * @property {number[]} [loadAvgAfter]
 * @property {number} [serverStartMs]
 * @property {number | null} [serverAcceptedTotal]
 * @property {number | null} [serverDuplicatesTotal]
 * @property {{ code: number | null, signal: NodeJS.Signals | null }} [serverExit]
 * @property {Record<string, number>} [serverLog] its output lines by message
 * @property {string[]} [serverOutputTail]
 * @property {StoredRows} [serverStored]
 * @property {number} [baselineEventsStored]
 */

/** @typedef {EngineResult & Required<Pick<EngineResult, 'mixes' | 'warnings'>>} EngineRun */

/**
 * @param {Engine} engine
 * @param {ChildServer} bare
 * @returns {Promise<EngineResult>}
 */
export async function benchEngine(engine, bare) {
  const mark = lifecycle.mark();
  /** @type {EngineRun} */
  const result = { engine, mixes: {}, warnings: [] };
  const warn = (/** @type {string} */ w) => {
    console.error(`  !!! WARNING ${engine}: ${w}`);
    result.warnings.push(w);
  };
  try {
    const tag = randomBytes(4).toString('hex');
    const serverEnv = await engineDatabase(engine, tag, result);
    if (!serverEnv) return { engine, skipped: /** @type {string} */ (result.skipped) };
    if (CFG.serverPoolSize) serverEnv.DATABASE_POOL_SIZE = String(CFG.serverPoolSize);
    Object.assign(serverEnv, CFG.serverEnv);
    const baseline = await openBaseline(engine, tag);
    lifecycle.onCleanup(() => baseline.close());
    result.baselineKind = baseline.kind;
    const baselineAgentId = `bench-baseline-${ulid()}`;
    await baseline.query('INSERT INTO agents (id, name) VALUES ($1, $2)', [
      baselineAgentId,
      'bench baseline',
    ]);
    const ctx = await startServers(
      { engine, bare, baseline, baselineAgentId, warn },
      serverEnv,
      result,
    );
    await measureMixes(ctx, result);
    await stopAndCheck(ctx, serverEnv, result);
    return result;
  } catch (error) {
    console.error(
      `\n!!! ${engine.toUpperCase()} BENCHMARK FAILED: ${
        /** @type {Thrown} */ (error)?.stack ?? error
      }`,
    );
    return { ...result, error: messageOf(error) };
  } finally {
    await lifecycle.runCleanupsFrom(mark);
  }
}

/**
 * The server's database, dropped or removed afterwards: fresh schemas (the server's, the
 * baseline's) on PostgreSQL, a fresh data directory for PGlite. Undefined, with
 * `result.skipped` set, when PostgreSQL is unreachable.
 * @param {Engine} engine
 * @param {string} tag
 * @param {EngineRun} result
 * @returns {Promise<ServerEnv | undefined>}
 */
async function engineDatabase(engine, tag, result) {
  if (engine !== 'postgres') {
    const dir = mkdtempSync(join(os.tmpdir(), 'flightlog-bench-server-'));
    lifecycle.onCleanup(() => rmSync(dir, { recursive: true, force: true }));
    return {
      DATA_DIR: dir,
      DATA_DIR_DURABILITY: durabilityOf(engine),
      // the engine on a thread of its own rather than the server's event loop
      ...(engine === 'pglite-thread' ? { PGLITE_THREAD: 'worker' } : {}),
    };
  }
  const url = new URL(CFG.databaseUrl);
  const port = Number(url.port || 5432);
  if (!(await reachable(url.hostname, port))) {
    const reason = `PostgreSQL at ${url.hostname}:${port} is unreachable`;
    console.log(`\n${'!'.repeat(78)}\n!!! SKIPPING POSTGRESQL: ${reason}\n${'!'.repeat(78)}`);
    result.skipped = reason;
    return undefined;
  }
  const schemas = [`bench_${tag}`, `bench_${tag}_base`];
  result.schemas = schemas;
  lifecycle.onCleanup(async () => {
    const client = new pg.Client({ connectionString: CFG.databaseUrl });
    await client.connect();
    try {
      for (const s of schemas) await client.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
    } finally {
      await client.end();
    }
  });
  return { DATABASE_URL: CFG.databaseUrl, DATABASE_SCHEMA: schemas[0] };
}

/**
 * The service with an agent of its own, and on PostgreSQL the naive server.
 * @param {Pick<MixContext, 'engine' | 'bare' | 'baseline' | 'baselineAgentId' | 'warn'>} sides
 * @param {ServerEnv} serverEnv
 * @param {EngineRun} result
 * @returns {Promise<MixContext>}
 */
async function startServers(sides, serverEnv, result) {
  const { engine, baselineAgentId } = sides;
  result.loadAvgBefore = os.loadavg().map((x) => Math.round(x * 100) / 100);
  console.log(`\n== ${engine}: starting server (load average ${result.loadAvgBefore.join(' ')})`);
  const t0 = performance.now();
  const server = await startFlightlogServer(lifecycle, { cli: CLI, cwd: ROOT, env: serverEnv });
  result.serverStartMs = Math.round(performance.now() - t0);
  const { agentId, apiKey } = await createAgent(server);
  const naive =
    engine === 'postgres'
      ? await startNaiveServer(/** @type {[string, string]} */ (result.schemas)[1], baselineAgentId)
      : undefined;
  return { ...sides, server, naive, apiKey, agentId };
}

/**
 * Every mix; a failed one is recorded and the next one runs, while the server lives.
 * @param {MixContext} ctx
 * @param {EngineRun} result
 */
async function measureMixes(ctx, result) {
  for (const mix of CFG.mixes) {
    try {
      result.mixes[mix] = await benchMix(ctx, mix);
    } catch (error) {
      console.error(
        `\n!!! ${ctx.engine} ${mix} FAILED: ${/** @type {Thrown} */ (error)?.stack ?? error}`,
      );
      result.mixes[mix] = { mix, error: messageOf(error) };
      if (!ctx.server.alive()) break;
    }
  }
}

/**
 * The server's totals and stop; then what it says it accepted must be in its tables (read once
 * it is stopped), and the baseline's events are counted.
 * @param {MixContext} ctx
 * @param {ServerEnv} serverEnv
 * @param {EngineRun} result
 */
async function stopAndCheck(
  { engine, server, agentId, baseline, baselineAgentId, warn },
  serverEnv,
  result,
) {
  result.loadAvgAfter = os.loadavg().map((x) => Math.round(x * 100) / 100);
  const end = await scrapeMetrics(server.base).catch(() => /** @type {ServerMetrics} */ ({}));
  result.serverAcceptedTotal = end.accepted ?? null;
  result.serverDuplicatesTotal = end.duplicate ?? null;
  const exit = await server.stop();
  result.serverExit = exit;
  result.serverLog = server.output.byMessage;
  if (exit.code !== 0) warn(`server exited with code ${exit.code} signal ${exit.signal}`);
  if (server.output.count > 0) result.serverOutputTail = server.output.lines.slice(-10);
  const stored = await countServerRows(engine, serverEnv, agentId);
  result.serverStored = stored;
  if (end.accepted !== undefined && stored.batches !== end.accepted)
    warn(`server stored ${stored.batches} batches for ${end.accepted} accepted`);
  if (stored.events !== stored.announced)
    warn(`server stored ${stored.events} events of ${stored.announced} accepted`);
  // count(*): always one row
  const [{ n }] = /** @type {[{ n: number }]} */ (
    (
      await baseline.query('SELECT count(*)::int AS n FROM events WHERE agent_id = $1', [
        baselineAgentId,
      ])
    ).rows
  );
  result.baselineEventsStored = n;
}
