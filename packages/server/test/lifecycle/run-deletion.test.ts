import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { describeEngines } from '../harness/engines.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import { analysisJobs, storedEvents, storedTrace } from '../harness/inspect.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { at, llmCallEvent, newId, runBatch, traceSnapshot } from '../fixtures/batches.js';
import { loadConfig } from '../../src/config.js';
import type { BufferBatchItem } from '@flightlog/protocol';

const buses = inject('redisUrl') !== null ? (['memory', 'redis'] as const) : (['memory'] as const);
if (buses.length === 1)
  process.stdout.write('!!! SKIPPED "deleting a run" on the Redis bus: Redis is unreachable !!!\n');

describeEngines('deleting a run [%s]', (engine) => {
  for (const busName of buses)
    describe(`live bus: ${busName}`, () => {
      let server: TestServer;
      let agent: TestAgent;
      let owner: string;
      let editor: string;
      let viewer: string;
      let stranger: string;
      beforeAll(async () => {
        server = await startTestServer(
          engine,
          { lifecycle: { ...loadConfig({}).lifecycle, sweepIntervalMs: 0, sweepRows: 50 } },
          { bus: busName },
        );
        agent = await server.createAgent();
        owner = await server.userToken(`owner-${newId()}`, agent.agentId, 'owner');
        editor = await server.userToken(`editor-${newId()}`, agent.agentId, 'editor');
        viewer = await server.userToken(`viewer-${newId()}`, agent.agentId, 'viewer');
        const other = await server.createAgent();
        stranger = await server.userToken(`stranger-${newId()}`, other.agentId, 'owner');
      });
      afterAll(() => server.close());

      const del = (traceId: string, token: string) =>
        send(server.url, `/v1/traces/${traceId}`, undefined, { method: 'DELETE', token });
      const post = async (body: unknown) => {
        const res = await postBatch(server.url, agent.apiKey, body);
        expect(res.status, res.text).toBe(202);
        return res;
      };
      const replayed = async () =>
        (await server.bus.replay(agent.agentId)).messages.map(
          (m) => (JSON.parse(m.data) as BufferBatchItem).trace.id,
        );
      const rowsOf = async (traceId: string) => ({
        trace: (await storedTrace(server.store, traceId)) ?? null,
        events: (await storedEvents(server.store, traceId)).length,
        jobs: (await analysisJobs(server.store, traceId)).length,
      });

      it('an owner deletes a run: its rows, analysis, autopsy and live messages go; nothing else', async () => {
        const x = runBatch({
          events: 120,
          trace: { status: 'completed', endedAt: at(200_000), durationMs: 200_000 },
        });
        const y = runBatch({ events: 2 });
        await post(x.body);
        await post(y.body);
        // one batch holding both runs
        await post({
          batchId: newId(),
          items: [
            { trace: { ...y.trace, eventCount: 3 }, events: [llmCallEvent(y.trace.id, 2)] },
            { trace: x.trace, events: [] },
          ],
        });
        // an autopsy written for it
        await server.store.sql.query(
          `UPDATE analysis_jobs SET state = 'done', autopsy = '## Verdict' WHERE trace_id = $1`,
          [x.trace.id],
        );
        expect(await rowsOf(x.trace.id)).toMatchObject({ events: 120, jobs: 1 });
        expect(await replayed()).toContain(x.trace.id);

        const res = await del(x.trace.id, owner);
        expect(res.status, res.text).toBe(204);

        expect(await rowsOf(x.trace.id)).toEqual({ trace: null, events: 0, jobs: 0 });
        expect(
          isProblem(
            await send(server.url, `/v1/traces/${x.trace.id}`, undefined, { token: owner }),
            404,
          ),
        ).toBe(true);
        const list = await send(server.url, `/v1/agents/${agent.agentId}/traces`, undefined, {
          token: owner,
        });
        expect(list.body.traces.map((t: { id: string }) => t.id)).not.toContain(x.trace.id);
        // the replay shows the other run, from both of its batches, and never the deleted one
        const ids = await replayed();
        expect(ids).not.toContain(x.trace.id);
        expect(ids.filter((id) => id === y.trace.id)).toHaveLength(2);
        expect(await rowsOf(y.trace.id)).toMatchObject({ trace: { status: 'running' }, events: 3 });
      });

      it('refuses editors and viewers (403); strangers, unknown and foreign runs are 404', async () => {
        const run = runBatch();
        await post(run.body);
        for (const token of [editor, viewer]) {
          const res = await del(run.trace.id, token);
          expect(isProblem(res, 403), res.text).toBe(true);
          expect(res.body.detail).toBe('Only owners of this agent delete its runs.');
        }
        const foreign = await del(run.trace.id, stranger);
        const unknown = await del(newId(), owner);
        for (const res of [foreign, unknown]) {
          expect(isProblem(res, 404)).toBe(true);
          expect(res.body.detail).toBe('No such trace, or you have no access to it.');
        }
        // the same answer, word for word: a stranger learns nothing of the run
        expect(foreign.body.title).toBe(unknown.body.title);
        expect(await rowsOf(run.trace.id)).toMatchObject({
          trace: { status: 'running' },
          events: 1,
        });
        expect(isProblem(await del(run.trace.id, 'not-a-token'), 401)).toBe(true);
      });

      it('a batch of the deleted run arriving later writes nothing and shows nothing; the rest of that batch is kept', async () => {
        const run = runBatch({ events: 2 });
        await post(run.body);
        expect((await del(run.trace.id, owner)).status).toBe(204);
        const bystander = runBatch();
        // the client retries its last batch, and goes on with the run
        const retried = await postBatch(server.url, agent.apiKey, run.body);
        expect(retried.status).toBe(202);
        const later = await postBatch(server.url, agent.apiKey, {
          batchId: newId(),
          items: [
            {
              trace: {
                ...run.trace,
                status: 'completed',
                eventCount: 3,
                endedAt: at(9_000),
                durationMs: 9_000,
              },
              events: [llmCallEvent(run.trace.id, 2)],
            },
            bystander.body.items[0],
          ],
        });
        expect(later.status, later.text).toBe(202);
        expect(await rowsOf(run.trace.id)).toEqual({ trace: null, events: 0, jobs: 0 });
        expect(await rowsOf(bystander.trace.id)).toMatchObject({ events: 1 });
        const ids = await replayed();
        expect(ids).not.toContain(run.trace.id);
        expect(ids).toContain(bystander.trace.id);
        // the complete endpoint finds nothing either
        const complete = await send(
          server.url,
          `/v1/traces/${run.trace.id}/complete`,
          {},
          {
            token: agent.apiKey,
          },
        );
        expect(isProblem(complete, 404)).toBe(true);
        // deleting again while the tombstone lasts: the same answer
        expect((await del(run.trace.id, owner)).status).toBe(204);
      });

      it('the admin API deletes any agent’s run; 404 for none; needs the admin token', async () => {
        const run = runBatch({ events: 3 });
        await post(run.body);
        const admin = (id: string, token = server.adminToken) =>
          send(server.url, `/admin/v1/traces/${id}`, undefined, { method: 'DELETE', token });
        expect(isProblem(await admin(run.trace.id, 'x'.repeat(32)), 401)).toBe(true);
        expect((await admin(run.trace.id)).status).toBe(204);
        expect(await rowsOf(run.trace.id)).toEqual({ trace: null, events: 0, jobs: 0 });
        expect(isProblem(await admin(newId()), 404)).toBe(true);
        expect(await replayed()).not.toContain(run.trace.id);
      });

      it('after DELETED_RUN_TOMBSTONE_MS the tombstone goes, and the id may be written again', async () => {
        const run = runBatch();
        await post(run.body);
        expect((await del(run.trace.id, owner)).status).toBe(204);
        await server.store.sql.query(
          `UPDATE trace_tombstones SET expires_at = now() - interval '1 second' WHERE trace_id = $1`,
          [run.trace.id],
        );
        expect((await server.lifecycle.sweep()).tombstonesExpired).toBeGreaterThanOrEqual(1);
        await post({ ...run.body, batchId: newId() });
        expect(await rowsOf(run.trace.id)).toMatchObject({
          trace: { status: 'running' },
          events: 1,
        });
      });

      it('the sweeper finishes a deletion cut short, and deletes a run a racing batch wrote back', async () => {
        const cut = runBatch({ events: 3 });
        await post(cut.body);
        // the process stopped right after the tombstone's commit
        await server.store.lifecycle.tombstone(agent.agentId, cut.trace.id, 60_000, 'admin');
        const raced = runBatch({ events: 2 });
        await post(raced.body);
        expect((await del(raced.trace.id, owner)).status).toBe(204);
        // a batch whose statement began before the tombstone committed wrote the run back
        await server.store.sql.query('DELETE FROM trace_tombstones WHERE trace_id = $1', [
          raced.trace.id,
        ]);
        await post({ ...raced.body, batchId: newId() });
        await server.store.sql.query(
          `INSERT INTO trace_tombstones (trace_id, agent_id, expires_at, rows_deleted, live_cleared)
           VALUES ($1, $2, now() + interval '1 hour', true, true)`,
          [raced.trace.id, agent.agentId],
        );
        expect(await replayed()).toContain(cut.trace.id);

        expect((await server.lifecycle.sweep()).deletionsFinished).toBeGreaterThanOrEqual(2);
        expect(await rowsOf(cut.trace.id)).toEqual({ trace: null, events: 0, jobs: 0 });
        expect(await rowsOf(raced.trace.id)).toEqual({ trace: null, events: 0, jobs: 0 });
        const ids = await replayed();
        expect(ids).not.toContain(cut.trace.id);
        // a second pass has nothing left to do
        expect((await server.lifecycle.sweep()).deletionsFinished).toBe(0);
      });
    });
});

