import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  disposeLocation,
  describeEngines,
  freshLocation,
  type EngineLocation,
} from '../harness/engines.js';
import { runCli } from '../harness/cli-process.js';
import { openStore } from '../../src/store/open-store.js';

describeEngines('flightlog agent lifecycle [%s]', (engine) => {
  let env: Record<string, string>;
  let dataDir: string;
  let location: EngineLocation;

  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'flightlog-lifecycle-cli-'));
    location = freshLocation(engine);
    env = {
      JWT_SECRET: 'lifecycle-cli-secret-0123456789abcdef',
      RUN_TIMEOUT_MS: '7200000',
      ...(engine === 'pglite'
        ? { DATA_DIR: dataDir }
        : { DATABASE_URL: location.databaseUrl!, DATABASE_SCHEMA: location.databaseSchema! }),
    };
  });
  afterAll(async () => {
    await disposeLocation(location);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('shows and changes an agent’s settings; refuses bad values and unknown agents', async () => {
    const created = await runCli(['agent', 'create', '--id', 'lc-agent'], env);
    expect(created.code, created.stderr).toBe(0);

    const shown = await runCli(['agent', 'lifecycle', 'lc-agent'], env);
    expect(shown.code, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({
      agentId: 'lc-agent',
      runTimeoutMs: null,
      effective: { runTimeoutMs: 7_200_000 },
    });

    const never = await runCli(['agent', 'lifecycle', 'lc-agent', '--run-timeout-ms', '0'], env);
    expect(never.code, never.stderr).toBe(0);
    expect(JSON.parse(never.stdout)).toMatchObject({
      runTimeoutMs: 0,
      effective: { runTimeoutMs: null },
    });

    const reset = await runCli(
      ['agent', 'lifecycle', 'lc-agent', '--run-timeout-ms', 'default'],
      env,
    );
    expect(JSON.parse(reset.stdout)).toMatchObject({ runTimeoutMs: null });

    const retained = await runCli(
      ['agent', 'lifecycle', 'lc-agent', '--retention-days', '30', '--run-timeout-ms', '60000'],
      env,
    );
    expect(retained.code, retained.stderr).toBe(0);
    expect(JSON.parse(retained.stdout)).toEqual({
      agentId: 'lc-agent',
      runTimeoutMs: 60_000,
      retentionDays: 30,
      effective: { runTimeoutMs: 60_000, retentionDays: 30 },
    });
    const forever = await runCli(['agent', 'lifecycle', 'lc-agent', '--retention-days', '0'], env);
    expect(JSON.parse(forever.stdout)).toMatchObject({
      retentionDays: 0,
      effective: { retentionDays: null },
    });

    const bad = await runCli(['agent', 'lifecycle', 'lc-agent', '--run-timeout-ms', 'soon'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--run-timeout-ms must be a whole number');

    const absent = await runCli(['agent', 'lifecycle', 'nobody'], env);
    expect(absent.code).toBe(2);
    expect(absent.stderr).toContain('no agent nobody');

    // each change is in the audit log, by the CLI
    const store = await openStore(
      engine === 'pglite' ? { dataDir, poolSize: 1 } : { ...location, poolSize: 1 },
    );
    try {
      const entries = await store.audit.list({ agentId: 'lc-agent', limit: 10 });
      expect(entries.map((e) => [e.actor, e.action])).toEqual(
        Array.from({ length: 4 }, () => ['cli', 'lifecycle.changed']),
      );
    } finally {
      await store.close();
    }
  }, 180_000);
});
