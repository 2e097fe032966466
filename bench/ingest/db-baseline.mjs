// Database baselines (b) and (c): one statement, one round trip per batch, on the real schema;
// and what the server's own tables hold once it has stopped.

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { PGlite } from '@electric-sql/pglite';
import { WRITE_BATCH, checkWritten, writeBatchParams } from '../batch-statement.mjs';
import { percentiles } from '../support.mjs';
import { CFG, lifecycle } from './config.mjs';
import { runPacedSends } from './http-load.mjs';

/**
 * @typedef {import('../batch-statement.mjs').Batch} Batch
 * @typedef {import('../batch-statement.mjs').WrittenCounts} WrittenCounts
 * @typedef {import('@flightlog/server').DataDirDurability} DataDirDurability
 * @typedef {import('./config.mjs').Engine} Engine
 * @typedef {import('./config.mjs').Thrown} Thrown
 * @typedef {import('./http-load.mjs').Run} Run
 */

/**
 * A database baseline, (b) or (c): `write` is the one statement for a batch, `query` any SQL on
 * the same database.
 * @typedef {object} Baseline
 * @property {string} kind
 * @property {(agentId: string, batch: Batch) => Promise<void>} write
 * @property {(sql: string, params: unknown[]) => Promise<{ rows: unknown[] }>} query
 * @property {() => Promise<void> | undefined} close
 */

/**
 * @param {string} schema
 * @returns {Promise<Baseline>}
 */
async function openPostgresBaseline(schema) {
  const pool = new pg.Pool({
    connectionString: CFG.databaseUrl,
    max: CFG.dbConnections,
    options: `-c TimeZone=UTC -c search_path="${schema}"`,
    application_name: 'flightlog-bench-baseline',
  });
  pool.on('error', () => {});
  return {
    kind: `one statement per batch (data-modifying CTEs), pg.Pool of ${CFG.dbConnections}`,
    async write(agentId, batch) {
      const { rows } = await pool.query({
        name: 'flightlog-bench-write-batch',
        text: WRITE_BATCH,
        values: writeBatchParams(agentId, batch),
      });
      checkWritten(rows, batch);
    },
    query: (sql, params) => pool.query(sql, params),
    close: () => pool.end(),
  };
}

/** The DATA_DIR_DURABILITY an engine of this benchmark runs PGlite with. */
export const durabilityOf = (/** @type {Engine} */ engine) =>
  engine === 'pglite-process-crash' ? 'process-crash' : 'power-loss';

/**
 * @param {string} dataDir
 * @param {DataDirDurability} durability
 * @returns {Promise<Baseline>}
 */
async function openPgliteBaseline(dataDir, durability) {
  const { openPgliteDataDir, PGLITE_EXTENSIONS } = await import('@flightlog/server');
  // the server's extensions: its migrations index text with pg_trgm
  const db = await openPgliteDataDir(dataDir, durability, { extensions: PGLITE_EXTENSIONS });
  await db.exec(`SET TIME ZONE 'UTC'`);
  return {
    kind: `one statement per batch (data-modifying CTEs), in-process PGlite (${durability})`,
    async write(agentId, batch) {
      const { rows } = await db.query(WRITE_BATCH, writeBatchParams(agentId, batch));
      checkWritten(/** @type {WrittenCounts[]} */ (rows), batch);
    },
    query: (sql, params) => db.query(sql, params),
    close: () => (db.closed ? undefined : db.close()),
  };
}

/** @typedef {Run & { itemsBuiltDuringRun: number }} DbRun */

/**
 * BENCH_SECONDS of `dbConnections` concurrent writers, each one batch at a time.
 * @param {Baseline} baseline
 * @param {string} agentId
 * @param {import('../ingest-bodies.mjs').OneShotPool<Batch>} items
 * @param {number} seconds
 * @returns {Promise<DbRun>}
 */
