import { readdir, readFile } from 'node:fs/promises';
import type { SqlClient } from './sql-client.js';

const MIGRATIONS_DIR = new URL('./migrations/', import.meta.url);
/** Any fixed number: serialises concurrent migrators (several instances starting at once). */
const MIGRATION_LOCK_KEY = 727_001;

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** Numbered files `NNN_name.sql` in store/migrations, in order. */
export async function loadMigrations(): Promise<Migration[]> {
  const files = (await readdir(MIGRATIONS_DIR)).filter((f) => /^\d+_.+\.sql$/.test(f)).sort();
  return Promise.all(
    files.map(async (file) => ({
      version: Number.parseInt(file, 10),
      name: file.replace(/\.sql$/, ''),
      sql: await readFile(new URL(file, MIGRATIONS_DIR), 'utf8'),
    })),
  );
}

/** Applies the migrations this database has not seen yet; returns the names applied. */
export async function migrate(client: Pick<SqlClient, 'transaction'>): Promise<string[]> {
  const migrations = await loadMigrations();
  return client.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
    await tx.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version    integer PRIMARY KEY,
      name       text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const rows = await tx.query<{ version: number }>('SELECT version FROM schema_migrations');
    const applied = new Set(rows.map((r) => r.version));
    const names: string[] = [];
    for (const migration of migrations) {
      if (applied.has(migration.version)) continue;
      for (const statement of splitStatements(migration.sql)) await tx.query(statement);
      await tx.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [
        migration.version,
        migration.name,
      ]);
      names.push(migration.name);
    }
    return names;
  });
}

/**
 * Splits a migration file into statements so each runs as a plain parameterless query on both
 * engines. Semicolons inside dollar-quoted bodies ($$ ... $$) do not split.
 */
export function splitStatements(sql: string): string[] {
  const statements: string[] = [];
  let current = '';
  let inBody = false;
  for (const line of sql.split('\n')) {
    if (!inBody && line.trimStart().startsWith('--')) continue;
    for (let i = 0; i < line.length; i++) {
      if (line.startsWith('$$', i)) {
        inBody = !inBody;
        current += '$$';
        i++;
      } else if (line[i] === ';' && !inBody) {
        statements.push(current.trim());
        current = '';
      } else current += line[i];
    }
    current += '\n';
  }
  statements.push(current.trim());
  return statements.filter((s) => s.length > 0);
}
