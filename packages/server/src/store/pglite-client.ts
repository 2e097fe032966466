import { mkdirSync } from 'node:fs';
import { PGlite, types, type Transaction } from '@electric-sql/pglite';
import { lockDataDir } from './data-dir-lock.js';
import type { SqlClient, SqlExecutor } from './sql-client.js';
import { translateDriverError } from './store-unavailable.js';

/** PGlite already returns bigint as number and numeric as string; json is parsed the same way. */
const PARSERS = { [types.INT8]: (value: string) => Number(value) };

function executor(target: PGlite | Transaction): SqlExecutor {
  return {
    async query<Row>(sql: string, params: readonly unknown[] = []): Promise<Row[]> {
      try {
        const result = await target.query<Row>(sql, params as unknown[]);
        return result.rows;
      } catch (error) {
        return translateDriverError(error);
      }
    },
  };
}

/**
 * The embedded engine: PostgreSQL compiled to WASM, in this process. `dataDir` undefined means
 * in memory (tests). One process may open a data directory at a time.
 */
export async function openPgliteClient(dataDir: string | undefined): Promise<SqlClient> {
  let unlock = () => {};
  if (dataDir !== undefined) {
    mkdirSync(dataDir, { recursive: true });
    unlock = lockDataDir(dataDir);
  }
  let db: PGlite;
  try {
    db = await PGlite.create(dataDir, { parsers: PARSERS });
    await db.exec(`SET TIME ZONE 'UTC'`);
  } catch (error) {
    unlock();
    throw error;
  }
  const direct = executor(db);
  let closing: Promise<void> | undefined;
  return {
    engine: 'pglite',
    query: direct.query,
    async transaction(work) {
      try {
        return await db.transaction((tx) => work(executor(tx)));
      } catch (error) {
        return translateDriverError(error);
      }
    },
    async ping() {
      await direct.query('SELECT 1');
    },
    close() {
      closing ??= (db.closed ? Promise.resolve() : db.close()).finally(unlock);
      return closing;
    },
  };
}
