import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeEngines } from '../harness/engines.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import { startTestServer, type TestServer } from '../harness/test-server.js';
import { newId, runBatch } from '../fixtures/batches.js';
import { loadConfig } from '../../src/config.js';

interface Entry {
  id: string;
  at: string;
  actor: string;
  action: string;
  agentId: string | null;
  traceId: string | null;
  details: Record<string, unknown>;
}

describeEngines('audit log [%s]', (engine) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(engine, {
      lifecycle: { ...loadConfig({}).lifecycle, sweepIntervalMs: 0 },
    });
  });
  afterAll(() => server.close());

  const admin = (method: string, path: string, body?: unknown) =>
    send(server.url, path, body, { method, token: server.adminToken });
  const audit = async (query = '') => {
    const res = await admin('GET', `/admin/v1/audit${query}`);
    expect(res.status, res.text).toBe(200);
    return res.body as { entries: Entry[]; nextCursor: string | null };
  };

  it('records who deleted what and when, and every lifecycle change; newest first', async () => {
    const agent = await server.createAgent();
    const owner = `owner-${newId()}`;
    const token = await server.userToken(owner, agent.agentId, 'owner');
    const [mine, theirs, old] = [runBatch(), runBatch(), runBatch({ events: 2 })];
    for (const run of [mine, theirs, old])
      expect((await postBatch(server.url, agent.apiKey, run.body)).status).toBe(202);
    const started = Date.now();

    expect(
      (
        await send(server.url, `/v1/traces/${mine.trace.id}`, undefined, {
          method: 'DELETE',
          token,
        })
      ).status,
    ).toBe(204);
    expect((await admin('DELETE', `/admin/v1/traces/${theirs.trace.id}`)).status).toBe(204);
    expect(
      (await admin('PATCH', `/admin/v1/agents/${agent.agentId}/lifecycle`, { retentionDays: 30 }))
        .status,
    ).toBe(200);
    expect(
      (
        await admin('PATCH', `/admin/v1/agents/${agent.agentId}/lifecycle`, {
          retentionDays: null,
          runTimeoutMs: 0,
        })
      ).status,
    ).toBe(200);
    // a refused deletion (not found) records nothing
    expect(isProblem(await admin('DELETE', `/admin/v1/traces/${newId()}`), 404)).toBe(true);
    // retention: the sweeper's own record
    await admin('PATCH', `/admin/v1/agents/${agent.agentId}/lifecycle`, { retentionDays: 1 });
    await server.store.sql.query(
      `UPDATE traces SET started_at = now() - interval '2 days', updated_at = now() - interval '2 days'
       WHERE id = $1`,
      [old.trace.id],
    );
    await server.lifecycle.sweep();

    const { entries } = await audit(`?agentId=${agent.agentId}`);
    expect(entries.map((e) => [e.actor, e.action, e.traceId, e.details])).toEqual([
      ['system', 'runs.expired', null, { runs: 1, events: 2, retentionDays: 1 }],
      ['admin', 'lifecycle.changed', null, { retentionDays: { from: null, to: 1 } }],
      [
        'admin',
        'lifecycle.changed',
        null,
        { runTimeoutMs: { from: null, to: 0 }, retentionDays: { from: 30, to: null } },
      ],
      ['admin', 'lifecycle.changed', null, { retentionDays: { from: null, to: 30 } }],
      ['admin', 'run.deleted', theirs.trace.id, {}],
      [`user:${owner}`, 'run.deleted', mine.trace.id, {}],
    ]);
    for (const entry of entries) {
      expect(entry.agentId).toBe(agent.agentId);
      expect(Date.parse(entry.at)).toBeGreaterThanOrEqual(started - 5_000);
      expect(Date.parse(entry.at)).toBeLessThanOrEqual(Date.now() + 5_000);
    }
    const ids = entries.map((e) => BigInt(e.id));
    expect([...ids].sort((a, b) => (a > b ? -1 : 1))).toEqual(ids);
  });

  it("outlives the agent: its deletion is recorded, and the agent's earlier entries stay", async () => {
    const agent = await server.createAgent();
    const run = runBatch();
    expect((await postBatch(server.url, agent.apiKey, run.body)).status).toBe(202);
    await admin('DELETE', `/admin/v1/traces/${run.trace.id}`);
    expect((await admin('DELETE', `/admin/v1/agents/${agent.agentId}`)).status).toBe(204);
    const { entries } = await audit(`?agentId=${agent.agentId}`);
    expect(entries.map((e) => [e.actor, e.action])).toEqual([
      ['admin', 'agent.deleted'],
      ['admin', 'run.deleted'],
    ]);
    // and in the log of every agent, newest first
    const all = await audit('?limit=2');
    expect(all.entries[0]).toMatchObject({ action: 'agent.deleted', agentId: agent.agentId });
  });

  it('pages with limit and cursor; refuses a bad limit or cursor; needs the admin token', async () => {
    const agent = await server.createAgent();
    for (let days = 1; days <= 5; days++)
      await admin('PATCH', `/admin/v1/agents/${agent.agentId}/lifecycle`, { retentionDays: days });
    const first = await audit(`?agentId=${agent.agentId}&limit=2`);
    expect(first.entries).toHaveLength(2);
    expect(first.nextCursor).not.toBeNull();
    const second = await audit(`?agentId=${agent.agentId}&limit=2&cursor=${first.nextCursor}`);
    const third = await audit(`?agentId=${agent.agentId}&limit=2&cursor=${second.nextCursor}`);
    expect(third.nextCursor).toBeNull();
    const seen = [...first.entries, ...second.entries, ...third.entries].map(
      (e) => (e.details.retentionDays as { to: number }).to,
    );
    expect(seen).toEqual([5, 4, 3, 2, 1]);

    for (const query of ['?limit=0', '?limit=201', '?limit=ten', '?cursor=nope', '?other=1']) {
      const res = await admin('GET', `/admin/v1/audit${query}`);
      expect(isProblem(res, 400), query).toBe(true);
    }
    expect(isProblem(await send(server.url, '/admin/v1/audit'), 401)).toBe(true);
  });
});
