import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FlightlogError } from '../../src/errors/flightlog-error.js';
import { openPostgresClient } from '../../src/store/postgres-client.js';
import {
  describeEngines,
  describeWithPostgres,
  openTestStore,
  type EngineName,
  type TestStore,
} from '../harness/engines.js';
import type { StoreOptions } from '../../src/store/open-store.js';

// One contract, both engines (PGlite on the event loop, the default, and on its own thread):
// whatever the store layer relies on behaves the same.
describeEngines('SqlClient contract [%s]', (engine) => contract(engine, {}));
describe('SqlClient contract [pglite on a thread of its own]', () =>
  contract('pglite', { pgliteThread: 'worker' }));

function contract(engine: EngineName, options: Partial<StoreOptions>): void {
  let t: TestStore;
  beforeAll(async () => {
    t = await openTestStore(engine, options);
    await t.store.sql.query(
      'CREATE TABLE contract_probe (id text PRIMARY KEY, n numeric, c bigint)',
    );
  });
  afterAll(() => t.dispose());

  it('reports its engine', () => {
    expect(t.store.engine).toBe(engine);
  });

  it('returns bigint as number, numeric as the exact decimal string, timestamptz as Date', async () => {
    const [row] = await t.store.sql.query<{ b: unknown; n: unknown; d: unknown; t: unknown }>(
      `SELECT 42::bigint AS b, '18446744073709551617.000100'::numeric AS n, 0.10::numeric AS d,
              '2026-01-02T03:04:05.678Z'::timestamptz AS t`,
    );
    expect(row?.b).toBe(42);
    expect(row?.n).toBe('18446744073709551617.000100');
    expect(row?.d).toBe('0.10');
    expect(row?.t).toBeInstanceOf(Date);
    expect((row?.t as Date).toISOString()).toBe('2026-01-02T03:04:05.678Z');
  });

  it('reads timestamps of every year from 0001 to 9999 back exactly', async () => {
    const values = [
      '0001-01-01T00:00:00.000Z',
      '0049-06-15T08:00:00.123Z',
      '9999-12-31T23:59:59.999Z',
    ];
    const [row] = await t.store.sql.query<{ a: Date; b: Date; c: Date }>(
      'SELECT $1::timestamptz AS a, $2::timestamptz AS b, $3::timestamptz AS c',
      values,
    );
    expect([row?.a, row?.b, row?.c].map((d) => d?.toISOString())).toEqual(values);
  });

  it('passes text arrays and json in both directions', async () => {
    const [row] = await t.store.sql.query<{ a: string[]; j: unknown }>(
      'SELECT $1::text[] AS a, $2::json AS j',
      [['x', 'y "z"', null], JSON.stringify({ k: ['\u0000', 1] })],
    );
    expect(row?.a).toEqual(['x', 'y "z"', null]);
    expect(row?.j).toEqual({ k: ['\u0000', 1] });
  });

  it('commits a transaction that resolves', async () => {
    await t.store.sql.transaction(async (tx) => {
      await tx.query("INSERT INTO contract_probe (id, n, c) VALUES ('kept', 1, 1)");
    });
    const rows = await t.store.sql.query("SELECT id FROM contract_probe WHERE id = 'kept'");
    expect(rows).toHaveLength(1);
  });

  it('rolls back everything of a transaction that throws, and rethrows', async () => {
    const failure = new Error('abort');
    await expect(
      t.store.sql.transaction(async (tx) => {
        await tx.query("INSERT INTO contract_probe (id, n, c) VALUES ('dropped', 1, 1)");
        throw failure;
      }),
    ).rejects.toBe(failure);
    const rows = await t.store.sql.query("SELECT id FROM contract_probe WHERE id = 'dropped'");
    expect(rows).toHaveLength(0);
  });

  it('keeps concurrent transactions apart', async () => {
    await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        t.store.sql.transaction(async (tx) => {
          await tx.query('INSERT INTO contract_probe (id, n, c) VALUES ($1, $2, $3)', [
            `c${i}`,
            i,
            i,
          ]);
        }),
      ),
    );
    const [row] = await t.store.sql.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM contract_probe WHERE id LIKE 'c%'",
    );
    expect(row?.n).toBe(8);
  });

  it('gives a constraint violation back with its SQLSTATE and constraint, in a transaction too', async () => {
    await t.store.sql.query("INSERT INTO contract_probe (id, n, c) VALUES ('once', 1, 1)");
    const insertAgain = "INSERT INTO contract_probe (id, n, c) VALUES ('once', 2, 2)";
    const expected = { code: '23505', constraint: 'contract_probe_pkey' };
    await expect(t.store.sql.query(insertAgain)).rejects.toMatchObject(expected);
    await expect(
      t.store.sql.transaction(async (tx) => {
        await tx.query("INSERT INTO contract_probe (id, n, c) VALUES ('with-it', 1, 1)");
        await tx.query(insertAgain);
      }),
    ).rejects.toMatchObject(expected);
    const rows = await t.store.sql.query("SELECT id FROM contract_probe WHERE id = 'with-it'");
    expect(rows).toHaveLength(0);
  });

  it('answers ping, and closing twice is harmless; once closed it is unavailable', async () => {
    const other = await openTestStore(engine, options);
    await expect(other.store.ping()).resolves.toBeUndefined();
    await other.store.close();
    await expect(other.store.sql.query('SELECT 1')).rejects.toMatchObject({
      code: 'store-unavailable',
    });
    await expect(other.dispose()).resolves.toBeUndefined();
  });
}

describeWithPostgres('PostgreSQL transactions under contention [postgres]', () => {
  let t: TestStore;
  beforeAll(async () => {
    t = await openTestStore('postgres');
  });
  afterAll(() => t.dispose());

  it('retries a deadlocked transaction, then reports the store busy (a coded 503)', async () => {
    let attempts = 0;
    await expect(
      t.store.sql.transaction(async (tx) => {
        attempts++;
        await tx.query(`DO $$ BEGIN RAISE EXCEPTION 'deadlock' USING ERRCODE = '40P01'; END $$`);
      }),
    ).rejects.toSatisfy((e) => e instanceof FlightlogError && e.code === 'store-unavailable');
    expect(attempts).toBe(3);
  });
});

describe('PostgreSQL that cannot be reached', () => {
  it('reports the store unavailable (a coded 503), not a crash', async () => {
    // Port 1 on loopback: nothing listens there, so the connection is refused at once.
    await expect(
      openPostgresClient({ connectionString: 'postgres://postgres@127.0.0.1:1/test', schema: 'x' }),
    ).rejects.toSatisfy((e) => e instanceof FlightlogError && e.code === 'store-unavailable');
  });
});
