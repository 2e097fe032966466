import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('loadConfig', () => {
  it('has the documented defaults', () => {
    expect(loadConfig({})).toMatchObject({
      port: 8080,
      host: '127.0.0.1',
      dataDir: './.flightlog',
      dataDirDurability: 'power-loss',
      databaseUrl: undefined,
      databasePoolSize: 10,
      maxBodyBytes: 5 * 1024 * 1024,
      apiKeyCacheMs: 2000,
      liveAccessCheckMs: 2000,
      apiKeyMaxFailures: 20,
      apiKeyFailureWindowMs: 60_000,
      analysisGraceMs: 2000,
      requestTimeoutMs: 30_000,
      shutdownTimeoutMs: 10_000,
      logLevel: 'info',
      adminToken: undefined,
      jwtSecret: undefined,
      analysisWorker: true,
      analysisLeaseMs: 60_000,
      analysisMaxAttempts: 5,
      analysisPollMs: 500,
      analysisLlmBaseUrl: undefined,
      analysisLlmModel: undefined,
      analysisLlmApiKey: undefined,
      analysisLlmTimeoutMs: 20_000,
      analysisLlmSendDecrypted: false,
      serviceMasterKey: undefined,
      logFormat: undefined,
      agentCreators: ['local-operator'],
      production: false,
      startUpBanner: undefined,
    });
  });

  it('reads AGENT_CREATORS as user ids separated by commas', () => {
    expect(loadConfig({ AGENT_CREATORS: ' alice, bob@example.com,,alice ' }).agentCreators).toEqual(
      ['alice', 'bob@example.com'],
    );
  });

  it('listens on loopback and lets the local operator create agents only without identity configuration', () => {
    const secret = 'x'.repeat(32);
    expect(loadConfig({ JWT_SECRET: secret })).toMatchObject({
      host: '0.0.0.0',
      agentCreators: [],
    });
    expect(
      loadConfig({ JWT_JWKS_URL: 'https://id.example/jwks', JWT_ISSUER: 'i', JWT_AUDIENCE: 'a' }),
    ).toMatchObject({ host: '0.0.0.0', agentCreators: [] });
    // explicit settings win in either mode; an empty AGENT_CREATORS means nobody
    expect(loadConfig({ HOST: '0.0.0.0' }).host).toBe('0.0.0.0');
    expect(loadConfig({ AGENT_CREATORS: '' }).agentCreators).toEqual([]);
    expect(loadConfig({ JWT_SECRET: secret, AGENT_CREATORS: ' ana, bo ,,' }).agentCreators).toEqual(
      ['ana', 'bo'],
    );
    expect(loadConfig({ NODE_ENV: 'production' }).production).toBe(true);
    expect(loadConfig({ LOG_FORMAT: 'json', FLIGHTLOG_BANNER: 'off' })).toMatchObject({
      logFormat: 'json',
      startUpBanner: false,
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
      analysisWorker: false,
      analysisGraceMs: 0,
      analysisLeaseMs: 30_000,
      analysisMaxAttempts: 3,
      analysisPollMs: 100,
      analysisLlmBaseUrl: 'https://llm.example/v1',
      analysisLlmModel: 'gpt-4o-mini',
      analysisLlmApiKey: 'sk-abc',
      analysisLlmTimeoutMs: 10_000,
      analysisLlmSendDecrypted: true,
    });
    expect(config.serviceMasterKey?.equals(key)).toBe(true);
    // URL-safe base64 without padding is the same key
    const urlSafe = key.toString('base64url');
    expect(loadConfig({ SERVICE_MASTER_KEY: urlSafe }).serviceMasterKey?.equals(key)).toBe(true);
  });

  it('allows a lease shorter than the LLM timeout when no LLM is configured', () => {
    expect(loadConfig({ ANALYSIS_LEASE_MS: '5000' }).analysisLeaseMs).toBe(5_000);
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
      port: 9000,
      databaseUrl: 'postgres://u@db:5432/flightlog',
      databaseSchema: 'tenant_a',
      jwtJwksUrl: 'https://idp.example/jwks.json',
      dashboardOidcClientId: 'flightlog',
      maxBodyBytes: 2048,
      apiKeyCacheMs: 0,
      apiKeyMaxFailures: 5,
      apiKeyFailureWindowMs: 300_000,
      liveAccessCheckMs: 4000,
    });
    expect(loadConfig({ DATA_DIR_DURABILITY: 'process-crash' }).dataDirDurability).toBe(
      'process-crash',
    );
    expect(loadConfig({ DATA_DIR_DURABILITY: 'power-loss' }).dataDirDurability).toBe('power-loss');
    expect(loadConfig({}).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: 'false' }).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: '2' }).trustProxy).toBe(2);
    expect(loadConfig({ TRUST_PROXY: '10.0.0.0/8, ::1, 192.0.2.7' }).trustProxy).toEqual([
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
  ])('refuses %j naming %s', (env, name) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(name);
  });
});
