import { afterAll, beforeAll, expect, it } from 'vitest';
import { mintDevToken } from '../../src/auth/dev-token.js';
import { describeEngines, describeWithPostgres } from '../harness/engines.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import { startTestServer, type TestServer } from '../harness/test-server.js';
import { newId, runBatch } from '../fixtures/batches.js';

const CREATOR = 'owner-a';

async function call(
  server: TestServer,
  userId: string,
  method: string,
  path: string,
  body?: unknown,
) {
  return send(server.url, path, body, {
    method,
    token: await mintDevToken(server.jwtSecret, userId),
  });
}

describeEngines('owner API: two owners at once [%s]', (engine) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(engine, { auth: { agentCreators: [CREATOR] } });
  });
  afterAll(() => server.close());

  it('never leaves an agent without an owner when two owners remove or demote each other at once', async () => {
    for (let round = 0; round < 10; round++) {
      const created = await call(server, CREATOR, 'POST', '/v1/agents', {});
      const agentId = created.body.agentId as string;
      const other = `owner-b-${newId()}`;
      const base = `/v1/agents/${agentId}/members`;
      expect(
        (await call(server, CREATOR, 'PUT', `${base}/${other}`, { role: 'owner' })).status,
      ).toBe(200);
      const [first, second] = await Promise.all(
        round % 2 === 0
          ? [
              call(server, CREATOR, 'DELETE', `${base}/${other}`),
              call(server, other, 'DELETE', `${base}/${CREATOR}`),
            ]
          : [
              call(server, CREATOR, 'PUT', `${base}/${CREATOR}`, { role: 'viewer' }),
              call(server, other, 'PUT', `${base}/${other}`, { role: 'editor' }),
            ],
      );
      const statuses = [first.status, second.status].sort();
      // one wins; the other is refused: as the last owner, or because it is no owner any more
      expect(statuses[0]).toBeLessThan(300);
      expect([403, 404, 409]).toContain(statuses[1]);
      const owners = (await server.store.agents.listMembers(agentId, undefined, 10)).filter(
        (m) => m.role === 'owner',
      );
      expect(owners).toHaveLength(1);
    }
  });
});

describeWithPostgres('owner API: a key revoked on one instance, on another', () => {
  let a: TestServer;
  let b: TestServer;
  beforeAll(async () => {
    a = await startTestServer('postgres', { auth: { agentCreators: [CREATOR] } });
    b = await startTestServer('postgres', { auth: { jwtSecret: a.jwtSecret } }, { shareWith: a });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it('is refused with 401 by the other instance within API_KEY_CACHE_MS', async () => {
    const { agentId, apiKey } = (await call(a, CREATOR, 'POST', '/v1/agents', {})).body as {
      agentId: string;
      apiKey: string;
    };
    // B has the key in its cache
    expect((await postBatch(b.url, apiKey, runBatch().body)).status).toBe(202);
    const [key] = (await call(a, CREATOR, 'GET', `/v1/agents/${agentId}/keys`)).body.keys as {
      keyId: string;
    }[];
    const revokedAt = Date.now();
    expect(
      (await call(a, CREATOR, 'DELETE', `/v1/agents/${agentId}/keys/${key!.keyId}`)).status,
    ).toBe(204);
    expect(isProblem(await postBatch(a.url, apiKey, runBatch().body), 401)).toBe(true);
    let refusedAfterMs = -1;
    while (Date.now() - revokedAt < 6_000) {
      const res = await postBatch(b.url, apiKey, runBatch().body);
      if (res.status === 401) {
        refusedAfterMs = Date.now() - revokedAt;
        break;
      }
      expect(res.status).toBe(202);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    console.log(`[owner key revocation] refused on the other instance after ${refusedAfterMs} ms`);
    expect(refusedAfterMs).toBeGreaterThanOrEqual(0);
    expect(refusedAfterMs).toBeLessThanOrEqual(b.config.auth.apiKeyCacheMs + 500);
  });
});
