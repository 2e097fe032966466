import { mkdirSync } from 'node:fs';
import { PGlite, types, type Transaction } from '@electric-sql/pglite';
import { lockDataDir } from './data-dir-lock.js';
import type { SqlClient, SqlExecutor } from './sql-client.js';
import { translateDriverError } from './store-unavailable.js';

/**
 * PGlite already returns numeric as string and parses json the same way as pg. bigint comes back
 * as number, as on pg. Its own timestamptz parser is `new Date(text)`, which reads years before
 * 100 as 19xx/20xx; the session is in UTC, so the text is `YYYY-MM-DD HH:MM:SS[.ffffff]+00`,
 * which read as ISO 8601 is exact for every year.
 */
const PARSERS = {
  [types.INT8]: (value: string) => Number(value),
  [types.TIMESTAMPTZ]: (value: string) => new Date(`${value.replace(' ', 'T').slice(0, -3)}Z`),
};

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
