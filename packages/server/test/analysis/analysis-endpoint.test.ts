import { TraceAnalysisSchema, isIsoDateTime } from '@flightlog/protocol';
import { Ajv } from 'ajv';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { getAnalysis, jobsOf, startTestWorker } from '../harness/analysis.js';
import { describeEngines } from '../harness/engines.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { waitFor } from '../harness/wait.js';
import { newId, runBatch } from '../fixtures/batches.js';

describeEngines('GET /v1/traces/:id/analysis [%s]', (engine) => {
  let server: TestServer;
  let agent: TestAgent;
  let viewer: string;
  beforeAll(async () => {
    server = await startTestServer(engine, { analysis: { graceMs: 0 } });
    agent = await server.createAgent();
    viewer = await server.userToken('vic', agent.agentId, 'viewer');
  });
  afterAll(() => server.close());

  async function storedRun(status: 'running' | 'completed' | 'errored' | 'timeout') {
    const { body, trace } = runBatch({ events: 2, trace: { status } });
    expect((await postBatch(server.url, agent.apiKey, body)).status).toBe(202);
    return trace.id;
  }
  const complete = (id: string, body: unknown) =>
    send(server.url, `/v1/traces/${id}/complete`, body, { method: 'POST', token: agent.apiKey });
  // the wire schema, checked strictly (no extra fields, real date-times)
  const ajv = new Ajv({ allErrors: true, strict: false });
  ajv.addFormat('date-time', { type: 'string', validate: isIsoDateTime });
  const valid = ajv.compile(TraceAnalysisSchema);
  const expectShape = (body: unknown) => {
    valid(body);
    expect(valid.errors ?? []).toEqual([]);
  };

  it('pending while queued and while running, with no autopsy yet', async () => {
    const id = await storedRun('completed');
    const queued = await getAnalysis(server.url, viewer, id);
    expect(queued.status).toBe(200);
    expect(queued.headers.get('content-type')).toMatch(/^application\/json/);
    expectShape(queued.body);
    const [job] = await jobsOf(server.store, id);
    expect(queued.body).toEqual({
      status: 'pending',
      autopsy: null,
      analyzer: null,
      createdAt: job!.created_at.toISOString(),
      startedAt: null,
      finishedAt: null,
      durationMs: null,
      attempts: 0,
    });
    await server.store.analysis.claimNext('w', 60_000);
    const running = await getAnalysis(server.url, viewer, id);
    expect(running.body).toMatchObject({ status: 'pending', autopsy: null, attempts: 1 });
    expect(Date.parse(running.body.startedAt)).not.toBeNaN();
    await server.store.sql.query("UPDATE analysis_jobs SET state = 'failed' WHERE trace_id = $1", [
      id,
    ]);
  });

  it('done: the autopsy, the analyzer and the timings; any role may read it', async () => {
    const worker = startTestWorker(server.store);
    try {
      const id = await storedRun('errored');
      const body = await waitFor(async () => {
        const res = await getAnalysis(server.url, viewer, id);
        return res.body.status === 'done' ? res.body : undefined;
      }, 'done');
      expectShape(body);
      expect(body).toMatchObject({ status: 'done', analyzer: 'heuristic', attempts: 1 });
      expect(body.autopsy).toMatch(/^## Verdict: failed/);
      expect(body.durationMs).toBeGreaterThanOrEqual(0);
      expect(Date.parse(body.finishedAt)).toBeGreaterThanOrEqual(Date.parse(body.startedAt));
      expect(Date.parse(body.startedAt)).toBeGreaterThanOrEqual(Date.parse(body.createdAt));
      for (const role of ['owner', 'editor'] as const) {
        const token = await server.userToken(`${role}-${newId()}`, agent.agentId, role);
        expect((await getAnalysis(server.url, token, id)).body).toEqual(body);
      }

      // re-finalised: the analysis of the latest finalisation, pending again, then done again
      expect((await complete(id, { status: 'completed' })).status).toBe(200);
      const again = await getAnalysis(server.url, viewer, id);
      // never the old autopsy for the new finalisation: pending, or (a fast worker) the new one
      expect(Date.parse(again.body.createdAt)).toBeGreaterThan(Date.parse(body.createdAt));
      if (again.body.status === 'pending') expect(again.body.autopsy).toBeNull();
      else expect(again.body.autopsy).toMatch(/^## Verdict: succeeded/);
      const redone = await waitFor(async () => {
        const res = await getAnalysis(server.url, viewer, id);
        return res.body.status === 'done' ? res.body : undefined;
      }, 'done again');
      expect(redone.autopsy).toMatch(/^## Verdict: succeeded/);
      expect(Date.parse(redone.createdAt)).toBeGreaterThan(Date.parse(body.createdAt));
    } finally {
      await worker.stop(5_000);
    }
  });

  it('failed: the last error', async () => {
    const id = await storedRun('completed');
    const { job } = await server.store.analysis.claimNext('w', 60_000);
    expect(job?.traceId).toBe(id);
    await server.store.analysis.fail(job!, 'Error: it broke', { maxAttempts: 1, backoffMs: 0 });
    const res = await getAnalysis(server.url, viewer, id);
    expectShape(res.body);
    expect(res.body).toMatchObject({
      status: 'failed',
      autopsy: null,
      analyzer: null,
      attempts: 1,
      error: 'Error: it broke',
    });
  });

  it.each(['running', 'timeout'] as const)(
    '404 for a visible %s trace that was never queued, saying it has not finished',
    async (status) => {
      const id = await storedRun(status);
      const res = await getAnalysis(server.url, viewer, id);
      expect(isProblem(res, 404)).toBe(true);
      expect(res.body.detail).toBe(
        `No analysis: the trace is ${status} and has not finished. A trace is analysed once it is completed or errored.`,
      );
    },
  );

  it('404 exactly as GET /v1/traces/:id for a trace the user may not see, or that does not exist', async () => {
    const id = await storedRun('completed');
    const other = await server.createAgent();
    const outsider = await server.userToken('out', other.agentId, 'owner');
    const hidden = await getAnalysis(server.url, outsider, id);
    const missing = await getAnalysis(server.url, viewer, '01JNOSUCHTRACE0000000000000');
    const traceRead = await send(server.url, `/v1/traces/${id}`, undefined, { token: outsider });
    for (const res of [hidden, missing, traceRead]) expect(isProblem(res, 404)).toBe(true);
    expect(hidden.body.detail).toBe(traceRead.body.detail);
    expect(missing.body.detail).toBe(traceRead.body.detail);
  });

  it('401 without a valid identity token; an agent API key is not one', async () => {
    const id = await storedRun('completed');
    for (const token of [undefined, 'not-a-jwt', agent.apiKey]) {
      const res = await getAnalysis(server.url, token as string, id);
      expect(isProblem(res, 401)).toBe(true);
    }
  });

  it('is described in the OpenAPI document', async () => {
    const res = await send(server.url, '/openapi.json');
    const operation = res.body.paths['/v1/traces/{id}/analysis'].get;
    expect(Object.keys(operation.responses)).toEqual(['200', '401', '404']);
    expect(
      operation.responses['200'].content['application/json'].schema.properties.status.enum,
    ).toEqual(['pending', 'done', 'failed']);
  });
});
