import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  exportJWK,
  exportSPKI,
  generateKeyPair,
  SignJWT,
  UnsecuredJWT,
  type CryptoKey,
  type JWK,
  type JWTPayload,
} from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintDevToken } from '../../src/auth/dev-token.js';
import { createIdentityVerifier } from '../../src/auth/identity.js';
import { describeEngines } from '../harness/engines.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { runBatch } from '../fixtures/batches.js';

const now = () => Math.floor(Date.now() / 1000);
const bytes = (secret: string) => new TextEncoder().encode(secret);

/** An HS256 token; `claims` replace the defaults (sub alice, exp in an hour); undefined drops one. */
function hs256(secret: string | Uint8Array, claims: JWTPayload = {}, kid?: string) {
  const payload: JWTPayload = { sub: 'alice', exp: now() + 3600, iat: now(), ...claims };
  for (const key of Object.keys(payload)) if (payload[key] === undefined) delete payload[key];
  return new SignJWT(payload)
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT', ...(kid ? { kid } : {}) })
    .sign(typeof secret === 'string' ? bytes(secret) : secret);
}

function rs256(key: CryptoKey, kid: string, claims: JWTPayload = {}) {
  const payload: JWTPayload = {
    sub: 'alice',
    iss: 'https://issuer.test',
    aud: 'flightlog',
    exp: now() + 3600,
    iat: now(),
    ...claims,
  };
  return new SignJWT(payload).setProtectedHeader({ alg: 'RS256', typ: 'JWT', kid }).sign(key);
}

/** `alg: none`, no signature. */
function unsigned(claims: JWTPayload = {}) {
  return new UnsecuredJWT({
    sub: 'alice',
    iss: 'https://issuer.test',
    aud: 'flightlog',
    exp: now() + 3600,
    ...claims,
  }).encode();
}

/** A real JWKS endpoint on a loopback port, serving one RSA public key. */
interface JwksServer {
  url: string;
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
  publicPem: string;
  close(): Promise<void>;
}

