import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import type { BufferBatchItem } from '@flightlog/protocol';
import { describeEngines } from '../harness/engines.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import { analysisJobs, storedEvents, storedTrace } from '../harness/inspect.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { at, newId, runBatch, traceSnapshot } from '../fixtures/batches.js';
import { loadConfig } from '../../src/config.js';

const DAY = 86_400_000;

describeEngines('retention [%s]', (engine) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(engine, {
      // RETENTION_DAYS=7; small statements, so that a sweep takes many of them
      lifecycle: {
        ...loadConfig({}).lifecycle,
        sweepIntervalMs: 0,
        sweepRows: 20,
        retentionDays: 7,
      },
    });
  });
  afterAll(() => server.close());

  const admin = (method: string, path: string, body?: unknown) =>
    send(server.url, path, body, { method, token: server.adminToken });
  const retain = async (agent: TestAgent, retentionDays: number | null) => {
    const res = await admin('PATCH', `/admin/v1/agents/${agent.agentId}/lifecycle`, {
      retentionDays,
    });
    expect(res.status, res.text).toBe(200);
    return res.body;
  };
  /** Posts a run and makes it look started `startedDaysAgo` and last changed `idleDaysAgo`. */
  async function runAged(
    agent: TestAgent,
    startedDaysAgo: number,
    idleDaysAgo = startedDaysAgo,
    events = 3,
  ) {
    const run = runBatch({
      events,
      trace: { status: 'completed', endedAt: at(10_000), durationMs: 10_000 },
    });
    expect((await postBatch(server.url, agent.apiKey, run.body)).status).toBe(202);
    await server.store.sql.query(
      `UPDATE traces SET started_at = now() - $2::float8 * interval '1 day',
                         updated_at = now() - $3::float8 * interval '1 day'
       WHERE id = $1`,
      [run.trace.id, startedDaysAgo, idleDaysAgo],
    );
    return run.trace.id;
  }
  const exists = async (traceId: string) =>
    (await storedTrace(server.store, traceId)) !== undefined;

  it('admin API: own and effective retention; RETENTION_DAYS is the default, 0 keeps forever', async () => {
    const agent = await server.createAgent();
    const shown = await admin('GET', `/admin/v1/agents/${agent.agentId}/lifecycle`);
    expect(shown.body).toMatchObject({ retentionDays: null, effective: { retentionDays: 7 } });
    expect(await retain(agent, 30)).toMatchObject({
      retentionDays: 30,
      effective: { retentionDays: 30 },
    });
    expect(await retain(agent, 0)).toMatchObject({
      retentionDays: 0,
      effective: { retentionDays: null },
    });
    // changing one setting keeps the other
    const timeout = await admin('PATCH', `/admin/v1/agents/${agent.agentId}/lifecycle`, {
      runTimeoutMs: 5_000,
    });
    expect(timeout.body).toMatchObject({ runTimeoutMs: 5_000, retentionDays: 0 });
    for (const bad of [-1, 1.5, '30', 36_501]) {
      const res = await admin('PATCH', `/admin/v1/agents/${agent.agentId}/lifecycle`, {
        retentionDays: bad,
      });
      expect(isProblem(res, 400), JSON.stringify(bad)).toBe(true);
      expect(res.body.errors[0].pointer).toBe('/retentionDays');
    }
    expect(
      isProblem(
        await admin('PATCH', '/admin/v1/agents/nobody/lifecycle', { retentionDays: 1 }),
        404,
      ),
    ).toBe(true);
  });

  it('deletes exactly the runs past their agent’s retention, with their events and analysis', async () => {
    const own = await server.createAgent();
    const byDefault = await server.createAgent();
    const forever = await server.createAgent();
    await retain(own, 30);
    await retain(forever, 0);
    const gone = [
      await runAged(own, 40),
      await runAged(own, 30.01),
      await runAged(byDefault, 8),
      await runAged(own, 400, 31, 45), // more events than one statement deletes
    ];
    const kept = [
      await runAged(own, 40, 1), // started long ago, still sending batches
      await runAged(own, 29.9),
      await runAged(own, 0),
      await runAged(byDefault, 6.9),
      await runAged(forever, 3_000),
    ];
    for (const id of gone) expect((await analysisJobs(server.store, id)).length).toBe(1);

    const report = await server.lifecycle.sweep();
    expect(report.expiredRuns).toBeGreaterThanOrEqual(gone.length);
    for (const id of gone) {
      expect(await exists(id), id).toBe(false);
      expect(await storedEvents(server.store, id)).toEqual([]);
      expect(await analysisJobs(server.store, id)).toEqual([]);
    }
    for (const id of kept) {
      expect(await exists(id), id).toBe(true);
      expect((await storedEvents(server.store, id)).length).toBe(3);
    }
    // nothing more to do
    const again = await server.lifecycle.sweep();
    expect(again.expiredRuns).toBe(0);
  });

  it('sweeps in small steps while ingest goes on: every new batch is stored whole', async () => {
    const agent = await server.createAgent();
    await retain(agent, 1);
    // 250 expired runs of 4 events (more runs than one step, more events than one statement)
    for (let b = 0; b < 5; b++) {
      const items = Array.from({ length: 50 }, () => {
        const trace = traceSnapshot({ eventCount: 4 });
        return { trace, events: runBatch({ events: 4, trace }).events };
      });
      expect((await postBatch(server.url, agent.apiKey, { batchId: newId(), items })).status).toBe(
        202,
      );
    }
    await server.store.sql.query(
      `UPDATE traces SET started_at = now() - interval '2 days', updated_at = now() - interval '2 days'
       WHERE agent_id = $1`,
      [agent.agentId],
    );
    let ingesting = true;
    const posted: { id: string; events: number }[] = [];
    const ingest = (async () => {
      while (ingesting) {
        const run = runBatch({ events: 5 });
        const res = await postBatch(server.url, agent.apiKey, run.body);
        expect(res.status).toBe(202);
        posted.push({ id: run.trace.id, events: 5 });
      }
    })();
    const report = await server.lifecycle.sweep();
    ingesting = false;
    await ingest;
    expect(report.expiredRuns).toBe(250);
    expect(report.expiredEvents).toBe(1_000);
    expect(posted.length).toBeGreaterThan(0);
    const [left] = await server.store.sql.query<{ runs: number; events: number }>(
      `SELECT count(*)::int AS runs, coalesce(sum(event_count), 0)::int AS events
       FROM traces WHERE agent_id = $1`,
      [agent.agentId],
    );
    expect(left).toEqual({ runs: posted.length, events: posted.length * 5 });
    for (const run of posted.slice(0, 5))
      expect((await storedEvents(server.store, run.id)).length).toBe(run.events);
  });

  it('walks every agent with a retention, a page of agents at a time', async () => {
    // 130 agents, made in the store directly (the admin API would take a while), each with one
    // expired run
    const prefix = `ret-${newId()}`;
    await server.store.sql.query(
      `INSERT INTO agents (id, retention_days)
       SELECT $1 || '-' || lpad(g::text, 3, '0'), 2 FROM generate_series(1, 130) g`,
      [prefix],
    );
    await server.store.sql.query(
      `INSERT INTO traces (id, agent_id, status, started_at, updated_at, input_summary, tags,
                           event_count, total_tokens, total_cost_usd, total_lamports,
                           chain_tx_count, tools_called)
       SELECT a.id || '-run', a.id, 'completed', now() - interval '3 days',
              now() - interval '3 days', 'old', '{}', 0, 0, 0, 0, 0, '{}'
       FROM agents a WHERE a.id LIKE $1 || '-%'`,
      [prefix],
    );
    const report = await server.lifecycle.sweep();
    expect(report.expiredRuns).toBeGreaterThanOrEqual(130);
    const [left] = await server.store.sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM traces WHERE agent_id LIKE $1 || '-%'`,
      [prefix],
    );
    expect(left?.n).toBe(0);
  });

  it('removes expired runs from the live replay too (in-process bus)', async () => {
    const agent = await server.createAgent();
    await retain(agent, 2);
    // a batch published three days ago (the bus stamps entries with the time they came)
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() - 3 * DAY);
    const old = runBatch();
    expect((await postBatch(server.url, agent.apiKey, old.body)).status).toBe(202);
    vi.useRealTimers();
    await server.store.sql.query(
      `UPDATE traces SET started_at = now() - interval '3 days', updated_at = now() - interval '3 days'
       WHERE id = $1`,
      [old.trace.id],
    );
    const fresh = runBatch();
    expect((await postBatch(server.url, agent.apiKey, fresh.body)).status).toBe(202);
    const replayed = async () =>
      (await server.bus.replay(agent.agentId)).messages.map(
        (m) => (JSON.parse(m.data) as BufferBatchItem).trace.id,
      );
    expect(await replayed()).toEqual([old.trace.id, fresh.trace.id]);
    await server.lifecycle.sweep();
    expect(await replayed()).toEqual([fresh.trace.id]);
  });
});
