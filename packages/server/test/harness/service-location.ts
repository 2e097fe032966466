import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { openStore, type Store } from '../../src/store/open-store.js';
import { expectStoredExactlyOnce, type AgentLoad, type LoadAgent } from './agent-load.js';
import { runCli, type ServeProcess } from './cli-process.js';
import { disposeLocation, freshLocation, type EngineName } from './engines.js';

/**
 * Where a `flightlog serve` process keeps its data, for tests that run the real process (and
 * kill it): a temporary DATA_DIR for PGlite, a fresh schema for PostgreSQL; `env` is what the
 * process needs to find it.
 */
export interface ServiceLocation {
  engine: EngineName;
  env: Record<string, string>;
  /**
   * Opens the same store from the test. On PGlite only once the process has exited: one process
   * at a time may hold a data directory.
   */
  openStore(): Promise<Store>;
  dispose(): Promise<void>;
}

export function freshServiceLocation(engine: EngineName): ServiceLocation {
  const dataDir = mkdtempSync(join(tmpdir(), 'flightlog-reliability-'));
  const location = freshLocation(engine);
  return {
    engine,
    env:
      engine === 'pglite'
        ? { DATA_DIR: dataDir }
        : { DATABASE_URL: location.databaseUrl!, DATABASE_SCHEMA: location.databaseSchema! },
    openStore: () =>
      openStore(engine === 'pglite' ? { dataDir, poolSize: 2 } : { ...location, poolSize: 2 }),
    async dispose() {
      await disposeLocation(location);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A loopback port free right now, so a restarted process can listen where its clients send. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * The environment of a `flightlog serve` process that is killed and restarted: on `service`, on
 * one fixed free port (its clients keep sending there), no analysis worker, warnings only.
 */
export async function restartableServeEnv(
  service: ServiceLocation,
): Promise<Record<string, string>> {
  return {
    ...service.env,
    PORT: String(await freePort()),
    ANALYSIS_WORKER: 'off',
    LOG_LEVEL: 'warn',
  };
}

/** Creates agents `<prefix>-0` … with `flightlog agent create` (before any server runs). */
export async function createAgentsWithCli(
  env: Record<string, string>,
  prefix: string,
  count: number,
): Promise<LoadAgent[]> {
  const agents: LoadAgent[] = [];
  for (let i = 0; i < count; i++) {
    const created = await runCli(['agent', 'create', '--id', `${prefix}-${i}`], env);
    expect(created.code, created.stderr).toBe(0);
    const { agentId, apiKey } = JSON.parse(created.stdout) as LoadAgent;
    agents.push({ agentId, apiKey });
  }
  return agents;
}

/**
 * Stops the process with SIGTERM (it must exit 0: a graceful stop), then reads its store (which
 * PGlite allows only now) and checks it against what the load sent and had acknowledged.
 */
export async function stopThenExpectStored(
  server: ServeProcess,
  service: ServiceLocation,
  load: AgentLoad,
): Promise<void> {
  server.child.kill('SIGTERM');
  expect(await server.exited).toBe(0);
  const store = await service.openStore();
  try {
    await expectStoredExactlyOnce(store, load);
  } finally {
    await store.close();
  }
}
