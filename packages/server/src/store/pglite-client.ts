import { mkdirSync } from 'node:fs';
import {
  PGlite,
  parse as pgliteResults,
  protocol,
  types,
  type Transaction,
} from '@electric-sql/pglite';
import { pg_trgm } from '@electric-sql/pglite/contrib/pg_trgm';
import { lockDataDir } from './data-dir-lock.js';
import {
  PGLITE_START_PARAMS,
  openPgliteDataDir,
  type DataDirDurability,
} from './pglite-durability.js';
import { pgliteTemplateFor } from './pglite-template.js';
import { statementName } from './prepared-statements.js';
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

/**
 * Extensions the migrations may create: pg_trgm indexes the runs list's text search (migration
 * 005). Loaded on every open, since an index built on it needs it whenever the table is used.
 */
export const PGLITE_EXTENSIONS = { pg_trgm };

const { serialize } = protocol;

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, part) => n + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

/**
 * Prepared statements on the embedded engine, as node-postgres has them on PostgreSQL (see
 * prepared-statements.ts). PGlite's own `query` parses, plans and describes every statement
 * anew, in five calls into the engine; a statement prepared here is parsed once, and each run
 * is one call (bind, describe, execute, sync). Parameters are serialised and rows parsed by
 * PGlite's own serializers and parsers, exactly as its `query` does.
 */
class PreparedStatements {
  /** Parameter type OIDs of each statement prepared on this instance, by name. */
  private readonly prepared = new Map<string, number[]>();

  constructor(private readonly db: PGlite) {}

  /**
   * Runs `sql` as a prepared statement. The caller holds the engine exclusively (no other
   * query or transaction of this client can interleave) and says whether a transaction of
   * this client is open (PGlite's `syncToFs`, a no-op on a data directory on disk or in
   * memory, then runs at its commit, not now; durability is the engine's, pglite-durability.ts).
   */
  async run<Row>(
    name: string,
    sql: string,
    params: readonly unknown[],
    inTransaction: boolean,
  ): Promise<Row[]> {
    if (this.db.closed) throw new Error('PGlite is closed');
    const syncToFs = !inTransaction;
    let paramTypes = this.prepared.get(name);
    if (paramTypes === undefined) {
      const { messages } = await this.db.execProtocol(
        concat([
          serialize.parse({ name, text: sql }),
          serialize.describe({ type: 'S', name }),
          serialize.sync(),
        ]),
        { syncToFs: false },
      );
      const description = messages.find((m) => m.name === 'parameterDescription') as
        { dataTypeIDs: number[] } | undefined;
      paramTypes = description?.dataTypeIDs ?? [];
      this.prepared.set(name, paramTypes);
    }
    const oids = paramTypes;
    const values = params.map((value, i) => {
      if (value === null || value === undefined) return null;
      const serializer = this.db.serializers[oids[i] as number];
      return serializer ? serializer(value) : String(value);
    });
    const { messages } = await this.db.execProtocol(
      concat([
        serialize.bind({ statement: name, values }),
        serialize.describe({ type: 'P' }),
        serialize.execute({}),
        serialize.sync(),
      ]),
      { syncToFs },
    );
    const [result] = pgliteResults.parseResults(messages, this.db.parsers);
    return (result?.rows ?? []) as Row[];
  }
}

/**
 * The embedded engine: PostgreSQL compiled to WASM, in this thread. `dataDir` undefined means
 * in memory (tests). One process may open a data directory at a time. A commit is as durable
 * as `durability` says (pglite-durability.ts) by the time the call that made it resolves.
 * (`PGLITE_THREAD=worker` runs it on a thread of its own instead: pglite-thread-client.ts.)
 */
export async function openPgliteClient(
  dataDir: string | undefined,
  durability: DataDirDurability = 'power-loss',
): Promise<SqlClient> {
  const unlock = await lockPgliteDataDir(dataDir);
  try {
    const client = await openPgliteEngine(dataDir, durability, translateDriverError);
    let closing: Promise<void> | undefined;
    return {
      ...client,
      close() {
        closing ??= client.close().finally(unlock);
        return closing;
      },
    };
  } catch (error) {
    await unlock();
    throw error;
  }
}

/** Locks `dataDir` for this process (nothing to lock in memory); resolves to its release. */
export async function lockPgliteDataDir(dataDir: string | undefined): Promise<() => Promise<void>> {
  if (dataDir === undefined) return () => Promise.resolve();
  mkdirSync(dataDir, { recursive: true });
  const lock = await lockDataDir(dataDir);
  return () => lock.release();
}

/**
 * The engine alone, on a data directory its caller has locked. `translate` turns a driver's
 * error into the store's (translateDriverError); the engine's thread passes them on as they are,
 * for the thread that called to translate.
 */
export async function openPgliteEngine(
  dataDir: string | undefined,
  durability: DataDirDurability,
  translate: (error: unknown) => never,
): Promise<SqlClient> {
  const db =
    dataDir === undefined
      ? await PGlite.create({
          parsers: PARSERS,
          extensions: PGLITE_EXTENSIONS,
          startParams: [...PGLITE_START_PARAMS],
        })
      : await openPgliteDataDir(dataDir, durability, {
          parsers: PARSERS,
          extensions: PGLITE_EXTENSIONS,
          loadDataDir: await pgliteTemplateFor(dataDir),
        });
  try {
    await db.exec(`SET TIME ZONE 'UTC'`);
  } catch (error) {
    await db.close();
    throw error;
  }
  const engine = db;
  const prepared = new PreparedStatements(engine);

  // PGlite keeps one session. Its `query` and `transaction` take its transaction lock; a
  // prepared statement runs through `execProtocol`, which takes only its query lock, so this
  // client orders its own work: a transaction holds `turn` until it ends, and a statement
  // outside a transaction waits for its turn (as PGlite's `query` would).
  let turn: Promise<unknown> = Promise.resolve();
  function inTurn<T>(work: () => Promise<T>): Promise<T> {
    const run = turn.then(work, work);
    turn = run.catch(() => {});
    return run;
  }

  function executor(target: PGlite | Transaction, inTransaction: boolean): SqlExecutor {
    return {
      async query<Row>(sql: string, params: readonly unknown[] = []): Promise<Row[]> {
        try {
          const name = statementName(sql);
          if (name === undefined) return (await target.query<Row>(sql, params as unknown[])).rows;
          return await engine.runExclusive(() =>
            prepared.run<Row>(name, sql, params, inTransaction),
          );
        } catch (error) {
          return translate(error);
        }
      },
    };
  }

  const direct = executor(engine, false);
  let closing: Promise<void> | undefined;
  return {
    engine: 'pglite',
    query: (sql, params) => inTurn(() => direct.query(sql, params)),
    transaction(work) {
      return inTurn(async () => {
        try {
          return await engine.transaction((tx) => work(executor(tx, true)));
        } catch (error) {
          return translate(error);
        }
      });
    },
    async ping() {
      await inTurn(() => direct.query('SELECT 1'));
    },
    close() {
      closing ??= engine.closed ? Promise.resolve() : engine.close();
      return closing;
    },
  };
}
