import { afterAll, beforeAll, expect, it } from 'vitest';
import { runBatch } from '../fixtures/batches.js';
import { describeEngines } from '../harness/engines.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import { storedEvents, storedTrace, tableCounts } from '../harness/inspect.js';
import { SseClient } from '../harness/sse-client.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';

/*
 * One attacker who holds everything agent A can legitimately have (A's API key, and a user who
 * owns A) goes after agent B by every route. Each refusal must look the same as for something
 * that does not exist, and B's data must come out untouched. The forged-token attacks (alg:none,
 * wrong secret, RS/HS confusion, expiry, issuer, audience) are in auth/identity.test.ts, revoked
 * keys in ingest/batch-security.test.ts, key guessing in auth/api-key-brute-force.test.ts.
 */
describeEngines('one tenant attacking another [%s]', (engine) => {
  let server: TestServer;
  let a: TestAgent;
  let b: TestAgent;
  let ownerOfA: string;
  const victim = runBatch({ events: 2 });

  beforeAll(async () => {
    server = await startTestServer(engine);
    a = await server.createAgent({ name: 'attacker' });
    b = await server.createAgent({ name: 'victim' });
    ownerOfA = await server.userToken('mallory', a.agentId, 'owner');
    expect((await postBatch(server.url, b.apiKey, victim.body)).status).toBe(202);
  });
  afterAll(() => server.close());

  it("the owner of A gets B's traces, trace list, analysis and live stream refused like absent ones", async () => {
    const absentTrace = runBatch().trace.id;
    const cases = [
      [`/v1/traces/${victim.trace.id}`, `/v1/traces/${absentTrace}`],
      [`/v1/agents/${b.agentId}/traces`, '/v1/agents/no-such-agent/traces'],
      [`/v1/traces/${victim.trace.id}/analysis`, `/v1/traces/${absentTrace}/analysis`],
    ] as const;
    for (const [theirs, absent] of cases) {
      const refused = await send(server.url, theirs, undefined, { token: ownerOfA });
      const missing = await send(server.url, absent, undefined, { token: ownerOfA });
      expect(isProblem(refused, 404), `${theirs}: ${refused.text}`).toBe(true);
      expect(refused.status).toBe(missing.status);
      expect(refused.text).not.toContain(victim.trace.inputSummary);
    }
    const stream = await SseClient.open(`${server.url}/v1/agents/${b.agentId}/live`, ownerOfA);
    const absentStream = await SseClient.open(`${server.url}/v1/agents/nobody/live`, ownerOfA);
    expect(stream.status).toBe(403);
    expect(absentStream.status).toBe(403);
    expect(stream.body).not.toContain(victim.trace.id);
  });

  it("A's key cannot complete, overwrite or add events to B's trace, and B's data stays as it was", async () => {
    const before = await tableCounts(server.store);
    const completed = await send(
      server.url,
      `/v1/traces/${victim.trace.id}/complete`,
      {},
      {
        token: a.apiKey,
      },
    );
    expect(isProblem(completed, 404)).toBe(true);

    const overwrite = runBatch({ trace: { ...victim.trace, inputSummary: 'hijacked' } });
    const hijack = await postBatch(server.url, a.apiKey, overwrite.body);
    expect(hijack.status).toBeGreaterThanOrEqual(400);
    expect(hijack.status).toBeLessThan(500);

    const stolenEvent = runBatch({ events: 1 });
    stolenEvent.body.items[0]!.events[0]!.id = victim.events[0]!.id;
    const reuse = await postBatch(server.url, a.apiKey, stolenEvent.body);
    expect(reuse.status).toBeGreaterThanOrEqual(400);
    expect(reuse.status).toBeLessThan(500);

    expect(await tableCounts(server.store)).toEqual(before);
    expect(await storedTrace(server.store, victim.trace.id)).toMatchObject({
      agent_id: b.agentId,
      status: 'running',
      input_summary: victim.trace.inputSummary,
    });
    expect((await storedEvents(server.store, victim.trace.id)).map((e) => e.id)).toEqual(
      victim.events.map((e) => e.id),
    );
  });
});
