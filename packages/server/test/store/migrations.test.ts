import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadMigrations, migrate, splitStatements } from '../../src/store/migrate.js';
import { describeEngines, openTestStore, type TestStore } from '../harness/engines.js';

describeEngines('migrations [%s]', (engine) => {
  let t: TestStore;
  beforeAll(async () => {
    t = await openTestStore(engine);
  });
  afterAll(() => t.dispose());

  it('are numbered files applied in order on open', async () => {
    const files = await loadMigrations();
    expect(files.length).toBeGreaterThan(0);
    expect(files.map((m) => m.version)).toEqual(
      [...files.map((m) => m.version)].sort((a, b) => a - b),
    );
    const applied = await t.store.sql.query<{ version: number }>(
      'SELECT version FROM schema_migrations ORDER BY version',
    );
    expect(applied.map((r) => r.version)).toEqual(files.map((m) => m.version));
  });

  it('create every table the service needs', async () => {
    const rows = await t.store.sql.query<{ name: string }>(
      `SELECT table_name AS name FROM information_schema.tables
       WHERE table_schema = current_schema() ORDER BY table_name`,
    );
    expect(rows.map((r) => r.name)).toEqual(
      expect.arrayContaining([
        'agents',
        'api_keys',
        'verify_tokens',
        'members',
        'traces',
        'events',
        'accepted_batches',
        'analysis_jobs',
      ]),
    );
  });

  it('apply nothing the second time', async () => {
    expect(await migrate(t.store.sql)).toEqual([]);
  });
});

describe('splitStatements', () => {
  it('splits on semicolons outside dollar-quoted bodies and drops comment lines', () => {
    const sql = [
      '-- a comment; with a semicolon',
      'CREATE TABLE a (id int);',
      'CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$',
      'BEGIN',
      '  RETURN 1;',
      'END',
      '$$;',
      'SELECT 1',
    ].join('\n');
    expect(splitStatements(sql)).toEqual([
      'CREATE TABLE a (id int)',
      'CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$\nBEGIN\n  RETURN 1;\nEND\n$$',
      'SELECT 1',
    ]);
  });
});
