import { afterAll, beforeAll, expect, it } from 'vitest';
import { runBatch } from '../fixtures/batches.js';
import { describeEngines } from '../harness/engines.js';
import { isProblem, postBatch, send, type HttpResult } from '../harness/http.js';
import { SseClient } from '../harness/sse-client.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { waitFor } from '../harness/wait.js';

/*
 * Fair admission through the real stack (issue 15): 2 slots, 2 waiting per tenant. A route the
 * test holds open stands for a tenant's slow requests (it takes the tenant named in a header);
 * real batches, streams and admin requests go through the same gate.
 */

describeEngines('fair admission between tenants [%s]', (engine) => {
  let server: TestServer;
  let noisy: TestAgent;
  let quiet: TestAgent;
  const holds: (() => void)[] = [];

  beforeAll(async () => {
    server = await startTestServer(
      engine,
      { admission: { maxInFlight: 2, maxQueuedPerTenant: 2, maxQueued: 16, maxWaitMs: 20_000 } },
      {
        beforeListen: (app) =>
          app.get<{ Headers: { 'x-tenant': string } }>(
            '/test/hold',
            {
              onRequest: async (request) => {
                request.tenant = request.headers['x-tenant'];
              },
            },
            async () => {
              await new Promise<void>((resolve) => holds.push(resolve));
              return { held: true };
            },
          ),
      },
    );
    noisy = await server.createAgent();
    quiet = await server.createAgent();
  });
  afterAll(() => server?.close());

  /** The gate's slots and line, as /metrics shows them (it answers outside the gate). */
  async function gate() {
    const text = (await send(server.url, '/metrics')).text;
    const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
    return {
      inFlight: value('flightlog_admission_in_flight'),
      waiting: value('flightlog_admission_waiting'),
    };
  }

  const until = (check: () => Promise<boolean>, what: string) =>
    waitFor(async () => ((await check()) ? true : undefined), what, 5_000);

  const hold = (tenant: string, signal?: AbortSignal) =>
    fetch(`${server.url}/test/hold`, {
      headers: { 'x-tenant': tenant },
      ...(signal ? { signal } : {}),
    });

  it("serves a tenant holding no slot before another's waiting requests, and refuses past a tenant's line", async () => {
    const answered: string[] = [];
    const track = (label: string, request: Promise<HttpResult>) =>
      request.then((result) => {
        answered.push(label);
        return result;
      });
    // the noisy agent holds both slots
    const held = [hold(`agent:${noisy.agentId}`), hold(`agent:${noisy.agentId}`)];
    await until(async () => (await gate()).inFlight === 2, 'both slots held');
    // its next two batches wait; the third is refused at once, without waiting
    const waiting = [1, 2].map((n) =>
      track(`noisy${n}`, postBatch(server.url, noisy.apiKey, runBatch().body)),
    );
    await until(async () => (await gate()).waiting === 2, 'two batches waiting');
    const refused = await postBatch(server.url, noisy.apiKey, runBatch().body);
    expect(isProblem(refused, 429), refused.text).toBe(true);
    expect(refused.body.type).toBe('urn:flightlog:problem:too-many-requests');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // another agent is not refused: it waits too, behind the noisy agent's batches
    const quietBatch = track('quiet', postBatch(server.url, quiet.apiKey, runBatch().body));
    await until(async () => (await gate()).waiting === 3, "the quiet agent's batch waiting");

    // one slot freed: it goes to the agent holding none, not to the batches that came first
    holds.shift()!();
    expect((await quietBatch).status).toBe(202);
    expect(answered).toEqual(['quiet']);
    // then the noisy agent's, one slot after the other
    holds.shift()!();
    expect((await Promise.all(waiting)).map((r) => r.status)).toEqual([202, 202]);
    expect(answered).toEqual(['quiet', 'noisy1', 'noisy2']);
    await Promise.all(held);
    expect(await gate()).toEqual({ inFlight: 0, waiting: 0 });
  });

  it('takes a request whose client left out of the line, and frees its slot once', async () => {
    const held = [hold('tenant-a'), hold('tenant-a')];
    await until(async () => (await gate()).inFlight === 2, 'both slots held');
    const leaving = new AbortController();
    const left = hold('tenant-b', leaving.signal).catch((error: unknown) => error);
    await until(async () => (await gate()).waiting === 1, 'one waiting');
    leaving.abort();
    await left;
    await until(async () => (await gate()).waiting === 0, 'the line empty again');
    // a held request whose client leaves keeps its slot until its handler answers (its work
    // goes on), then frees it once
    holds.shift()!();
    holds.shift()!();
    await Promise.all(held);
    expect(await gate()).toEqual({ inFlight: 0, waiting: 0 });
    expect((await postBatch(server.url, quiet.apiKey, runBatch().body)).status).toBe(202);
    // answers other than 2xx free their slot too: invalid, not found, forbidden, unauthenticated
    expect((await postBatch(server.url, quiet.apiKey, { items: 'no' })).status).toBe(400);
    const missing = await send(server.url, '/v1/traces/none/complete', {}, { token: quiet.apiKey });
    expect(missing.status).toBe(404);
    const stranger = await server.userToken('stranger-fair');
    const forbidden = await fetch(`${server.url}/v1/agents/${quiet.agentId}/live`, {
      headers: { authorization: `Bearer ${stranger}` },
    });
    expect(forbidden.status).toBe(403);
    expect((await postBatch(server.url, 'not-a-key', runBatch().body)).status).toBe(401);
    expect(await gate()).toEqual({ inFlight: 0, waiting: 0 });
    // what was refused is counted by reason
    const metrics = (await send(server.url, '/metrics')).text;
    expect(metrics).toMatch(/^flightlog_admission_refused_total\{reason="aborted"\} [1-9]/m);
    expect(metrics).toMatch(
      /^flightlog_admission_refused_total\{reason="tenant-queue-full"\} [1-9]/m,
    );
  });

  it('a live stream gives its slot back once set up', async () => {
    const token = await server.userToken('viewer-fair', quiet.agentId);
    const streams = await Promise.all(
      [1, 2, 3].map(() => SseClient.open(`${server.url}/v1/agents/${quiet.agentId}/live`, token)),
    );
    expect(streams.map((s) => s.status)).toEqual([200, 200, 200]);
    expect(await gate()).toEqual({ inFlight: 0, waiting: 0 });
    const batch = runBatch();
    expect((await postBatch(server.url, quiet.apiKey, batch.body)).status).toBe(202);
    await streams[0]!.waitFor(
      (client) => client.traces().some((t) => t.item.trace.id === batch.trace.id),
      5_000,
      'the batch on the stream',
    );
    for (const stream of streams) stream.close();
  });

  it('on close answers waiting requests 503 and leaves nothing behind', async () => {
    const held = [hold('tenant-c'), hold('tenant-c')];
    await until(async () => (await gate()).inFlight === 2, 'both slots held');
    const waiting = postBatch(server.url, quiet.apiKey, runBatch().body);
    await until(async () => (await gate()).waiting === 1, 'one waiting');
    const closed = server.close();
    const answer = await waiting;
    expect(isProblem(answer, 503), answer.text).toBe(true);
    holds.shift()!();
    holds.shift()!();
    await Promise.all(held);
    await closed;
  });
});