export async function runDbBaseline(baseline, agentId, items, seconds) {
  /** @type {number[]} */
  const latencies = [];
  let ok = 0;
  let events = 0;
  let errors = 0;
  /** @type {unknown} */
  let firstError;
  const start = performance.now();
  const deadline = start + seconds * 1000;
  const writer = async () => {
    while (performance.now() < deadline) {
      const batch = items.next();
      const t0 = performance.now();
      try {
        await baseline.write(agentId, batch);
        const t1 = performance.now();
        if (t1 <= deadline) {
          ok++;
          events += batch.item.events.length;
          latencies.push(t1 - t0);
        }
      } catch (error) {
        errors++;
        firstError ??= error;
      }
    }
  };
  await Promise.all(Array.from({ length: CFG.dbConnections }, writer));
  if (firstError)
    console.error(
      `!!! BASELINE WRITE FAILED (${errors}x): ${/** @type {Thrown} */ (firstError)?.message}`,
    );
  const stats = percentiles(latencies);
  return {
    batchesPerSec: ok / seconds,
    eventsPerSec: events / seconds,
    p50Ms: stats.p50,
    p99Ms: stats.p99,
    maxMs: stats.max,
    ok,
    errors,
    itemsBuiltDuringRun: items.madeDuringRun,
  };
}

/**
 * The same write, paced as the service's half-rate run is (runPacedSends): what the database
 * alone gives at that rate on this machine, its commits and its disk included.
 * @param {Baseline} baseline
 * @param {string} agentId
 * @param {import('../ingest-bodies.mjs').OneShotPool<Batch>} items
 * @param {number} seconds
 * @param {{ rate: number, eventsPerBatch: number }} load
 * @returns {Promise<import('./http-load.mjs').PacedRun>}
 */
export function runPacedDbBaseline(baseline, agentId, items, seconds, load) {
  return runPacedSends(seconds, load, () =>
    baseline.write(agentId, items.next()).then(
      () => ({ status: 200, tReply: performance.now() }),
      (error) => ({ status: 0, error, tReply: performance.now() }),
    ),
  );
}

/** Batches, their announced events and the stored events of `agentId` (server's tables). */
const STORED_SQL = `SELECT
  (SELECT count(*) FROM accepted_batches WHERE agent_id = $1)::int AS batches,
  (SELECT coalesce(sum(event_count), 0) FROM accepted_batches WHERE agent_id = $1)::int AS announced,
  (SELECT count(*) FROM events WHERE agent_id = $1)::int AS events`;

/** @typedef {{ batches: number, announced: number, events: number }} StoredRows */

/**
 * @param {Engine} engine
 * @param {ServerEnv} serverEnv
 * @param {string} agentId
 * @returns {Promise<StoredRows>}
 */
export async function countServerRows(engine, serverEnv, agentId) {
  if (engine === 'postgres') {
    const client = new pg.Client({
      connectionString: CFG.databaseUrl,
      options: `-c search_path="${serverEnv.DATABASE_SCHEMA}"`,
    });
    await client.connect();
    try {
      return /** @type {StoredRows} */ ((await client.query(STORED_SQL, [agentId])).rows[0]);
    } finally {
      await client.end();
    }
  }
  const db = await PGlite.create(serverEnv.DATA_DIR);
  try {
    // aggregates: always one row
    return /** @type {StoredRows} */ ((await db.query(STORED_SQL, [agentId])).rows[0]);
  } finally {
    await db.close();
  }
}

/**
 * The real schema for the baseline: the server's migrations, through openStore.
 * @param {Engine} engine
 * @param {string} tag
 * @returns {Promise<Baseline>}
 */
export async function openBaseline(engine, tag) {
  const { openStore } = await import('@flightlog/server');
  if (engine === 'postgres') {
    const schema = `bench_${tag}_base`;
    const store = await openStore({
      databaseUrl: CFG.databaseUrl,
      databaseSchema: schema,
      poolSize: 1,
    });
    await store.close();
    return openPostgresBaseline(schema);
  }
  const dir = mkdtempSync(join(os.tmpdir(), 'flightlog-bench-base-'));
  lifecycle.onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  const store = await openStore({ dataDir: dir, dataDirDurability: durabilityOf(engine) });
  await store.close();
  return openPgliteBaseline(dir, durabilityOf(engine));
}

/**
 * The server's environment: where its database is, and BENCH_SERVER_ENV.
 * @typedef {Record<string, string | undefined>} ServerEnv
 */
