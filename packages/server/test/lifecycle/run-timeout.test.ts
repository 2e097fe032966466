import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEngines } from '../harness/engines.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import { analysisJobs, storedTrace } from '../harness/inspect.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { at, llmCallEvent, newId, runBatch, traceSnapshot } from '../fixtures/batches.js';
import { loadConfig } from '../../src/config.js';
import type { LiveMessage } from '../../src/live/live-bus.js';

const HOUR = 3_600_000;

describeEngines('abandoned runs end as timeout [%s]', (engine) => {
  let server: TestServer;
  let agent: TestAgent;
  beforeAll(async () => {
    server = await startTestServer(engine, {
      // the sweeper runs when the test says (sweep()), with the default time-out of 1 h
      lifecycle: { ...loadConfig({}).lifecycle, sweepIntervalMs: 0 },
    });
    agent = await server.createAgent();
  });
  afterAll(() => server.close());

  /** Makes a run look as if its last batch came `ms` ago. */
  const idle = (traceId: string, ms: number) =>
    server.store.sql.query(
      `UPDATE traces SET updated_at = now() - $2::bigint * interval '1 millisecond' WHERE id = $1`,
      [traceId, ms],
    );

  async function runningRun(key = agent.apiKey, events = 3) {
    const run = runBatch({ events });
    expect((await postBatch(server.url, key, run.body)).status).toBe(202);
    return run;
  }

  const admin = (method: string, path: string, body?: unknown) =>
    send(server.url, path, body, { method, token: server.adminToken });

  const traceMessages = async (agentId: string, traceId: string) =>
    (await server.bus.replay(agentId)).messages
      .map((m: LiveMessage) => JSON.parse(m.data) as { trace: { id: string; status: string } })
      .filter((item) => item.trace.id === traceId);

  it('a run idle past RUN_TIMEOUT_MS becomes timeout: endedAt its last activity, duration, live message, no analysis', async () => {
    // events 0..2 end at +0.8 s, +1.8 s, +2.8 s (fixtures): the last activity is +2.8 s
    const run = await runningRun();
    await idle(run.trace.id, HOUR + 60_000);
    const report = await server.lifecycle.sweep();
    expect(report.timedOut).toBeGreaterThanOrEqual(1);
    const stored = await storedTrace(server.store, run.trace.id);
    expect(stored?.status).toBe('timeout');
    expect((stored?.ended_at as Date).toISOString()).toBe(at(2_800));
    expect(stored?.duration_ms).toBe(2_800);
    expect(await analysisJobs(server.store, run.trace.id)).toEqual([]);
    const messages = await traceMessages(agent.agentId, run.trace.id);
    expect(messages.at(-1)).toMatchObject({
      trace: { id: run.trace.id, status: 'timeout', endedAt: at(2_800), durationMs: 2_800 },
      events: [],
    });
  });

  it('a run without events ends at its start (duration 0)', async () => {
    const run = await runningRun(agent.apiKey, 0);
    await idle(run.trace.id, HOUR + 1);
    await server.lifecycle.sweep();
    const stored = await storedTrace(server.store, run.trace.id);
    expect(stored?.status).toBe('timeout');
    expect((stored?.ended_at as Date).toISOString()).toBe(run.trace.startedAt);
    expect(stored?.duration_ms).toBe(0);
  });

  it('leaves runs with a recent batch and finished runs alone', async () => {
    const recent = await runningRun();
    await idle(recent.trace.id, HOUR - 60_000);
    const finished = runBatch({
      trace: { status: 'completed', endedAt: at(5_000), durationMs: 5_000 },
    });
    expect((await postBatch(server.url, agent.apiKey, finished.body)).status).toBe(202);
    await idle(finished.trace.id, 10 * HOUR);
    await server.lifecycle.sweep();
    expect((await storedTrace(server.store, recent.trace.id))?.status).toBe('running');
    expect(await storedTrace(server.store, finished.trace.id)).toMatchObject({
      status: 'completed',
      duration_ms: 5_000,
    });
  });

  it("an agent's own time-out wins: 0 never, longer later, shorter sooner", async () => {
    const never = await server.createAgent();
    const longer = await server.createAgent();
    const shorter = await server.createAgent();
    for (const [who, runTimeoutMs] of [
      [never, 0],
      [longer, 3 * HOUR],
      [shorter, 60_000],
    ] as const) {
      const res = await admin('PATCH', `/admin/v1/agents/${who.agentId}/lifecycle`, {
        runTimeoutMs,
      });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        agentId: who.agentId,
        runTimeoutMs,
        retentionDays: null,
        effective: { runTimeoutMs: runTimeoutMs === 0 ? null : runTimeoutMs, retentionDays: null },
      });
    }
    const runs = {
      never: await runningRun(never.apiKey),
      longer: await runningRun(longer.apiKey),
      shorter: await runningRun(shorter.apiKey),
    };
    await idle(runs.never.trace.id, 100 * HOUR);
    await idle(runs.longer.trace.id, 2 * HOUR);
    await idle(runs.shorter.trace.id, 2 * 60_000);
    await server.lifecycle.sweep();
    expect((await storedTrace(server.store, runs.never.trace.id))?.status).toBe('running');
    expect((await storedTrace(server.store, runs.longer.trace.id))?.status).toBe('running');
    expect((await storedTrace(server.store, runs.shorter.trace.id))?.status).toBe('timeout');
    await idle(runs.longer.trace.id, 3 * HOUR + 1_000);
    await server.lifecycle.sweep();
    expect((await storedTrace(server.store, runs.longer.trace.id))?.status).toBe('timeout');
    // back to the default
    const reset = await admin('PATCH', `/admin/v1/agents/${never.agentId}/lifecycle`, {
      runTimeoutMs: null,
    });
    expect(reset.body).toEqual({
      agentId: never.agentId,
      runTimeoutMs: null,
      retentionDays: null,
      effective: { runTimeoutMs: HOUR, retentionDays: null },
    });
    await server.lifecycle.sweep();
    expect((await storedTrace(server.store, runs.never.trace.id))?.status).toBe('timeout');
  });

  it('walks any number of idle runs, a step of LIFECYCLE_SWEEP_ROWS at a time', async () => {
    const small = await startTestServer(engine, {
      lifecycle: { ...loadConfig({}).lifecycle, sweepIntervalMs: 0, sweepRows: 10 },
    });
    try {
      const other = await small.createAgent();
      const body = {
        batchId: newId(),
        items: Array.from({ length: 35 }, () => ({ trace: traceSnapshot(), events: [] })),
      };
      expect((await postBatch(small.url, other.apiKey, body)).status).toBe(202);
      await small.store.sql.query(
        `UPDATE traces SET updated_at = now() - interval '2 hours' WHERE agent_id = $1`,
        [other.agentId],
      );
      expect((await small.lifecycle.sweep()).timedOut).toBe(35);
      const [row] = await small.store.sql.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM traces WHERE agent_id = $1 AND status = 'timeout'`,
        [other.agentId],
      );
      expect(row?.n).toBe(35);
    } finally {
      await small.close();
    }
  });

  describe('a late batch for a run the sweeper ended', () => {
    it('running: the run is running again, with the new snapshot and events', async () => {
      const run = await runningRun();
      await idle(run.trace.id, 2 * HOUR);
      await server.lifecycle.sweep();
      expect((await storedTrace(server.store, run.trace.id))?.status).toBe('timeout');
      const late = {
        batchId: newId(),
        items: [
          {
            trace: { ...run.trace, eventCount: 4 },
            events: [llmCallEvent(run.trace.id, 3)],
          },
        ],
      };
      expect((await postBatch(server.url, agent.apiKey, late)).status).toBe(202);
      expect(await storedTrace(server.store, run.trace.id)).toMatchObject({
        status: 'running',
        ended_at: null,
        duration_ms: null,
        event_count: 4,
      });
      expect((await traceMessages(agent.agentId, run.trace.id)).at(-1)?.trace.status).toBe(
        'running',
      );
      // and it can time out again
      await idle(run.trace.id, 2 * HOUR);
      await server.lifecycle.sweep();
      expect((await storedTrace(server.store, run.trace.id))?.status).toBe('timeout');
    });

    it('completed: finished as sent and queued for analysis', async () => {
      const run = await runningRun();
      await idle(run.trace.id, 2 * HOUR);
      await server.lifecycle.sweep();
      const final = {
        batchId: newId(),
        items: [
          {
            trace: {
              ...run.trace,
              status: 'completed' as const,
              endedAt: at(9_000),
              durationMs: 9_000,
            },
            events: [],
          },
        ],
      };
      expect((await postBatch(server.url, agent.apiKey, final)).status).toBe(202);
      expect(await storedTrace(server.store, run.trace.id)).toMatchObject({
        status: 'completed',
        duration_ms: 9_000,
      });
      expect(await analysisJobs(server.store, run.trace.id)).toEqual([{ state: 'pending' }]);
    });

    it('a timeout the client sent itself stays: a running snapshot after it is stale', async () => {
      const run = await runningRun();
      const res = await send(
        server.url,
        `/v1/traces/${run.trace.id}/complete`,
        { status: 'timeout' },
        {
          token: agent.apiKey,
        },
      );
      expect(res.status).toBe(200);
      const late = { batchId: newId(), items: [{ trace: run.trace, events: [] }] };
      expect((await postBatch(server.url, agent.apiKey, late)).status).toBe(202);
      expect((await storedTrace(server.store, run.trace.id))?.status).toBe('timeout');
    });
  });

  describe('admin API', () => {
    it('GET shows the own and effective settings; unknown agents are 404', async () => {
      const fresh = await server.createAgent();
      const res = await admin('GET', `/admin/v1/agents/${fresh.agentId}/lifecycle`);
      expect(res.body).toEqual({
        agentId: fresh.agentId,
        runTimeoutMs: null,
        retentionDays: null,
        effective: { runTimeoutMs: HOUR, retentionDays: null },
      });
      expect(isProblem(await admin('GET', '/admin/v1/agents/nobody/lifecycle'), 404)).toBe(true);
      expect(
        isProblem(
          await admin('PATCH', '/admin/v1/agents/nobody/lifecycle', { runTimeoutMs: 5 }),
          404,
        ),
      ).toBe(true);
    });

    it.each([[-1], ['5'], [1.5], [31 * 24 * HOUR]])(
      'refuses runTimeoutMs %j with 400',
      async (value) => {
        const res = await admin('PATCH', `/admin/v1/agents/${agent.agentId}/lifecycle`, {
          runTimeoutMs: value,
        });
        expect(isProblem(res, 400)).toBe(true);
        expect(res.body.errors[0].pointer).toBe('/runTimeoutMs');
      },
    );

    it('needs the admin token', async () => {
      const res = await send(server.url, `/admin/v1/agents/${agent.agentId}/lifecycle`);
      expect(isProblem(res, 401)).toBe(true);
    });
  });
});

describeEngines('the sweeper in the background [%s]', (engine) => {
  it('runs every LIFECYCLE_SWEEP_MS and stops when the app closes', async () => {
    const server = await startTestServer(engine, {
      lifecycle: { ...loadConfig({}).lifecycle, sweepIntervalMs: 50, runTimeoutMs: 200 },
    });
    const agent = await server.createAgent();
    const run = runBatch();
    expect((await postBatch(server.url, agent.apiKey, run.body)).status).toBe(202);
    const deadline = Date.now() + 10_000;
    while ((await storedTrace(server.store, run.trace.id))?.status !== 'timeout') {
      if (Date.now() > deadline) throw new Error('the sweeper did not time the run out');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await server.close();
    // closed: no pass is scheduled any more
    expect(await server.lifecycle.sweep().then((r) => r.timedOut)).toBe(0);
  });
});
