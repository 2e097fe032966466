import { existsSync, readFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite, type Extensions } from '@electric-sql/pglite';
import { migrate } from './migrate.js';
import type { SqlClient, SqlExecutor } from './sql-client.js';

/*
 * Why a template. PGlite makes a new data directory by running initdb in WASM from JavaScript,
 * which takes 3 s on a quiet 2-core machine (7 s on a busy one): most of a first `npm start`.
 * Unpacking a data directory made once at build time, with the migrations already applied,
 * takes under 1 s. The template is built by `npm run build` (scripts/pglite-template.mjs) with
 * the installed PGlite, and used only by that same PGlite version; without it, or for another
 * version, a new data directory is made by initdb as before. Migrations still run on every
 * open, so a template older than the migrations is brought up to date like any database.
 */

/** The gzipped tarball of a fresh, migrated data directory, next to the compiled store. */
export const PGLITE_TEMPLATE_FILE = fileURLToPath(
  new URL('./pglite-template.tar.gz', import.meta.url),
);

function stampFile(templateFile: string): string {
  return `${templateFile}.json`;
}

interface TemplateStamp {
  pgliteVersion: string;
  migrations: string[];
}

function installedPgliteVersion(): string {
  const entry = import.meta.resolve('@electric-sql/pglite');
  const manifest = JSON.parse(readFileSync(new URL('../package.json', entry), 'utf8')) as {
    version: string;
  };
  return manifest.version;
}

/** What `migrate` needs of an engine, on a bare PGlite. */
function migrationClient(db: PGlite): Pick<SqlClient, 'transaction'> {
  return {
    transaction: <T>(work: (tx: SqlExecutor) => Promise<T>) =>
      db.transaction((tx) =>
        work({
          query: async <Row>(sql: string, params?: readonly unknown[]) =>
            (await tx.query<Row>(sql, params as unknown[])).rows,
        }),
      ),
  };
}

/** Builds the template: an in-memory database, migrated, dumped. Returns the migrations applied. */
export async function writePgliteTemplate(
  extensions: Extensions,
  templateFile = PGLITE_TEMPLATE_FILE,
): Promise<string[]> {
  const db = await PGlite.create({ extensions });
  try {
    const migrations = await migrate(migrationClient(db));
    const tarball = await db.dumpDataDir('gzip');
    await writeFile(templateFile, Buffer.from(await tarball.arrayBuffer()));
    const stamp: TemplateStamp = { pgliteVersion: installedPgliteVersion(), migrations };
    await writeFile(stampFile(templateFile), `${JSON.stringify(stamp, null, 2)}\n`);
    return migrations;
  } finally {
    await db.close();
  }
}

/** Whether the template on disk was built by the installed PGlite with these migrations. */
export function pgliteTemplateIsCurrent(
  migrations: readonly string[],
  templateFile = PGLITE_TEMPLATE_FILE,
): boolean {
  const stamp = readStamp(templateFile);
  return (
    stamp !== undefined &&
    existsSync(templateFile) &&
    stamp.migrations.join('\n') === migrations.join('\n')
  );
}

function readStamp(templateFile: string): TemplateStamp | undefined {
  try {
    const stamp = JSON.parse(readFileSync(stampFile(templateFile), 'utf8')) as TemplateStamp;
    return stamp.pgliteVersion === installedPgliteVersion() ? stamp : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The template to start a new data directory from: undefined when `dataDir` holds a database
 * already, or no usable template was built.
 */
export async function pgliteTemplateFor(
  dataDir: string,
  templateFile = PGLITE_TEMPLATE_FILE,
): Promise<Blob | undefined> {
  if (existsSync(join(dataDir, 'PG_VERSION'))) return undefined;
  if (readStamp(templateFile) === undefined) return undefined;
  try {
    return new Blob([await readFile(templateFile)]);
  } catch {
    return undefined;
  }
}
