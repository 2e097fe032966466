import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('loadConfig', () => {
  it('has the documented defaults', () => {
    expect(loadConfig({})).toMatchObject({
      port: 8080,
      host: '0.0.0.0',
      dataDir: './.flightlog',
      databaseUrl: undefined,
      databasePoolSize: 10,
      maxBodyBytes: 5 * 1024 * 1024,
      apiKeyCacheMs: 2000,
      analysisGraceMs: 2000,
      requestTimeoutMs: 30_000,
      shutdownTimeoutMs: 10_000,
      logLevel: 'info',
      adminToken: undefined,
      jwtSecret: undefined,
    });
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
      MAX_BODY_BYTES: '2048',
      API_KEY_CACHE_MS: '0',
    });
    expect(config).toMatchObject({
      port: 9000,
      databaseUrl: 'postgres://u@db:5432/flightlog',
      databaseSchema: 'tenant_a',
      jwtJwksUrl: 'https://idp.example/jwks.json',
      maxBodyBytes: 2048,
      apiKeyCacheMs: 0,
    });
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
    [{ LOG_LEVEL: 'verbose' }, 'LOG_LEVEL'],
    [{ JWT_JWKS_URL: 'https://idp.example/jwks.json', JWT_AUDIENCE: 'flightlog' }, 'JWT_ISSUER'],
    [{ JWT_JWKS_URL: 'https://idp.example/jwks.json', JWT_ISSUER: 'https://idp/' }, 'JWT_AUDIENCE'],
  ])('refuses %j naming %s', (env, name) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(name);
  });
});
