import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { storeOptionsFrom } from '../../src/store/store-from-config.js';

const POSTGRES = {
  DATABASE_URL: 'postgres://127.0.0.1:5432/test',
  DATABASE_SCHEMA: 'tenant_a',
  DATABASE_POOL_SIZE: '20',
  DATABASE_STATEMENT_TIMEOUT_MS: '5000',
  INGEST_GROUP_MAX_BATCHES: '16',
};

describe('the store every process of one deployment opens', () => {
  it('is the same database and schema for the server, a worker and a command', () => {
    const config = loadConfig(POSTGRES);
    for (const user of ['server', 'worker', 'command'] as const) {
      const options = storeOptionsFrom(config.store, user);
      expect(options.databaseUrl).toBe(POSTGRES.DATABASE_URL);
      expect(options.databaseSchema).toBe('tenant_a');
      expect(options.dataDir).toBeUndefined();
    }
  });

  it('is the same data directory, durability and engine thread on the embedded engine', () => {
    const config = loadConfig({
      DATA_DIR: '/var/lib/flightlog',
      DATA_DIR_DURABILITY: 'process-crash',
      PGLITE_THREAD: 'worker',
    });
    for (const user of ['server', 'worker', 'command'] as const) {
      const options = storeOptionsFrom(config.store, user);
      expect(options).toMatchObject({
        dataDir: '/var/lib/flightlog',
        dataDirDurability: 'process-crash',
        pgliteThread: 'worker',
      });
      expect(options.databaseUrl).toBeUndefined();
    }
  });

  it('gives the server the configured pool, deadline and group commit', () => {
    expect(storeOptionsFrom(loadConfig(POSTGRES).store, 'server')).toMatchObject({
      poolSize: 20,
      statementTimeoutMs: 5000,
      ingestGroup: { maxBatches: 16 },
    });
  });

  it('keeps a worker to two connections and the deadline, without group commit', () => {
    const options = storeOptionsFrom(loadConfig(POSTGRES).store, 'worker');
    expect(options).toMatchObject({ poolSize: 2, statementTimeoutMs: 5000 });
    expect(options.ingestGroup).toBeUndefined();
    expect(
      storeOptionsFrom(loadConfig({ ...POSTGRES, DATABASE_POOL_SIZE: '1' }).store, 'worker')
        .poolSize,
    ).toBe(1);
  });

  it('opens a command with a small pool, leaving migration to the command', () => {
    const options = storeOptionsFrom(loadConfig(POSTGRES).store, 'command');
    expect(options.poolSize).toBe(2);
    expect(options.ingestGroup).toBeUndefined();
    expect(options.migrate).toBeUndefined();
  });
});