describeEngines('deleting an agent [%s]', (engine) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(engine, {
      lifecycle: { ...loadConfig({}).lifecycle, sweepIntervalMs: 0, sweepRows: 40 },
    });
  });
  afterAll(() => server.close());

  it('removes its keys, members and every row of its data in bounded steps; another agent keeps all', async () => {
    const doomed = await server.createAgent();
    const kept = await server.createAgent();
    const token = await server.userToken(`owner-${newId()}`, doomed.agentId, 'owner');
    const keptRun = runBatch({ events: 5 });
    expect((await postBatch(server.url, kept.apiKey, keptRun.body)).status).toBe(202);
    // more runs than one step takes (100), some with more events than one statement (40)
    for (let b = 0; b < 3; b++) {
      const items = Array.from({ length: 90 }, (_, i) => {
        const trace = traceSnapshot({ eventCount: i % 45 });
        return {
          trace,
          events: Array.from({ length: i % 45 }, (_, s) => llmCallEvent(trace.id, s)),
        };
      });
      expect((await postBatch(server.url, doomed.apiKey, { batchId: newId(), items })).status).toBe(
        202,
      );
    }
    const count = async (table: string, agentId: string) => {
      const [row] = await server.store.sql.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${table} WHERE agent_id = $1`,
        [agentId],
      );
      return row?.n ?? 0;
    };
    expect(await count('traces', doomed.agentId)).toBe(270);

    const res = await send(server.url, `/admin/v1/agents/${doomed.agentId}`, undefined, {
      method: 'DELETE',
      token: server.adminToken,
    });
    expect(res.status).toBe(204);
    for (const table of [
      'traces',
      'events',
      'accepted_batches',
      'api_keys',
      'members',
      'trace_tombstones',
    ])
      expect(await count(table, doomed.agentId), table).toBe(0);
    expect((await postBatch(server.url, doomed.apiKey, runBatch().body)).status).toBe(401);
    expect(
      isProblem(
        await send(server.url, `/v1/agents/${doomed.agentId}/traces`, undefined, { token }),
        404,
      ),
    ).toBe(true);
    expect(await count('traces', kept.agentId)).toBe(1);
    expect(await count('events', kept.agentId)).toBe(5);
  });
});
