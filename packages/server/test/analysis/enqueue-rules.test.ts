import type { Event, Trace, TraceStatus } from '@flightlog/protocol';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { jobsOf } from '../harness/analysis.js';
import { describeEngines } from '../harness/engines.js';
import { postBatch, send } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { newId, runBatch, traceSnapshot } from '../fixtures/batches.js';

/*
 * The spec's state table, row by row, for what it says about the analysis queue: a trace that
 * reaches completed or errored is queued once; running and timeout never are. The batch path
 * queues the first move into completed/errored; the complete endpoint queues every
 * finalisation with completed/errored (a fresh job once the previous one has started).
 */
describeEngines('analysis queue: the state table [%s]', (engine) => {
  let server: TestServer;
  let agent: TestAgent;
  const GRACE_MS = 2_000;
  beforeAll(async () => {
    server = await startTestServer(engine, { analysis: { graceMs: GRACE_MS } });
    agent = await server.createAgent();
  });
  afterAll(() => server.close());

  const batch = (trace: Trace, events: Event[] = [], batchId = newId()) =>
    postBatch(server.url, agent.apiKey, { batchId, items: [{ trace, events }] });
  const complete = (id: string, body?: unknown) =>
    send(server.url, `/v1/traces/${id}/complete`, body, { method: 'POST', token: agent.apiKey });
  const states = async (id: string) => (await jobsOf(server.store, id)).map((j) => j.state);
  const finished = (trace: Trace, status: TraceStatus): Trace => ({
    ...trace,
    status,
    endedAt: '2026-11-01T12:00:05.000Z',
    durationMs: 5_000,
  });

  it.each([
    ['running', []],
    ['timeout', []],
    ['completed', ['pending']],
    ['errored', ['pending']],
  ] as const)('(none) → a new trace sent as %s: queued %j', async (status, expected) => {
    const trace = traceSnapshot({ status });
    expect((await batch(trace)).status).toBe(202);
    expect(await states(trace.id)).toEqual(expected);
  });

  it('a job is runnable ANALYSIS_GRACE_MS after the finalisation, so the last batch lands first', async () => {
    const before = Date.now();
    const trace = traceSnapshot({ status: 'completed' });
    await batch(trace);
    const [job] = await jobsOf(server.store, trace.id);
    expect(job!.run_after.getTime()).toBeGreaterThanOrEqual(before + GRACE_MS - 50);
    expect(job!.run_after.getTime()).toBeLessThanOrEqual(Date.now() + GRACE_MS + 50);
  });

  it('any → a later running snapshot of a running trace: not queued', async () => {
    const { body, trace } = runBatch({ events: 2 });
    await postBatch(server.url, agent.apiKey, body);
    await batch({ ...trace, eventCount: 3 });
    expect(await states(trace.id)).toEqual([]);
  });

  it.each(['completed', 'errored'] as const)(
    'running → %s through the client’s final flush: queued once, however often the flush repeats',
    async (status) => {
      const { body, trace } = runBatch({ events: 2 });
      await postBatch(server.url, agent.apiKey, body);
      const final = finished(trace, status);
      const batchId = newId();
      await batch(final, [], batchId);
      await batch(final, [], batchId); // the same batch again: replayed, no effect
      await batch(final); // another flush with the same final snapshot
      expect(await states(trace.id)).toEqual(['pending']);
    },
  );

  it('timeout → completed through a batch: queued (it reached completed)', async () => {
    const trace = traceSnapshot({ status: 'timeout', eventCount: 1 });
    await batch(trace);
    await batch(finished({ ...trace, eventCount: 2 }, 'completed'));
    expect(await states(trace.id)).toEqual(['pending']);
  });

  it('a stale final snapshot (fewer events than stored) is not applied, so not queued', async () => {
    const { body, trace } = runBatch({ events: 5 });
    await postBatch(server.url, agent.apiKey, body);
    await batch(finished({ ...trace, eventCount: 3 }, 'completed'));
    expect(await states(trace.id)).toEqual([]);
    const [row] = await server.store.sql.query<{ status: string }>(
      'SELECT status FROM traces WHERE id = $1',
      [trace.id],
    );
    expect(row!.status).toBe('running');
  });

  it('a stale running snapshot after the end, and a batch moving errored → completed, queue nothing more', async () => {
    const trace = traceSnapshot({ status: 'errored', eventCount: 1 });
    await batch(trace);
    await server.store.sql.query("UPDATE analysis_jobs SET state = 'done' WHERE trace_id = $1", [
      trace.id,
    ]);
    await batch({ ...trace, status: 'running', eventCount: 2 });
    await batch(finished({ ...trace, eventCount: 2 }, 'completed'));
    expect(await states(trace.id)).toEqual(['done']);
  });

  it.each([
    [undefined, 'completed'],
    [{ status: 'completed' }, 'completed'],
    [{ status: 'errored', errorMessage: 'boom' }, 'errored'],
  ])('any → complete endpoint with %j: %s and queued', async (body, status) => {
    const { body: first, trace } = runBatch();
    await postBatch(server.url, agent.apiKey, first);
    expect((await complete(trace.id, body)).status).toBe(200);
    const [row] = await server.store.sql.query<{ status: string }>(
      'SELECT status FROM traces WHERE id = $1',
      [trace.id],
    );
    expect(row!.status).toBe(status);
    expect(await states(trace.id)).toEqual(['pending']);
  });

  it.each(['running', 'timeout'] as const)(
    'any → complete endpoint with status %s: applied, not queued',
    async (status) => {
      const { body, trace } = runBatch();
      await postBatch(server.url, agent.apiKey, body);
      expect((await complete(trace.id, { status })).status).toBe(200);
      expect(await states(trace.id)).toEqual([]);
    },
  );

  it('re-finalising through the complete endpoint: refreshes a job still waiting, a fresh job once it started or ended', async () => {
    const { body, trace } = runBatch();
    await postBatch(server.url, agent.apiKey, body);
    await complete(trace.id);
    await complete(trace.id, { status: 'errored' });
    expect(await states(trace.id)).toEqual(['pending']);

    // a worker took it: the next finalisation needs an analysis of its own
    await server.store.sql.query(
      "UPDATE analysis_jobs SET state = 'running', attempts = 1 WHERE trace_id = $1",
      [trace.id],
    );
    await complete(trace.id, { status: 'completed' });
    expect(await states(trace.id)).toEqual(['running', 'pending']);

    await server.store.sql.query(
      "UPDATE analysis_jobs SET state = 'done' WHERE trace_id = $1 AND state = 'running'",
      [trace.id],
    );
    await server.store.sql.query(
      "UPDATE analysis_jobs SET state = 'done' WHERE trace_id = $1 AND state = 'pending'",
      [trace.id],
    );
    await complete(trace.id, { status: 'errored' });
    expect(await states(trace.id)).toEqual(['done', 'done', 'pending']);

    // back to running and timeout: no analysis of those
    await complete(trace.id, { status: 'running' });
    await complete(trace.id, { status: 'timeout' });
    expect(await states(trace.id)).toEqual(['done', 'done', 'pending']);
  });

  it('a final batch, then the complete endpoint before any worker: still one pending job', async () => {
    const trace = traceSnapshot({ status: 'completed', eventCount: 1 });
    await batch(trace);
    await complete(trace.id, { status: 'errored', errorMessage: 'late failure' });
    expect(await states(trace.id)).toEqual(['pending']);
  });

  it('a rejected batch (an id of another agent) queues nothing', async () => {
    const other = await server.createAgent();
    const foreign = traceSnapshot({ status: 'running' });
    await postBatch(server.url, other.apiKey, {
      batchId: newId(),
      items: [{ trace: foreign, events: [] }],
    });
    const mine = traceSnapshot({ status: 'completed' });
    const res = await postBatch(server.url, agent.apiKey, {
      batchId: newId(),
      items: [
        { trace: mine, events: [] },
        { trace: { ...foreign, status: 'completed' }, events: [] },
      ],
    });
    expect(res.status).toBe(409);
    expect(await states(mine.id)).toEqual([]);
    expect(await states(foreign.id)).toEqual([]);
  });
});
