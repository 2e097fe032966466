import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { changeConfig, ConfigError, loadConfig } from '../../src/config.js';

describe('loadConfig', () => {
  it('has the documented defaults', () => {
    expect(loadConfig({})).toMatchObject({
      http: {
        port: 8080,
        host: '127.0.0.1',
        maxBodyBytes: 5 * 1024 * 1024,
        requestTimeoutMs: 30_000,
      },
      store: {
        dataDir: './.flightlog',
        dataDirDurability: 'power-loss',
        databaseUrl: undefined,
        poolSize: 10,
      },
      auth: {
        apiKeyCacheMs: 2000,
        apiKeyMaxFailures: 20,
        apiKeyFailureWindowMs: 60_000,
        adminToken: undefined,
        jwtSecret: undefined,
        agentCreators: ['local-operator'],
      },
      live: { accessCheckMs: 2000 },
      analysis: {
        graceMs: 2000,
        worker: true,
        leaseMs: 60_000,
        maxAttempts: 5,
        pollMs: 500,
        llmBaseUrl: undefined,
        llmModel: undefined,
        llmApiKey: undefined,
        llmTimeoutMs: 20_000,
        llmSendDecrypted: false,
        serviceMasterKey: undefined,
      },
      process: {
        shutdownTimeoutMs: 10_000,
        logLevel: 'info',
        logFormat: undefined,
        production: false,
        startUpBanner: undefined,
        heapGrowingPercent: 100,
      },
    });
    // 0 hands the heap's sizing back to V8
    expect(loadConfig({ HEAP_GROWING_PERCENT: '0' }).process.heapGrowingPercent).toBe(0);
    expect(loadConfig({ HEAP_GROWING_PERCENT: '50' }).process.heapGrowingPercent).toBe(50);
  });

  it('reads AGENT_CREATORS as user ids separated by commas', () => {
    expect(
      loadConfig({ AGENT_CREATORS: ' alice, bob@example.com,,alice ' }).auth.agentCreators,
    ).toEqual(['alice', 'bob@example.com']);
  });

  it('listens on loopback and lets the local operator create agents only without identity configuration', () => {
    const secret = 'x'.repeat(32);
    expect(loadConfig({ JWT_SECRET: secret })).toMatchObject({
      http: { host: '0.0.0.0' },
      auth: { agentCreators: [] },
    });
    expect(
      loadConfig({ JWT_JWKS_URL: 'https://id.example/jwks', JWT_ISSUER: 'i', JWT_AUDIENCE: 'a' }),
    ).toMatchObject({ http: { host: '0.0.0.0' }, auth: { agentCreators: [] } });
    // explicit settings win in either mode; an empty AGENT_CREATORS means nobody
    expect(loadConfig({ HOST: '0.0.0.0' }).http.host).toBe('0.0.0.0');
    expect(loadConfig({ AGENT_CREATORS: '' }).auth.agentCreators).toEqual([]);
    expect(
      loadConfig({ JWT_SECRET: secret, AGENT_CREATORS: ' ana, bo ,,' }).auth.agentCreators,
    ).toEqual(['ana', 'bo']);
    expect(loadConfig({ NODE_ENV: 'production' }).process.production).toBe(true);
    expect(loadConfig({ LOG_FORMAT: 'json', FLIGHTLOG_BANNER: 'off' })).toMatchObject({
      process: { logFormat: 'json', startUpBanner: false },
    });
    expect(() => loadConfig({ LOG_FORMAT: 'text' })).toThrow(
      new ConfigError('LOG_FORMAT must be pretty or json, got "text"'),
    );
  });

  it('reads the analysis settings', () => {
    const key = Buffer.alloc(32, 7);
    const config = loadConfig({
      ANALYSIS_WORKER: 'off',
      ANALYSIS_GRACE_MS: '0',
      ANALYSIS_LEASE_MS: '30000',
      ANALYSIS_MAX_ATTEMPTS: '3',
      ANALYSIS_POLL_MS: '100',
      ANALYSIS_LLM_BASE_URL: 'https://llm.example/v1',
      ANALYSIS_LLM_MODEL: 'gpt-4o-mini',
      ANALYSIS_LLM_API_KEY: 'sk-abc',
      ANALYSIS_LLM_TIMEOUT_MS: '10000',
      ANALYSIS_LLM_SEND_DECRYPTED: 'on',
      SERVICE_MASTER_KEY: key.toString('base64'),
    });
    expect(config).toMatchObject({
      analysis: {
        worker: false,
        graceMs: 0,
        leaseMs: 30_000,
        maxAttempts: 3,
        pollMs: 100,
        llmBaseUrl: 'https://llm.example/v1',
        llmModel: 'gpt-4o-mini',
        llmApiKey: 'sk-abc',
        llmTimeoutMs: 10_000,
        llmSendDecrypted: true,
      },
    });
    expect(config.analysis.serviceMasterKey?.equals(key)).toBe(true);
    // URL-safe base64 without padding is the same key
    const urlSafe = key.toString('base64url');
    expect(loadConfig({ SERVICE_MASTER_KEY: urlSafe }).analysis.serviceMasterKey?.equals(key)).toBe(
      true,
    );
  });

  it('allows a lease shorter than the LLM timeout when no LLM is configured', () => {
    expect(loadConfig({ ANALYSIS_LEASE_MS: '5000' }).analysis.leaseMs).toBe(5_000);
  });

  it('never echoes a wrong SERVICE_MASTER_KEY', () => {
    const wrong = Buffer.alloc(31, 9).toString('base64');
    expect(() => loadConfig({ SERVICE_MASTER_KEY: wrong })).toThrow(
      'SERVICE_MASTER_KEY must be 32 random bytes in base64, but it decodes to 31 bytes, not 32',
    );
    try {
      loadConfig({ SERVICE_MASTER_KEY: wrong });
    } catch (error) {
      expect((error as Error).message).not.toContain(wrong);
    }
  });

  it('turns anchoring on with a keypair (a file or the array itself) and an explicit cluster', () => {
    expect(loadConfig({}).anchoring).toMatchObject({ keypair: undefined, cluster: undefined });
    const bytes = Array.from({ length: 64 }, (_, i) => i);
    const file = join(mkdtempSync(join(tmpdir(), 'flightlog-config-')), 'anchor.json');
    writeFileSync(file, JSON.stringify(bytes));
    for (const setting of [file, JSON.stringify(bytes)]) {
      const config = loadConfig({
        ANCHOR_KEYPAIR: setting,
        ANCHOR_CLUSTER: 'mainnet',
        ANCHOR_INTERVAL_MS: '5000',
        ANCHOR_BATCH_RUNS: '50',
      });
      expect(config.anchoring).toMatchObject({
        cluster: 'mainnet',
        rpcUrl: undefined,
        intervalMs: 5_000,
        batchRuns: 50,
        pollMs: 1_000,
        leaseMs: 60_000,
        backoffMs: 1_000,
      });
      expect([...(config.anchoring.keypair ?? [])]).toEqual(bytes);
    }
    // anchoring on mainnet spends real SOL: no cluster is assumed
    expect(() => loadConfig({ ANCHOR_KEYPAIR: file })).toThrow(
      'ANCHOR_CLUSTER is required with ANCHOR_KEYPAIR: one of devnet, mainnet',
    );
  });

  it('refuses a wrong ANCHOR_KEYPAIR without echoing it', () => {
    const secret = JSON.stringify(Array.from({ length: 63 }, () => 7));
    expect(() => loadConfig({ ANCHOR_KEYPAIR: secret, ANCHOR_CLUSTER: 'devnet' })).toThrow(
      "ANCHOR_KEYPAIR: it is not a JSON array of 64 bytes (solana-keygen's format)",
    );
    try {
      loadConfig({ ANCHOR_KEYPAIR: secret, ANCHOR_CLUSTER: 'devnet' });
    } catch (error) {
      expect((error as Error).message).not.toContain('7,7');
    }
    expect(() =>
      loadConfig({ ANCHOR_KEYPAIR: '/no/such/keypair.json', ANCHOR_CLUSTER: 'devnet' }),
    ).toThrow('ANCHOR_KEYPAIR: its file cannot be read (ENOENT)');
  });

  it('reads every variable', () => {
    const config = loadConfig({
      PORT: '9000',
      DATABASE_URL: 'postgres://u@db:5432/flightlog',
      DATABASE_SCHEMA: 'tenant_a',
      ADMIN_TOKEN: 'a'.repeat(16),
      JWT_SECRET: 's'.repeat(32),
      JWT_JWKS_URL: 'https://idp.example/jwks.json',
      JWT_ISSUER: 'https://idp.example/',
      JWT_AUDIENCE: 'flightlog',
      DASHBOARD_OIDC_CLIENT_ID: 'flightlog',
      MAX_BODY_BYTES: '2048',
      API_KEY_CACHE_MS: '0',
      API_KEY_MAX_FAILURES: '5',
      API_KEY_FAILURE_WINDOW_MS: '300000',
      LIVE_ACCESS_CHECK_MS: '4000',
    });
    expect(config).toMatchObject({
      http: { port: 9000, maxBodyBytes: 2048 },
      store: { databaseUrl: 'postgres://u@db:5432/flightlog', databaseSchema: 'tenant_a' },
      auth: {
        jwtJwksUrl: 'https://idp.example/jwks.json',
        dashboardOidcClientId: 'flightlog',
        apiKeyCacheMs: 0,
        apiKeyMaxFailures: 5,
        apiKeyFailureWindowMs: 300_000,
      },
      live: { accessCheckMs: 4000 },
    });
    expect(loadConfig({ DATA_DIR_DURABILITY: 'process-crash' }).store.dataDirDurability).toBe(
      'process-crash',
    );
    expect(loadConfig({ DATA_DIR_DURABILITY: 'power-loss' }).store.dataDirDurability).toBe(
      'power-loss',
    );
    expect(loadConfig({}).store.pgliteThread).toBe('main');
    expect(loadConfig({ PGLITE_THREAD: 'worker' }).store.pgliteThread).toBe('worker');
    expect(loadConfig({}).http.trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: 'false' }).http.trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: '2' }).http.trustProxy).toBe(2);
    expect(loadConfig({ TRUST_PROXY: '10.0.0.0/8, ::1, 192.0.2.7' }).http.trustProxy).toEqual([
      '10.0.0.0/8',
      '::1',
      '192.0.2.7',
    ]);
  });

  it.each([
    [{ PORT: 'eighty' }, 'PORT'],
    [{ PORT: '70000' }, 'PORT'],
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL'],
    [{ DATABASE_URL: 'not a url' }, 'DATABASE_URL'],
    [{ DATABASE_SCHEMA: 'Robert"); DROP' }, 'DATABASE_SCHEMA'],
    [{ JWT_SECRET: 'short' }, 'JWT_SECRET'],
    [{ ADMIN_TOKEN: 'short' }, 'ADMIN_TOKEN'],
    [{ API_KEY_CACHE_MS: '6000' }, 'API_KEY_CACHE_MS'],
    // past 4 s a removal made elsewhere could outlive the 5 s bound
    [{ LIVE_ACCESS_CHECK_MS: '4001' }, 'LIVE_ACCESS_CHECK_MS'],
    [{ LIVE_ACCESS_CHECK_MS: '50' }, 'LIVE_ACCESS_CHECK_MS'],
    [{ API_KEY_MAX_FAILURES: '0' }, 'API_KEY_MAX_FAILURES'],
    [{ API_KEY_FAILURE_WINDOW_MS: '500' }, 'API_KEY_FAILURE_WINDOW_MS'],
    [{ API_KEY_FAILURE_WINDOW_MS: '1m' }, 'API_KEY_FAILURE_WINDOW_MS'],
    [{ TRUST_PROXY: 'true' }, 'TRUST_PROXY'],
    [{ TRUST_PROXY: '0' }, 'TRUST_PROXY'],
    [{ TRUST_PROXY: '10.0.0.0/33' }, 'TRUST_PROXY'],
    [{ TRUST_PROXY: 'proxy.internal' }, 'TRUST_PROXY'],
    [{ LOG_LEVEL: 'verbose' }, 'LOG_LEVEL'],
    [{ DATA_DIR_DURABILITY: 'off' }, 'DATA_DIR_DURABILITY must be power-loss'],
    [{ PGLITE_THREAD: 'own' }, 'PGLITE_THREAD must be main'],
    [
      { DATA_DIR_DURABILITY: 'process-crash', DATABASE_URL: 'postgres://u@db:5432/flightlog' },
      'DATA_DIR_DURABILITY applies to the embedded engine only',
    ],
    [{ JWT_JWKS_URL: 'https://idp.example/jwks.json', JWT_AUDIENCE: 'flightlog' }, 'JWT_ISSUER'],
    [{ JWT_JWKS_URL: 'https://idp.example/jwks.json', JWT_ISSUER: 'https://idp/' }, 'JWT_AUDIENCE'],
    // the dashboard signs in at the provider the server trusts, and sends its ID token
    [{ DASHBOARD_OIDC_CLIENT_ID: 'flightlog' }, 'DASHBOARD_OIDC_CLIENT_ID needs JWT_JWKS_URL'],
    [
      {
        JWT_JWKS_URL: 'https://idp.example/jwks.json',
        JWT_ISSUER: 'idp',
        JWT_AUDIENCE: 'flightlog',
        DASHBOARD_OIDC_CLIENT_ID: 'flightlog',
      },
      'JWT_ISSUER is not a valid URL',
    ],
    [
      {
        JWT_JWKS_URL: 'https://idp.example/jwks.json',
        JWT_ISSUER: 'https://idp.example',
        JWT_AUDIENCE: 'flightlog-api',
        DASHBOARD_OIDC_CLIENT_ID: 'flightlog-dashboard',
      },
      'DASHBOARD_OIDC_CLIENT_ID must equal JWT_AUDIENCE',
    ],
    [{ ANALYSIS_WORKER: 'yes' }, 'ANALYSIS_WORKER'],
    [{ ANALYSIS_LEASE_MS: '500' }, 'ANALYSIS_LEASE_MS'],
    [{ ANALYSIS_MAX_ATTEMPTS: '0' }, 'ANALYSIS_MAX_ATTEMPTS'],
    [{ ANALYSIS_POLL_MS: '5' }, 'ANALYSIS_POLL_MS'],
    [{ ANALYSIS_LLM_BASE_URL: 'https://llm.example/v1' }, 'ANALYSIS_LLM_MODEL'],
    [{ ANALYSIS_LLM_MODEL: 'gpt-4o-mini' }, 'ANALYSIS_LLM_BASE_URL'],
    [
      { ANALYSIS_LLM_BASE_URL: 'ftp://llm.example', ANALYSIS_LLM_MODEL: 'm' },
      'ANALYSIS_LLM_BASE_URL',
    ],
    [{ ANALYSIS_LLM_API_KEY: 'sk-abc' }, 'ANALYSIS_LLM_BASE_URL'],
    [
      {
        ANALYSIS_LLM_BASE_URL: 'https://llm.example/v1',
        ANALYSIS_LLM_MODEL: 'm',
        ANALYSIS_LLM_TIMEOUT_MS: '60000',
      },
      'ANALYSIS_LLM_TIMEOUT_MS (60000) must be less than ANALYSIS_LEASE_MS (60000)',
    ],
    [{ ANALYSIS_LLM_SEND_DECRYPTED: 'true' }, 'ANALYSIS_LLM_SEND_DECRYPTED'],
    [{ SERVICE_MASTER_KEY: '' }, 'SERVICE_MASTER_KEY'],
    [{ SERVICE_MASTER_KEY: 'not base64 at all!' }, 'SERVICE_MASTER_KEY'],
    [{ SERVICE_MASTER_KEY: Buffer.alloc(16).toString('base64') }, 'SERVICE_MASTER_KEY'],
    [{ ANCHOR_CLUSTER: 'devnet' }, 'ANCHOR_KEYPAIR (which turns anchoring on) is not'],
    [{ ANCHOR_RPC_URL: 'https://rpc.example' }, 'ANCHOR_RPC_URL is set'],
    [{ ANCHOR_KEYPAIR: '[1,2]', ANCHOR_CLUSTER: 'testnet' }, 'ANCHOR_KEYPAIR'],
    [
      { ANCHOR_KEYPAIR: JSON.stringify(Array(64).fill(1)), ANCHOR_CLUSTER: 'testnet' },
      'ANCHOR_CLUSTER must be one of devnet, mainnet',
    ],
    [{ ANCHOR_BATCH_RUNS: '0' }, 'ANCHOR_BATCH_RUNS'],
    [{ HEAP_GROWING_PERCENT: '301' }, 'HEAP_GROWING_PERCENT must be between 0 and 300, got 301'],
    [{ HEAP_GROWING_PERCENT: '1.5' }, 'HEAP_GROWING_PERCENT must be a whole number'],
  ])('refuses %j naming %s', (env, name) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(name);
  });
});

describe('changeConfig', () => {
  it('changes only the settings it is given, group by group, and leaves the original as it was', () => {
    const base = loadConfig({ LIVE_HEARTBEAT_MS: '5000', ADMIN_TOKEN: 'a'.repeat(16) });
    const changed = changeConfig(base, { live: { retryMs: 10 }, auth: { adminToken: undefined } });
    expect(changed.live).toEqual({ ...base.live, retryMs: 10 });
    expect(changed.live.heartbeatMs).toBe(5_000);
    expect(changed.auth.adminToken).toBeUndefined();
    expect(changed.auth.apiKeyCacheMs).toBe(base.auth.apiKeyCacheMs);
    expect(changed.store).toEqual(base.store);
    expect(base.live.retryMs).toBe(3_000);
    expect(base.auth.adminToken).toBe('a'.repeat(16));
  });
});
