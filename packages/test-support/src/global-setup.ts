import net from 'node:net';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Connection string of the real PostgreSQL, or null when it is unreachable (skipped). */
    postgresUrl: string | null;
    /** URL of the real Redis, or null when it is unreachable (skipped). */
    redisUrl: string | null;
  }
}

const POSTGRES_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

function reachable(url: string, defaultPort: number): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect({ host: hostname, port: Number(port || defaultPort) });
    socket.setTimeout(2_000);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * Finds the real PostgreSQL. Without it the suites still run on PGlite and say loudly which
 * suites they skipped; under CI nothing may be skipped.
 */
export async function setup(project: TestProject): Promise<void> {
  const postgres = await reachable(POSTGRES_URL, 5432);
  const redis = await reachable(REDIS_URL, 6379);
  for (const [up, name, url, suites, fallback] of [
    [postgres, 'PostgreSQL', POSTGRES_URL, '[postgres]', 'PGlite'],
    [redis, 'Redis', REDIS_URL, '[redis]', 'the in-process bus'],
  ] as const) {
    if (up) continue;
    const message = `${name} is unreachable at ${url}`;
    if (process.env.CI === 'true') throw new Error(`${message}: CI must run every suite.`);
    process.stdout.write(
      `\n!!! SKIPPING every ${suites} suite: ${message}. They run on ${fallback} only. !!!\n\n`,
    );
  }
  project.provide('postgresUrl', postgres ? POSTGRES_URL : null);
  project.provide('redisUrl', redis ? REDIS_URL : null);
}
