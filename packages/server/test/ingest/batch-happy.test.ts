import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEngines } from '../harness/engines.js';
import { postBatch, send } from '../harness/http.js';
import { analysisJobs, storedEvents, storedTrace, tableCounts } from '../harness/inspect.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { llmCallEvent, newId, runBatch, traceSnapshot } from '../fixtures/batches.js';

describeEngines('POST /v1/traces/batch, accepted [%s]', (engine) => {
  let server: TestServer;
  let agent: TestAgent;
  let reader: string;
  beforeAll(async () => {
    server = await startTestServer(engine);
    agent = await server.createAgent();
    reader = await server.userToken('reader', agent.agentId);
  });
  afterAll(() => server.close());

  const readTrace = (id: string) =>
    send(server.url, `/v1/traces/${id}`, undefined, { token: reader });

  it('answers 202 {traceId} for a plain JSON body and stores trace and events', async () => {
    const { body, trace } = runBatch({ events: 3 });
    const res = await postBatch(server.url, agent.apiKey, body);
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ traceId: trace.id });
    const read = await readTrace(trace.id);
    expect(read.status).toBe(200);
    expect(read.body.trace.inputSummary).toBe(trace.inputSummary);
    expect(read.body.events.map((e: { sequence: number }) => e.sequence)).toEqual([0, 1, 2]);
    expect(read.body.events[0].payload).toEqual(body.items[0]?.events[0]?.payload);
  });

  it('accepts a gzip-compressed body the same way', async () => {
    const { body, trace } = runBatch({ events: 2 });
    const res = await postBatch(server.url, agent.apiKey, body, { gzip: true });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ traceId: trace.id });
    expect(await storedEvents(server.store, trace.id)).toHaveLength(2);
  });

  it('answers with the first item trace id when a batch holds several traces', async () => {
    const first = traceSnapshot();
    const second = traceSnapshot();
    const res = await postBatch(server.url, agent.apiKey, {
      batchId: newId(),
      items: [
        { trace: first, events: [] },
        { trace: second, events: [] },
      ],
    });
    expect(res.body).toEqual({ traceId: first.id });
    expect(await storedTrace(server.store, second.id)).toBeDefined();
  });

  it('keeps the newest of several snapshots of one trace in one batch, and all their events', async () => {
    const { trace, events } = runBatch({ events: 1 });
    const newer = { ...trace, eventCount: 2, outputSummary: 'newest' };
    const older = { ...trace, eventCount: 1, outputSummary: 'older' };
    const second = llmCallEvent(trace.id, 1);
    const res = await postBatch(server.url, agent.apiKey, {
      batchId: newId(),
      items: [
        { trace: newer, events },
        { trace: older, events: [second] },
      ],
    });
    expect(res.status).toBe(202);
    expect(await storedTrace(server.store, trace.id)).toMatchObject({
      event_count: 2,
      output_summary: 'newest',
    });
    expect(await storedEvents(server.store, trace.id)).toHaveLength(2);
  });

  it('writes the agent of the API key over trace.agentId, whatever was sent', async () => {
    const { body, trace } = runBatch({ trace: { agentId: 'someone-else' } });
    await postBatch(server.url, agent.apiKey, body);
    expect((await storedTrace(server.store, trace.id))?.agent_id).toBe(agent.agentId);
    expect((await readTrace(trace.id)).body.trace.agentId).toBe(agent.agentId);
  });

  it('stores decimal strings exactly, including lamports above 2^64', async () => {
    const lamports = '36893488147419103232123'; // > 2^64 = 18446744073709551616
    const { body, trace } = runBatch({
      trace: {
        totalLamports: lamports,
        totalCostUsd: '0.000100',
        anchorSlot: '18446744073709551617',
      },
    });
    await postBatch(server.url, agent.apiKey, body);
    const read = await readTrace(trace.id);
    expect(read.body.trace.totalLamports).toBe(lamports);
    expect(read.body.trace.totalCostUsd).toBe('0.000100');
    // the proof fields are the server's (filled when the run is anchored): a client's are not kept
    expect(read.body.trace.anchorSlot).toBeNull();
  });

  it('returns timestamps at the edges of years 0001 to 9999 exactly, in UTC', async () => {
    const { body, trace } = runBatch({
      trace: { startedAt: '0001-01-01T01:30:00.000+01:30', endedAt: '9999-12-31T23:59:59.999Z' },
    });
    body.items[0]!.events[0]!.startedAt = '0049-06-15T08:00:00.123456Z';
    body.items[0]!.events[0]!.endedAt = '0099-12-31T23:59:59Z';
    expect((await postBatch(server.url, agent.apiKey, body)).status).toBe(202);
    const read = await readTrace(trace.id);
    expect(read.status).toBe(200);
    expect(read.body.trace.startedAt).toBe('0001-01-01T00:00:00.000Z');
    expect(read.body.trace.endedAt).toBe('9999-12-31T23:59:59.999Z');
    expect(read.body.events[0].startedAt).toBe('0049-06-15T08:00:00.123Z');
    expect(read.body.events[0].endedAt).toBe('0099-12-31T23:59:59.000Z');
  });

  it('keeps payloads as sent, including characters PostgreSQL text cannot hold', async () => {
    const { body, trace } = runBatch();
    const event = body.items[0]!.events[0]!;
    event.payload = { name: 'binary', data: 'a\u0000b', nested: { deep: [1, 'two', null] } };
    event.type = 'custom';
    await postBatch(server.url, agent.apiKey, body);
    const [stored] = await storedEvents(server.store, trace.id);
    expect(stored?.payload).toEqual(event.payload);
  });

  it('upserts on trace id: a later snapshot overwrites the earlier one', async () => {
    const { body, trace } = runBatch({ events: 1 });
    await postBatch(server.url, agent.apiKey, body);
    const later = {
      ...trace,
      eventCount: 2,
      totalTokens: 80,
      outputSummary: 'halfway',
      tags: ['test', 'second'],
    };
    const res = await postBatch(server.url, agent.apiKey, {
      batchId: newId(),
      items: [{ trace: later, events: [llmCallEvent(trace.id, 1)] }],
    });
    expect(res.status).toBe(202);
    const read = await readTrace(trace.id);
    expect(read.body.trace).toMatchObject({
      eventCount: 2,
      totalTokens: 80,
      outputSummary: 'halfway',
      tags: ['test', 'second'],
    });
    expect(read.body.events).toHaveLength(2);
  });

  it('keeps a newer stored snapshot when an older one arrives late, but stores its events', async () => {
    const { body, trace } = runBatch({
      events: 0,
      trace: { eventCount: 5, outputSummary: 'newest' },
    });
    await postBatch(server.url, agent.apiKey, body);
    const stale = { ...trace, eventCount: 3, outputSummary: 'older' };
    const lateEvent = llmCallEvent(trace.id, 2);
    const res = await postBatch(server.url, agent.apiKey, {
      batchId: newId(),
      items: [{ trace: stale, events: [lateEvent] }],
    });
    expect(res.status).toBe(202);
    const stored = await storedTrace(server.store, trace.id);
    expect(stored).toMatchObject({ event_count: 5, output_summary: 'newest' });
    expect((await storedEvents(server.store, trace.id)).map((e) => e.id)).toEqual([lateEvent.id]);
  });

  it('does not move a finished trace back to running', async () => {
    const { body, trace } = runBatch({
      trace: { status: 'completed', endedAt: '2026-11-01T12:00:05.000Z', durationMs: 5000 },
    });
    await postBatch(server.url, agent.apiKey, body);
    await postBatch(server.url, agent.apiKey, {
      batchId: newId(),
      items: [
        { trace: { ...trace, status: 'running', endedAt: null, durationMs: null }, events: [] },
      ],
    });
    expect((await storedTrace(server.store, trace.id))?.status).toBe('completed');
  });

  it('stores a re-sent event once, updated in place', async () => {
    const { body, trace, events } = runBatch({ events: 1 });
    await postBatch(server.url, agent.apiKey, body);
    const resent = { ...events[0]!, status: 'error' as const, errorMessage: 'timed out' };
    await postBatch(server.url, agent.apiKey, {
      batchId: newId(),
      items: [{ trace, events: [resent] }],
    });
    const read = await readTrace(trace.id);
    expect(read.body.events).toHaveLength(1);
    expect(read.body.events[0]).toMatchObject({ status: 'error', errorMessage: 'timed out' });
  });

  describe('repeated batchId', () => {
    it('answers 202 with the original traceId and changes nothing', async () => {
      const { body, trace } = runBatch({ events: 2 });
      const first = await postBatch(server.url, agent.apiKey, body);
      const before = await tableCounts(server.store);
      const changed = { ...body, items: [{ trace: { ...trace, id: newId() }, events: [] }] };
      const again = await postBatch(server.url, agent.apiKey, changed, { gzip: true });
      expect(again.status).toBe(202);
      expect(again.body).toEqual(first.body);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(await tableCounts(server.store)).toEqual(before);
    });

    it('is per agent: another agent may use the same batchId', async () => {
      const other = await server.createAgent();
      const shared = newId();
      const a = runBatch({ batch: { batchId: shared } });
      const b = runBatch({ batch: { batchId: shared } });
      expect((await postBatch(server.url, agent.apiKey, a.body)).body).toEqual({
        traceId: a.trace.id,
      });
      expect((await postBatch(server.url, other.apiKey, b.body)).body).toEqual({
        traceId: b.trace.id,
      });
      expect(await storedTrace(server.store, b.trace.id)).toBeDefined();
    });

    it('stores a batch exactly once when the same batch is sent concurrently', async () => {
      const { body, trace } = runBatch({ events: 5 });
      const results = await Promise.all(
        Array.from({ length: 6 }, () => postBatch(server.url, agent.apiKey, body)),
      );
      expect(results.map((r) => r.status)).toEqual(Array(6).fill(202));
      expect(results.every((r) => r.body.traceId === trace.id)).toBe(true);
      expect(results.filter((r) => r.headers.get('idempotent-replayed') === null)).toHaveLength(1);
      expect(await storedEvents(server.store, trace.id)).toHaveLength(5);
    });
  });

  describe('analysis queue', () => {
    it('queues a trace that reaches completed or errored through a batch, once', async () => {
      for (const status of ['completed', 'errored'] as const) {
        const { body, trace } = runBatch();
        await postBatch(server.url, agent.apiKey, body);
        expect(await analysisJobs(server.store, trace.id)).toEqual([]);
        const final = { ...trace, status, endedAt: '2026-11-01T12:00:03.000Z', durationMs: 3000 };
        await postBatch(server.url, agent.apiKey, {
          batchId: newId(),
          items: [{ trace: final, events: [] }],
        });
        // the client's final flush may be followed by a duplicate of it: still one job
        await postBatch(server.url, agent.apiKey, {
          batchId: newId(),
          items: [{ trace: final, events: [] }],
        });
        expect(await analysisJobs(server.store, trace.id)).toEqual([{ state: 'pending' }]);
        // once the worker has taken the job, a late copy of the final snapshot queues no second
        // analysis: the trace was already finished (the one-pending index would not stop this)
        await server.store.sql.query(
          "UPDATE analysis_jobs SET state = 'done' WHERE trace_id = $1",
          [trace.id],
        );
        await postBatch(server.url, agent.apiKey, {
          batchId: newId(),
          items: [{ trace: { ...final, eventCount: 2 }, events: [] }],
        });
        expect(await analysisJobs(server.store, trace.id)).toEqual([{ state: 'done' }]);
      }
    });

    it('does not queue running or timeout traces', async () => {
      for (const status of ['running', 'timeout'] as const) {
        const { body, trace } = runBatch({ trace: { status } });
        await postBatch(server.url, agent.apiKey, body);
        expect(await analysisJobs(server.store, trace.id)).toEqual([]);
      }
    });
  });

  describe('verify token', () => {
    it('is consumed with agentId on the first batch, marks the agent verified, and is single use', async () => {
      const fresh = await server.createAgent();
      const first = runBatch({ batch: { agentId: fresh.agentId, verifyToken: fresh.verifyToken } });
      const res = await postBatch(server.url, fresh.apiKey, first.body);
      expect(res.status).toBe(202);
      expect(res.headers.get('flightlog-verify')).toBe('verified');
      const agentView = await send(server.url, `/admin/v1/agents/${fresh.agentId}`, undefined, {
        token: server.adminToken,
      });
      expect(agentView.body.verifiedAt).toEqual(expect.any(String));

      const reused = runBatch({
        batch: { agentId: fresh.agentId, verifyToken: fresh.verifyToken },
      });
      const again = await postBatch(server.url, fresh.apiKey, reused.body);
      expect(again.status).toBe(202);
      expect(again.headers.get('flightlog-verify')).toBe('rejected');
      expect(await storedTrace(server.store, reused.trace.id)).toBeDefined();
    });

    it('is rejected (batch still stored) when it is wrong or names another agent', async () => {
      const fresh = await server.createAgent();
      const wrong = runBatch({
        batch: { agentId: fresh.agentId, verifyToken: 'flv_not-the-token' },
      });
      const res = await postBatch(server.url, fresh.apiKey, wrong.body);
      expect(res.status).toBe(202);
      expect(res.headers.get('flightlog-verify')).toBe('rejected');
      expect(await storedTrace(server.store, wrong.trace.id)).toBeDefined();

      const mismatch = runBatch({
        batch: { agentId: agent.agentId, verifyToken: fresh.verifyToken },
      });
      const res2 = await postBatch(server.url, fresh.apiKey, mismatch.body);
      expect(res2.headers.get('flightlog-verify')).toBe('rejected');
      const view = await send(server.url, `/admin/v1/agents/${fresh.agentId}`, undefined, {
        token: server.adminToken,
      });
      expect(view.body.verifiedAt).toBeNull();
      // the token was not spent by the mismatched attempt
      const right = runBatch({ batch: { agentId: fresh.agentId, verifyToken: fresh.verifyToken } });
      expect(
        (await postBatch(server.url, fresh.apiKey, right.body)).headers.get('flightlog-verify'),
      ).toBe('verified');
    });

    it('is consumed once when two batches carry it at the same time', async () => {
      const fresh = await server.createAgent();
      const batches = [1, 2, 3].map(
        () => runBatch({ batch: { agentId: fresh.agentId, verifyToken: fresh.verifyToken } }).body,
      );
      const answers = await Promise.all(batches.map((b) => postBatch(server.url, fresh.apiKey, b)));
      expect(answers.map((a) => a.status)).toEqual([202, 202, 202]);
      expect(answers.map((a) => a.headers.get('flightlog-verify')).sort()).toEqual([
        'rejected',
        'rejected',
        'verified',
      ]);
    });

    it('costs nothing when the body agentId is free text, as the spec ignores it', async () => {
      const fresh = await server.createAgent();
      const named = runBatch({ batch: { agentId: 'My swap bot (prod)' } });
      const res = await postBatch(server.url, fresh.apiKey, named.body);
      expect(res.status).toBe(202);
      expect(res.headers.get('flightlog-verify')).toBeNull();
      const withToken = runBatch({
        batch: { agentId: 'My swap bot (prod)', verifyToken: fresh.verifyToken },
      });
      const res2 = await postBatch(server.url, fresh.apiKey, withToken.body);
      expect(res2.status).toBe(202);
      expect(res2.headers.get('flightlog-verify')).toBe('rejected');
      expect(await storedTrace(server.store, withToken.trace.id)).toBeDefined();
    });

    it('is ignored without agentId', async () => {
      const fresh = await server.createAgent();
      const { body } = runBatch({ batch: { verifyToken: fresh.verifyToken } });
      const res = await postBatch(server.url, fresh.apiKey, body);
      expect(res.status).toBe(202);
      expect(res.headers.get('flightlog-verify')).toBe('ignored');
      const view = await send(server.url, `/admin/v1/agents/${fresh.agentId}`, undefined, {
        token: server.adminToken,
      });
      expect(view.body.verifiedAt).toBeNull();
    });
  });
});
