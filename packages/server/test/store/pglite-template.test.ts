import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadMigrations } from '../../src/store/migrate.js';
import { PGLITE_EXTENSIONS } from '../../src/store/pglite-client.js';
import {
  pgliteTemplateFor,
  pgliteTemplateIsCurrent,
  writePgliteTemplate,
} from '../../src/store/pglite-template.js';

/*
 * A new data directory starts from the template `npm run build` makes (initdb in WASM is most
 * of a first start): it must hold exactly what initdb and the migrations would have made, and
 * never replace a database that exists or come from another PGlite. That the built CLI starts
 * from it is seen in cli/cli.test.ts (a first `migrate` has nothing left to apply).
 */
describe('the embedded engine’s template data directory', () => {
  const root = mkdtempSync(join(tmpdir(), 'flightlog-template-'));
  const template = join(root, 'template.tar.gz');
  let migrations: string[];

  beforeAll(async () => {
    migrations = (await loadMigrations()).map((migration) => migration.name);
    expect(await writePgliteTemplate(PGLITE_EXTENSIONS, template)).toEqual(migrations);
  }, 60_000);
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('is current for these migrations, and not for a set with one more', () => {
    expect(pgliteTemplateIsCurrent(migrations, template)).toBe(true);
    expect(pgliteTemplateIsCurrent([...migrations, '999_later'], template)).toBe(false);
  });

  it('gives a new data directory every migration and the text-search extension', async () => {
    const dataDir = join(root, 'new');
    const loadDataDir = await pgliteTemplateFor(dataDir, template);
    expect(loadDataDir).toBeInstanceOf(Blob);
    const db = await PGlite.create({ dataDir, loadDataDir, extensions: PGLITE_EXTENSIONS });
    try {
      const applied = await db.query<{ name: string }>(
        'SELECT name FROM schema_migrations ORDER BY version',
      );
      expect(applied.rows.map((row) => row.name)).toEqual(migrations);
      const trigram = await db.query<{ similar: boolean }>(
        `SELECT 'flightlog' % 'flightlg' AS similar`,
      );
      expect(trigram.rows[0]?.similar).toBe(true);
      await db.query(`INSERT INTO agents (id, name) VALUES ('from-template', 'kept')`);
    } finally {
      await db.close();
    }
    // opened again, it is a database of its own: the template is not applied over it
    expect(await pgliteTemplateFor(dataDir, template)).toBeUndefined();
    const again = await PGlite.create({ dataDir, extensions: PGLITE_EXTENSIONS });
    try {
      const kept = await again.query(`SELECT name FROM agents WHERE id = 'from-template'`);
      expect(kept.rows).toEqual([{ name: 'kept' }]);
    } finally {
      await again.close();
    }
  }, 60_000);

  it('is not used when another PGlite version made it, or when it is missing', async () => {
    const stamp = JSON.parse(readFileSync(`${template}.json`, 'utf8')) as object;
    const other = join(root, 'other.tar.gz');
    writeFileSync(other, readFileSync(template));
    writeFileSync(`${other}.json`, JSON.stringify({ ...stamp, pgliteVersion: '0.0.1' }));
    expect(await pgliteTemplateFor(join(root, 'fresh-a'), other)).toBeUndefined();
    expect(pgliteTemplateIsCurrent(migrations, other)).toBe(false);
    expect(
      await pgliteTemplateFor(join(root, 'fresh-b'), join(root, 'none.tar.gz')),
    ).toBeUndefined();
  });
});
