/**
 * Where a test's data lives: one suite per engine (PGlite in memory, or a fresh schema of the
 * real PostgreSQL), and the real Redis, as the global setup found them.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describe, inject } from 'vitest';
// the vitest context the global setup provides (the PostgreSQL and Redis URLs), for its types
import type {} from './global-setup.js';

export type EngineName = 'pglite' | 'postgres';

const ENGINES: EngineName[] = ['pglite', 'postgres'];

export function postgresAvailable(): boolean {
  return inject('postgresUrl') !== null;
}

/**
 * Declares one suite per engine: `title` with `%s` replaced by the engine name. A PostgreSQL
 * suite is declared skipped, by name and with the reason, when PostgreSQL is unreachable
 * (never under CI, whose global setup fails first).
 */
export function describeEngines(title: string, body: (engine: EngineName) => void): void {
  for (const engine of ENGINES) {
    const name = title.replace('%s', engine);
    if (engine === 'postgres' && !postgresAvailable()) {
      process.stdout.write(`!!! SKIPPED "${name}": PostgreSQL is unreachable !!!\n`);
      describe.skip(name, () => body(engine));
    } else describe(name, () => body(engine));
  }
}

/** One suite that needs the real PostgreSQL; declared skipped, loudly, when it is unreachable. */
export function describeWithPostgres(title: string, body: () => void): void {
  if (postgresAvailable()) describe(title, body);
  else {
    process.stdout.write(`!!! SKIPPED "${title}": PostgreSQL is unreachable !!!\n`);
    describe.skip(title, body);
  }
}

/** One suite that needs the real Redis; declared skipped, loudly, when it is unreachable. */
export function describeWithRedis(title: string, body: () => void): void {
  if (inject('redisUrl') !== null) describe(title, body);
  else {
    process.stdout.write(`!!! SKIPPED "${title}": Redis is unreachable !!!\n`);
    describe.skip(title, body);
  }
}

export function postgresUrl(): string {
  const url = inject('postgresUrl');
  if (!url) throw new Error('PostgreSQL is not available to this run');
  return url;
}

export interface EngineLocation {
  databaseUrl?: string;
  databaseSchema?: string;
}

/** A fresh, empty place for one test file's data: in-memory PGlite or a new PostgreSQL schema. */
export function freshLocation(engine: EngineName): EngineLocation {
  if (engine === 'pglite') return {};
  return { databaseUrl: postgresUrl(), databaseSchema: `t_${randomBytes(6).toString('hex')}` };
}

/** Drops a test schema (PostgreSQL); nothing to do for in-memory PGlite. */
export async function disposeLocation(location: EngineLocation): Promise<void> {
  if (!location.databaseUrl || !location.databaseSchema) return;
  const client = new pg.Client({ connectionString: location.databaseUrl });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${location.databaseSchema}" CASCADE`);
  } finally {
    await client.end();
  }
}

export type BusName = 'memory' | 'redis';

export function redisUrl(): string {
  const url = inject('redisUrl');
  if (!url) throw new Error('Redis is not available to this run');
  return url;
}

/**
 * Declares one suite per live bus engine (`%s` in the title: memory, redis); the Redis suite is
 * declared skipped, by name, when Redis is unreachable (never under CI).
 */
export function describeBuses(title: string, body: (bus: BusName) => void): void {
  for (const bus of ['memory', 'redis'] as const) {
    const name = title.replace('%s', bus);
    if (bus === 'redis' && inject('redisUrl') === null) {
      process.stdout.write(`!!! SKIPPED "${name}": Redis is unreachable !!!\n`);
      describe.skip(name, () => body(bus));
    } else describe(name, () => body(bus));
  }
}
