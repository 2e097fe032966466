import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeEngines } from '../harness/engines.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import { analysisJobs, storedTrace } from '../harness/inspect.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { runBatch } from '../fixtures/batches.js';

describeEngines('POST /v1/traces/:id/complete [%s]', (engine) => {
  let server: TestServer;
  let agent: TestAgent;
  beforeAll(async () => {
    server = await startTestServer(engine);
    agent = await server.createAgent();
  });
  afterAll(() => server.close());

  /** A stored running trace that started `ago` ms before now. */
  async function runningTrace(ago = 60_000, extra: Parameters<typeof runBatch>[0] = {}) {
    const { body, trace } = runBatch({
      ...extra,
      trace: { startedAt: new Date(Date.now() - ago).toISOString(), ...extra.trace },
    });
    expect((await postBatch(server.url, agent.apiKey, body)).status).toBe(202);
    return trace;
  }
  const complete = (id: string, body?: unknown, key = agent.apiKey) =>
    send(server.url, `/v1/traces/${id}/complete`, body, { method: 'POST', token: key });

  it('with no body: completed, endedAt = server time, duration computed, queued for analysis', async () => {
    const trace = await runningTrace(60_000);
    const before = Date.now();
    const res = await complete(trace.id);
    const after = Date.now();
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ traceId: trace.id });
    const stored = await storedTrace(server.store, trace.id);
    expect(stored?.status).toBe('completed');
    const endedAt = (stored?.ended_at as Date).getTime();
    expect(endedAt).toBeGreaterThanOrEqual(before - 5);
    expect(endedAt).toBeLessThanOrEqual(after + 5);
    // PostgreSQL keeps microseconds; the Date read back has milliseconds
    expect(
      Math.abs((stored?.duration_ms as number) - (endedAt - Date.parse(trace.startedAt))),
    ).toBeLessThan(1);
    expect(await analysisJobs(server.store, trace.id)).toEqual([{ state: 'pending' }]);
  });

  it('with an empty JSON object: the same defaults', async () => {
    const trace = await runningTrace();
    expect((await complete(trace.id, {})).status).toBe(200);
    expect((await storedTrace(server.store, trace.id))?.status).toBe('completed');
  });

  it('applies every body field: status, outputSummary, errorMessage, endedAt', async () => {
    const trace = await runningTrace(0, { trace: { startedAt: '2026-11-01T12:00:00.000Z' } });
    const res = await complete(trace.id, {
      status: 'errored',
      outputSummary: 'Swapped half before the RPC failed',
      errorMessage: 'RPC 429',
      endedAt: '2026-11-01T12:00:02.500Z',
    });
    expect(res.status).toBe(200);
    expect(await storedTrace(server.store, trace.id)).toMatchObject({
      status: 'errored',
      output_summary: 'Swapped half before the RPC failed',
      error_message: 'RPC 429',
      duration_ms: 2500,
    });
    expect(await analysisJobs(server.store, trace.id)).toEqual([{ state: 'pending' }]);
  });

  it('leaves absent summary fields unchanged and clears them with null', async () => {
    const trace = await runningTrace(1000, {
      trace: { outputSummary: 'kept', errorMessage: 'old error' },
    });
    await complete(trace.id, { errorMessage: null });
    expect(await storedTrace(server.store, trace.id)).toMatchObject({
      output_summary: 'kept',
      error_message: null,
    });
    await complete(trace.id, { outputSummary: null });
    expect((await storedTrace(server.store, trace.id))?.output_summary).toBeNull();
  });

  it.each(['running', 'timeout'] as const)(
    'status %s applies the fields but does not queue analysis',
    async (status) => {
      const trace = await runningTrace();
      expect((await complete(trace.id, { status, outputSummary: 'stopped' })).status).toBe(200);
      const stored = await storedTrace(server.store, trace.id);
      expect(stored).toMatchObject({ status, output_summary: 'stopped' });
      // endedAt defaults to now and the duration is computed, as for the other statuses
      expect(Math.abs((stored?.ended_at as Date).getTime() - Date.now())).toBeLessThan(5_000);
      expect(stored?.duration_ms).toBeGreaterThanOrEqual(60_000);
      expect(await analysisJobs(server.store, trace.id)).toEqual([]);
    },
  );

  it('answers 400 when endedAt is before startedAt, and changes nothing', async () => {
    const trace = await runningTrace(0, { trace: { startedAt: '2026-11-01T12:00:00.000Z' } });
    const res = await complete(trace.id, { endedAt: '2026-11-01T11:59:59.999Z' });
    expect(isProblem(res, 400)).toBe(true);
    expect(res.body.errors).toEqual([{ pointer: '/endedAt', detail: expect.any(String) }]);
    expect((await storedTrace(server.store, trace.id))?.status).toBe('running');
  });

  it('with no body completes a trace whose startedAt is ahead of the server clock (duration 0)', async () => {
    // an agent whose clock runs 30 s fast: "now" on the server is before its startedAt
    const trace = await runningTrace(-30_000);
    const res = await complete(trace.id);
    expect(res.status).toBe(200);
    const stored = await storedTrace(server.store, trace.id);
    expect(stored?.status).toBe('completed');
    expect((stored?.ended_at as Date).toISOString()).toBe(trace.startedAt);
    expect(stored?.duration_ms).toBe(0);
  });

  it.each([
    [{ status: 'finished' }, '/status'],
    [{ endedAt: 'yesterday' }, '/endedAt'],
    [{ endedAt: null }, '/endedAt'],
    [{ outputSummary: 5 }, '/outputSummary'],
    [{ colour: 'red' }, '/colour'],
  ])('answers 400 for an invalid body %j', async (body, pointer) => {
    const trace = await runningTrace();
    const res = await complete(trace.id, body);
    expect(isProblem(res, 400)).toBe(true);
    expect(res.body.errors.map((e: { pointer: string }) => e.pointer)).toContain(pointer);
  });

  it('answers 404 for a trace that does not exist', async () => {
    const res = await complete('01JNOSUCHTRACE0000000000000');
    expect(isProblem(res, 404)).toBe(true);
  });

  it("answers 404, never 403, for another agent's trace, and leaves it alone", async () => {
    const trace = await runningTrace();
    const other = await server.createAgent();
    const res = await complete(trace.id, { status: 'errored' }, other.apiKey);
    expect(isProblem(res, 404)).toBe(true);
    const missing = await complete('01JNOSUCHTRACE0000000000000', undefined, other.apiKey);
    expect(res.body.detail).toBe(missing.body.detail);
    expect((await storedTrace(server.store, trace.id))?.status).toBe('running');
  });

  it('re-finalising queues one fresh analysis, not a second pending one', async () => {
    const trace = await runningTrace();
    await complete(trace.id);
    await complete(trace.id, { status: 'errored', errorMessage: 'late failure' });
    expect(await analysisJobs(server.store, trace.id)).toEqual([{ state: 'pending' }]);
  });
});
