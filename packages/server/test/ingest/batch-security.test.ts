import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEngines } from '../harness/engines.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import { storedEvents, storedTrace, tableCounts } from '../harness/inspect.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { llmCallEvent, newId, runBatch, traceSnapshot } from '../fixtures/batches.js';

describeEngines('ingest security [%s]', (engine) => {
  let server: TestServer;
  let alice: TestAgent;
  let mallory: TestAgent;
  beforeAll(async () => {
    server = await startTestServer(engine, { auth: { apiKeyCacheMs: 1_000 } });
    alice = await server.createAgent({ name: 'alice' });
    mallory = await server.createAgent({ name: 'mallory' });
  });
  afterAll(() => server.close());

  describe('API key', () => {
    it.each([
      ['no Authorization header', {}],
      ['a non-Bearer scheme', { authorization: 'Basic dXNlcjpwYXNz' }],
      ['an unknown key', { authorization: 'Bearer flk_unknownunknownunknownunknownunknown000' }],
    ])('answers 401 with %s and stores nothing', async (_name, headers) => {
      const before = await tableCounts(server.store);
      const res = await send(server.url, '/v1/traces/batch', runBatch().body, { headers });
      expect(isProblem(res, 401)).toBe(true);
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
      expect(await tableCounts(server.store)).toEqual(before);
    });

    it('answers 401 before reading the body', async () => {
      const res = await send(server.url, '/v1/traces/batch', '{not json', { token: 'flk_wrong' });
      expect(res.status).toBe(401);
    });

    it('stops working within 5 s of revocation (cache ttl here: 1 s), on every route', async () => {
      const agent = await server.createAgent();
      const created = await send(
        server.url,
        `/admin/v1/agents/${agent.agentId}/keys`,
        {},
        { token: server.adminToken },
      );
      expect(created.status).toBe(201);
      const { keyId, apiKey } = created.body;
      expect((await postBatch(server.url, apiKey, runBatch().body)).status).toBe(202);
      const revoked = await send(server.url, `/admin/v1/keys/${keyId}`, undefined, {
        method: 'DELETE',
        token: server.adminToken,
      });
      expect(revoked.status).toBe(204);
      const started = Date.now();
      let status = 202;
      while (status === 202 && Date.now() - started < 5_000) {
        status = (await postBatch(server.url, apiKey, runBatch().body)).status;
        if (status === 202) await new Promise((r) => setTimeout(r, 100));
      }
      expect(status).toBe(401);
      const complete = await send(server.url, '/v1/traces/x/complete', undefined, {
        method: 'POST',
        token: apiKey,
      });
      expect(complete.status).toBe(401);
      // the agent's first key is untouched
      expect((await postBatch(server.url, agent.apiKey, runBatch().body)).status).toBe(202);
    });

    it('is refused within the cache ttl when revoked elsewhere (another instance, the CLI)', async () => {
      const agent = await server.createAgent();
      const created = await send(
        server.url,
        `/admin/v1/agents/${agent.agentId}/keys`,
        {},
        { token: server.adminToken },
      );
      const { keyId, apiKey } = created.body;
      // cached as valid by this instance
      expect((await postBatch(server.url, apiKey, runBatch().body)).status).toBe(202);
      // revoked straight in the shared store: this instance's cache does not hear of it
      expect(await server.store.agents.revokeKey(keyId)).toBe(true);
      const revokedAt = Date.now();
      let status = 202;
      while (status === 202 && Date.now() - revokedAt < 5_000) {
        status = (await postBatch(server.url, apiKey, runBatch().body)).status;
        if (status === 202) await new Promise((r) => setTimeout(r, 50));
      }
      expect(status).toBe(401);
      // the cache ttl here is 1 s: refused after about that, not only at the 5 s bound
      expect(Date.now() - revokedAt).toBeLessThan(3_500);
    });
  });

  describe("another agent's ids", () => {
    it('refuses a trace id of another agent without writing anything or showing its data', async () => {
      const victim = runBatch({ events: 1, trace: { inputSummary: 'secret plan' } });
      await postBatch(server.url, alice.apiKey, victim.body);
      const before = await tableCounts(server.store);
      const attack = runBatch({
        trace: { id: victim.trace.id, inputSummary: 'hijacked', eventCount: 99 },
      });
      const res = await postBatch(server.url, mallory.apiKey, attack.body);
      expect(isProblem(res, 409)).toBe(true);
      expect(res.text).not.toContain(alice.agentId);
      expect(res.text).not.toContain('secret plan');
      expect(await tableCounts(server.store)).toEqual(before);
      expect(await storedTrace(server.store, victim.trace.id)).toMatchObject({
        agent_id: alice.agentId,
        input_summary: 'secret plan',
        event_count: 1,
      });
    });

    it('refuses an event id of another agent without touching it', async () => {
      const victim = runBatch({ events: 1 });
      await postBatch(server.url, alice.apiKey, victim.body);
      const mine = traceSnapshot({ eventCount: 1 });
      const stolen = llmCallEvent(mine.id, 0, {
        id: victim.events[0]!.id,
        payload: { forged: true },
      });
      const before = await tableCounts(server.store);
      const res = await postBatch(server.url, mallory.apiKey, {
        batchId: newId(),
        items: [{ trace: mine, events: [stolen] }],
      });
      expect(isProblem(res, 409)).toBe(true);
      expect(res.body.errors).toEqual([
        { pointer: '/items/0/events/0/id', detail: expect.any(String) },
      ]);
      expect(await tableCounts(server.store)).toEqual(before);
      const [kept] = await storedEvents(server.store, victim.trace.id);
      expect(kept).toMatchObject({ agent_id: alice.agentId, payload: victim.events[0]!.payload });
    });

    it('answers the same whether a foreign id exists or a same-agent event id is reused in another trace', async () => {
      const first = runBatch({ events: 1 });
      await postBatch(server.url, alice.apiKey, first.body);
      const other = traceSnapshot({ eventCount: 1 });
      const moved = llmCallEvent(other.id, 0, { id: first.events[0]!.id });
      const res = await postBatch(server.url, alice.apiKey, {
        batchId: newId(),
        items: [{ trace: other, events: [moved] }],
      });
      expect(res.status).toBe(409);
      expect(res.body.detail).toBe('An id in this batch is already used by another trace.');
    });

    it("cannot read another agent's trace through the read API", async () => {
      const victim = runBatch();
      await postBatch(server.url, alice.apiKey, victim.body);
      const token = await server.userToken('mallory-user', mallory.agentId, 'owner');
      const res = await send(server.url, `/v1/traces/${victim.trace.id}`, undefined, { token });
      expect(isProblem(res, 404)).toBe(true);
      const list = await send(server.url, `/v1/agents/${alice.agentId}/traces`, undefined, {
        token,
      });
      expect(isProblem(list, 404)).toBe(true);
    });
  });
});