async function startJwksServer(): Promise<JwksServer> {
  const kid = 'test-key-1';
  const { publicKey, privateKey } = await generateKeyPair('RS256', { extractable: true });
  const publicJwk: JWK = { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' };
  const server = http.createServer((request, response) => {
    if (request.url === '/jwks.json') {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ keys: [publicJwk] }));
    } else {
      response.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/jwks.json`,
    kid,
    privateKey,
    publicJwk,
    publicPem: await exportSPKI(publicKey),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

let jwks: JwksServer;
let otherKey: CryptoKey;
beforeAll(async () => {
  jwks = await startJwksServer();
  otherKey = (await generateKeyPair('RS256')).privateKey;
});
afterAll(() => jwks.close());

describe('createIdentityVerifier', () => {
  const secret = 'a-test-secret-that-is-at-least-32-characters-long';

  it('accepts a good HS256 token and returns its sub and exp', async () => {
    const exp = now() + 600;
    const verifier = createIdentityVerifier({ secret });
    expect(await verifier.verify(await hs256(secret, { sub: 'user-42', exp }))).toEqual({
      kind: 'verified',
      userId: 'user-42',
      expiresAt: exp * 1000,
    });
  });

  it('says "missing" without a token and "not-configured" without secret or JWKS', async () => {
    expect(await createIdentityVerifier({ secret }).verify(undefined)).toEqual({
      kind: 'refused',
      reason: 'missing',
    });
    expect(await createIdentityVerifier({}).verify(await hs256(secret))).toEqual({
      kind: 'refused',
      reason: 'not-configured',
    });
  });

  it('tolerates 5 s of clock skew on exp and nbf by default, not more', async () => {
    const verifier = createIdentityVerifier({ secret });
    expect((await verifier.verify(await hs256(secret, { exp: now() - 2 }))).kind).toBe('verified');
    expect((await verifier.verify(await hs256(secret, { nbf: now() + 2 }))).kind).toBe('verified');
    expect(await verifier.verify(await hs256(secret, { exp: now() - 30 }))).toEqual({
      kind: 'refused',
      reason: 'expired',
    });
    expect(await verifier.verify(await hs256(secret, { nbf: now() + 30 }))).toEqual({
      kind: 'refused',
      reason: 'invalid',
    });
  });

  it('calls an expired token with a wrong signature invalid, not expired', async () => {
    const verifier = createIdentityVerifier({ secret });
    const forged = await hs256(`${secret}-wrong`, { exp: now() - 600 });
    expect(await verifier.verify(forged)).toEqual({ kind: 'refused', reason: 'invalid' });
  });

  it.each([
    ['an empty sub', { sub: '' }],
    ['no sub', { sub: undefined }],
    ['no exp', { exp: undefined }],
    ['a non-numeric exp', { exp: 'tomorrow' as unknown as number }],
  ])('refuses a token with %s', async (_name, claims) => {
    const verifier = createIdentityVerifier({ secret });
    expect(await verifier.verify(await hs256(secret, claims))).toEqual({
      kind: 'refused',
      reason: 'invalid',
    });
  });

  it('with both a secret and a JWKS: accepts each kind, and no confusion between them', async () => {
    const verifier = createIdentityVerifier({
      secret,
      jwksUrl: jwks.url,
      issuer: 'https://issuer.test',
      audience: 'flightlog',
    });
    const rsa = await rs256(jwks.privateKey, jwks.kid);
    expect(await verifier.verify(rsa)).toMatchObject({ kind: 'verified', userId: 'alice' });
    const hs = await hs256(secret, { iss: 'https://issuer.test', aud: 'flightlog' });
    expect(await verifier.verify(hs)).toMatchObject({ kind: 'verified', userId: 'alice' });
    // issuer and audience are the identity provider's: dev tokens (neither claim) still work
    expect(await verifier.verify(await mintDevToken(secret, 'dev'))).toMatchObject({
      kind: 'verified',
      userId: 'dev',
    });
    // while a JWKS token must carry them
    expect(
      await verifier.verify(await rs256(jwks.privateKey, jwks.kid, { iss: undefined })),
    ).toEqual({
      kind: 'refused',
      reason: 'invalid',
    });
    const claims = { iss: 'https://issuer.test', aud: 'flightlog' };
    for (const confused of [
      await hs256(bytes(jwks.publicPem), claims, jwks.kid),
      await hs256(bytes(JSON.stringify(jwks.publicJwk)), claims, jwks.kid),
      unsigned(),
    ])
      expect(await verifier.verify(confused)).toEqual({ kind: 'refused', reason: 'invalid' });
  });
});

describeEngines('identity JWT on the read API [%s]', (engine) => {
  describe('with JWT_SECRET (HS256)', () => {
    let server: TestServer;
    let agent: TestAgent;
    let traceId: string;
    beforeAll(async () => {
      server = await startTestServer(engine);
      agent = await server.createAgent();
      const { body, trace } = runBatch({ events: 1 });
      expect((await postBatch(server.url, agent.apiKey, body)).status).toBe(202);
      traceId = trace.id;
      await server.userToken('alice', agent.agentId, 'viewer');
    });
    afterAll(() => server.close());

    const read = (token?: string, headers: Record<string, string> = {}) =>
      send(server.url, `/v1/traces/${traceId}`, undefined, {
        ...(token === undefined ? {} : { token }),
        headers,
      });

    it('accepts an HS256 token with sub and exp signed with JWT_SECRET', async () => {
      const res = await read(await hs256(server.jwtSecret));
      expect(res.status).toBe(200);
      expect(res.body.trace.id).toBe(traceId);
    });

    it('accepts the token of mintDevToken (flightlog dev-token)', async () => {
      const token = await server.userToken('alice');
      expect((await read(token)).status).toBe(200);
    });

    it('refuses an unsigned alg:none token', async () => {
      const res = await read(unsigned());
      expect(isProblem(res, 401)).toBe(true);
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
    });

    it('refuses an HS256 token signed with another secret', async () => {
      const res = await read(await hs256(`${server.jwtSecret}x`));
      expect(isProblem(res, 401)).toBe(true);
      expect(res.body.trace).toBeUndefined();
      expect(res.text).not.toContain('Swap 1 SOL'); // the trace's inputSummary
    });

    it('refuses an expired token (beyond the 5 s tolerance) and says it expired', async () => {
      const res = await read(await hs256(server.jwtSecret, { exp: now() - 60, iat: now() - 120 }));
      expect(isProblem(res, 401)).toBe(true);
      expect(res.body.detail).toMatch(/expire/i);
    });

    it('refuses a token that is not valid yet (nbf in the future)', async () => {
      const res = await read(await hs256(server.jwtSecret, { nbf: now() + 120 }));
      expect(isProblem(res, 401)).toBe(true);
    });

    it('refuses a token without exp', async () => {
      expect(isProblem(await read(await hs256(server.jwtSecret, { exp: undefined })), 401)).toBe(
        true,
      );
    });

    it('refuses a token without sub', async () => {
      expect(isProblem(await read(await hs256(server.jwtSecret, { sub: undefined })), 401)).toBe(
        true,
      );
    });

    it('refuses an RS256 token: no JWKS is configured', async () => {
      expect(isProblem(await read(await rs256(jwks.privateKey, jwks.kid)), 401)).toBe(true);
    });

    it.each([
      ['garbage', { authorization: 'Bearer garbage' }],
      ['three dots of garbage', { authorization: 'Bearer a.b.c' }],
      ['an empty bearer', { authorization: 'Bearer ' }],
      ['a Basic scheme', { authorization: 'Basic YWxpY2U6c2VjcmV0' }],
      ['two credentials', { authorization: 'Bearer one two' }],
      ['no Authorization header', {}],
    ])('refuses %s with a 401 problem', async (_name, headers) => {
      const res = await read(undefined, headers);
      expect(isProblem(res, 401)).toBe(true);
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
    });

    it('refuses a valid token with a tampered payload', async () => {
      const [header, , signature] = (await hs256(server.jwtSecret, { sub: 'nobody' })).split('.');
      const payload = Buffer.from(JSON.stringify({ sub: 'alice', exp: now() + 3600 })).toString(
        'base64url',
      );
      expect(isProblem(await read(`${header}.${payload}.${signature}`), 401)).toBe(true);
    });
  });

  describe('with JWT_JWKS_URL (RS256 from an identity provider)', () => {
    let server: TestServer;
    let traceId: string;
    beforeAll(async () => {
      server = await startTestServer(engine, {
        auth: {
          jwtSecret: undefined,
          jwtJwksUrl: jwks.url,
          jwtIssuer: 'https://issuer.test',
          jwtAudience: 'flightlog',
        },
      });
      const agent = await server.createAgent();
      const { body, trace } = runBatch({ events: 1 });
      expect((await postBatch(server.url, agent.apiKey, body)).status).toBe(202);
      traceId = trace.id;
      const granted = await send(
        server.url,
        `/admin/v1/agents/${agent.agentId}/members/alice`,
        { role: 'viewer' },
        { method: 'PUT', token: server.adminToken },
      );
      expect(granted.status).toBe(200);
    });
    afterAll(() => server.close());

    const read = (token: string) => send(server.url, `/v1/traces/${traceId}`, undefined, { token });

    it('accepts an RS256 token of the JWKS key with the right issuer and audience', async () => {
      const res = await read(await rs256(jwks.privateKey, jwks.kid));
      expect(res.status).toBe(200);
      expect(res.body.trace.id).toBe(traceId);
    });

    it('refuses a wrong issuer', async () => {
      const token = await rs256(jwks.privateKey, jwks.kid, { iss: 'https://evil.test' });
      expect(isProblem(await read(token), 401)).toBe(true);
    });

    it('refuses a wrong audience', async () => {
      const token = await rs256(jwks.privateKey, jwks.kid, { aud: 'someone-else' });
      expect(isProblem(await read(token), 401)).toBe(true);
    });

    it('refuses a token signed by another RSA key, with the same kid or another', async () => {
      expect(isProblem(await read(await rs256(otherKey, jwks.kid)), 401)).toBe(true);
      expect(isProblem(await read(await rs256(otherKey, 'unknown-kid')), 401)).toBe(true);
    });

    it('refuses algorithm confusion: HS256 keyed with the public key (PEM or JWK)', async () => {
      const claims = { iss: 'https://issuer.test', aud: 'flightlog' };
      const pem = await hs256(bytes(jwks.publicPem), claims, jwks.kid);
      const jwk = await hs256(bytes(JSON.stringify(jwks.publicJwk)), claims, jwks.kid);
      expect(isProblem(await read(pem), 401)).toBe(true);
      expect(isProblem(await read(jwk), 401)).toBe(true);
    });

    it('refuses alg:none', async () => {
      expect(isProblem(await read(unsigned()), 401)).toBe(true);
    });

    it('refuses an HS256 token: no JWT_SECRET is configured', async () => {
      const token = await hs256(server.jwtSecret, { iss: 'https://issuer.test', aud: 'flightlog' });
      expect(isProblem(await read(token), 401)).toBe(true);
    });

    it('refuses an expired RS256 token and says it expired', async () => {
      const res = await read(await rs256(jwks.privateKey, jwks.kid, { exp: now() - 60 }));
      expect(isProblem(res, 401)).toBe(true);
      expect(res.body.detail).toMatch(/expire/i);
    });
  });
});
