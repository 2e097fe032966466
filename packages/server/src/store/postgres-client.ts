import pg from 'pg';
import { FlightlogError } from '../errors/flightlog-error.js';
import { statementName } from './prepared-statements.js';
import type { SqlClient, SqlExecutor } from './sql-client.js';
import { isUnreachable, translateDriverError } from './store-unavailable.js';

export interface PostgresOptions {
  connectionString: string;
  /** Schema to work in (created if missing); tests use one per run. */
  schema?: string;
  poolSize?: number;
  /** How long a request may wait for a connection before the store counts as unreachable. */
  connectTimeoutMs?: number;
  statementTimeoutMs?: number;
}

/** Same normalisation as PGlite: bigint as number. numeric stays a string (exact). */
const INT8_OID = 20;
const typeParsers = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8_OID) return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format);
  },
} as pg.CustomTypesConfig;

/** Deadlocks and serialization failures are retried: see `retrying`. */
const RETRYABLE = new Set(['40P01', '40001']);
const MAX_ATTEMPTS = 3;

function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

function executor(target: pg.Pool | pg.PoolClient): SqlExecutor {
  return {
    async query<Row>(sql: string, params: readonly unknown[] = []): Promise<Row[]> {
      try {
        const name = statementName(sql);
        const result = await target.query(
          name === undefined
            ? { text: sql, values: params as unknown[] }
            : { name, text: sql, values: params as unknown[] },
        );
        return result.rows as Row[];
      } catch (error) {
        return translateDriverError(error);
      }
    },
  };
}

/** A PostgreSQL server reached through a connection pool (`DATABASE_URL`). */
export async function openPostgresClient(options: PostgresOptions): Promise<SqlClient> {
  const schema = options.schema;
  const searchPath = schema ? `-c search_path=${quoteIdent(schema)}` : '';
  const statementTimeoutMs = options.statementTimeoutMs ?? 10_000;
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.poolSize ?? 10,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 2_000,
    statement_timeout: statementTimeoutMs,
    // The database ends a slow statement itself; this deadline is for a database that does not
    // answer at all (a network dropping packets), which would otherwise hold a request forever.
    query_timeout: statementTimeoutMs + 2_000,
    keepAlive: true,
    idle_in_transaction_session_timeout: 30_000,
    options: `-c TimeZone=UTC ${searchPath}`.trim(),
    types: typeParsers,
    application_name: 'flightlog',
  });
  // An idle connection that breaks (database restart) must not crash the process; the next
  // query gets a fresh connection or reports the store unavailable.
  pool.on('error', () => {});
  if (schema) {
    try {
      await pool.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`);
    } catch (error) {
      // IF NOT EXISTS is not safe against a concurrent creator (instances starting together):
      // losing that race means the schema exists, which is all we need.
      const code = (error as { code?: unknown }).code;
      if (code !== '23505' && code !== '42P06') {
        await pool.end();
        return translateDriverError(error);
      }
    }
  }
  const direct = executor(pool);
  let closing: Promise<void> | undefined;

  async function runOnce<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (error) {
      return translateDriverError(error);
    }
    let broken: Error | undefined;
    // A checked-out client that loses its connection emits 'error'; unheard, that would crash
    // the process. The failing query rejects as well, which is where the outage is reported.
    const onError = (error: Error) => {
      broken = error;
    };
    client.on('error', onError);
    try {
      await client.query('BEGIN');
      const result = await work(executor(client));
      await client.query('COMMIT');
      return result;
    } catch (error) {
      if (isUnreachable(error)) broken = error instanceof Error ? error : new Error(String(error));
      // A connection that is gone or silent is discarded, which rolls back on the database's
      // side; waiting for a ROLLBACK on it would only hold the request longer.
      if (!broken)
        await client.query('ROLLBACK').catch((rollbackError: unknown) => {
          broken = rollbackError instanceof Error ? rollbackError : new Error('rollback failed');
        });
      return translateDriverError(error);
    } finally {
      client.off('error', onError);
      // A connection that failed mid-transaction is discarded rather than reused.
      client.release(broken);
    }
  }

  /**
   * Runs a statement, or a transaction, again when PostgreSQL aborted it for a deadlock or a
   * serialization failure: nothing of it was kept, so running it again is safe.
   */
  async function retrying<T>(run: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await run();
      } catch (error) {
        const code = (error as { code?: unknown }).code;
        if (typeof code !== 'string' || !RETRYABLE.has(code)) throw error;
        if (attempt < MAX_ATTEMPTS) continue;
        // Still contended after the last attempt: the client's retry (same batchId) is safe.
        throw new FlightlogError('store-unavailable', 'The trace store is busy; retry later.', {
          retryAfterSeconds: 1,
          cause: error,
        });
      }
    }
  }

  return {
    engine: 'postgres',
    // One statement outside a transaction is atomic on its own (the batch statement is one).
    query: (sql, params) => retrying(() => direct.query(sql, params)),
    transaction: (work) => retrying(() => runOnce(work)),
    async ping() {
      await direct.query('SELECT 1');
    },
    close() {
      closing ??= pool.end();
      return closing;
    },
  };
}
