import { TRACE_COUNT_CAP, type AgentSummary } from '@flightlog/protocol';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { mintDevToken } from '../../src/auth/dev-token.js';
import { describeEngines } from '../harness/engines.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { at, newId, runBatch, traceSnapshot } from '../fixtures/batches.js';

interface Page {
  agents: AgentSummary[];
  nextCursor: string | null;
}

describeEngines('GET /v1/agents [%s]', (engine) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(engine);
  });
  afterAll(() => server.close());

  const list = (token: string | undefined, query = '') =>
    send(server.url, `/v1/agents${query}`, undefined, token === undefined ? {} : { token });
  const adminAgent = async (agentId: string) =>
    (await send(server.url, `/admin/v1/agents/${agentId}`, undefined, { token: server.adminToken }))
      .body as { createdAt: string; verifiedAt: string | null };
  /** A unique prefix per test, so that agent ids sort in the order they are numbered. */
  const prefix = () => `al-${newId().toLowerCase()}`;

  /** Follows nextCursor from the first page to the last; returns every page. */
  async function walk(token: string, limit: number): Promise<Page[]> {
    const pages: Page[] = [];
    let cursor: string | null = null;
    do {
      const suffix: string = cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`;
      const res = await list(token, `?limit=${limit}${suffix}`);
      expect(res.status, res.text).toBe(200);
      pages.push(res.body as Page);
      cursor = (res.body as Page).nextCursor;
      expect(pages.length).toBeLessThanOrEqual(50); // a cursor that never ends is a failure too
    } while (cursor !== null);
    return pages;
  }

  it('answers an empty page to a user with no role on any agent', async () => {
    const res = await list(await server.userToken(`nobody-${newId()}`));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ agents: [], nextCursor: null });
  });

  it("lists only the caller's agents, by id, with the caller's role on each, its name, creation and verification", async () => {
    const p = prefix();
    const user = `ana-${newId()}`;
    const other = `bob-${newId()}`;
    const owned = await server.createAgent({ id: `${p}-1`, name: 'Swap bot' });
    const viewed = await server.createAgent({ id: `${p}-2` });
    const edited = await server.createAgent({ id: `${p}-3`, name: 'Payments' });
    const foreign = await server.createAgent({ id: `${p}-4`, name: 'Not yours' });
    await server.userToken(user, owned.agentId, 'owner');
    await server.userToken(user, edited.agentId, 'editor');
    const token = await server.userToken(user, viewed.agentId, 'viewer');
    const otherToken = await server.userToken(other, foreign.agentId, 'owner');
    // bob also sees one of ana's agents: his role there is his, not hers
    await server.userToken(other, viewed.agentId, 'editor');

    // the first batch carrying the verify token verifies the agent
    const { body } = runBatch({
      batch: { agentId: edited.agentId, verifyToken: edited.verifyToken },
    });
    const verify = await postBatch(server.url, edited.apiKey, body);
    expect(verify.status).toBe(202);
    expect(verify.headers.get('flightlog-verify')).toBe('verified');

    const res = await list(token);
    expect(res.status).toBe(200);
    const page = res.body as Page;
    expect(page.nextCursor).toBeNull();
    expect(page.agents.map((a) => [a.agentId, a.name, a.role])).toEqual([
      [owned.agentId, 'Swap bot', 'owner'],
      [viewed.agentId, null, 'viewer'],
      [edited.agentId, 'Payments', 'editor'],
    ]);
    expect(res.text).not.toContain(foreign.agentId);
    for (const agent of page.agents) {
      const stored = await adminAgent(agent.agentId);
      expect(agent.createdAt).toBe(stored.createdAt);
      expect(agent.verifiedAt).toBe(stored.verifiedAt);
    }
    const [first, second, third] = page.agents as [AgentSummary, AgentSummary, AgentSummary];
    expect(first.verifiedAt).toBeNull();
    expect(second.verifiedAt).toBeNull();
    expect(Date.parse(third.verifiedAt ?? '')).toBeGreaterThan(Date.now() - 60_000);

    const theirs = (await list(otherToken)).body as Page;
    expect(theirs.agents.map((a) => [a.agentId, a.role])).toEqual([
      [viewed.agentId, 'editor'],
      [foreign.agentId, 'owner'],
    ]);

    // a removed role removes the agent from the list at once
    const removed = await send(
      server.url,
      `/admin/v1/agents/${owned.agentId}/members/${user}`,
      undefined,
      { method: 'DELETE', token: server.adminToken },
    );
    expect(removed.status).toBe(204);
    const after = (await list(token)).body as Page;
    expect(after.agents.map((a) => a.agentId)).toEqual([viewed.agentId, edited.agentId]);
  });

  it("counts each agent's traces and gives its newest trace's start, after batches", async () => {
    const p = prefix();
    const user = `carla-${newId()}`;
    const busy = await server.createAgent({ id: `${p}-1` });
    const quiet = await server.createAgent({ id: `${p}-2` });
    await server.userToken(user, busy.agentId, 'owner');
    const token = await server.userToken(user, quiet.agentId, 'viewer');

    const before = (await list(token)).body as Page;
    expect(before.agents.map((a) => [a.traceCount, a.traceCountCapped, a.lastTraceAt])).toEqual([
      [0, false, null],
      [0, false, null],
    ]);

    // three runs, the newest sent first; then one of them again, finished: still three
    const traces = [5_000, 1_000, 3_000].map((ms) => traceSnapshot({ startedAt: at(ms) }));
    for (const trace of traces) {
      const res = await postBatch(server.url, busy.apiKey, {
        batchId: newId(),
        items: [{ trace, events: [] }],
      });
      expect(res.status).toBe(202);
    }
    const finished = { ...(traces[1] as (typeof traces)[0]), status: 'completed' as const };
    const again = await postBatch(server.url, busy.apiKey, {
      batchId: newId(),
      items: [{ trace: { ...finished, endedAt: at(2_000), durationMs: 1_000 }, events: [] }],
    });
    expect(again.status).toBe(202);

    const page = (await list(token)).body as Page;
    expect(page.agents).toEqual([
      expect.objectContaining({
        agentId: busy.agentId,
        traceCount: 3,
        traceCountCapped: false,
        lastTraceAt: at(5_000),
      }),
      expect.objectContaining({
        agentId: quiet.agentId,
        traceCount: 0,
        traceCountCapped: false,
        lastTraceAt: null,
      }),
    ]);
    // lastTraceAt is the first run of the agent's runs list
    const runs = await send(server.url, `/v1/agents/${busy.agentId}/traces?limit=1`, undefined, {
      token,
    });
    expect(runs.body.traces[0].startedAt).toBe(page.agents[0]?.lastTraceAt);
  });

  it(`stops counting at ${TRACE_COUNT_CAP} traces and says so`, async () => {
    const p = prefix();
    const user = `dan-${newId()}`;
    const big = await server.createAgent({ id: `${p}-1` });
    const exact = await server.createAgent({ id: `${p}-2` });
    await server.userToken(user, big.agentId, 'owner');
    const token = await server.userToken(user, exact.agentId, 'owner');
    // stored directly: 10,001 batches would only slow the test, the count is what is checked
    const insert = (agentId: string, count: number) =>
      server.store.sql.query(
        `INSERT INTO traces (id, agent_id, status, started_at, input_summary, tags, event_count,
           total_tokens, total_cost_usd, total_lamports, chain_tx_count, tools_called)
         SELECT $1 || '-' || g, $1, 'completed', $3::timestamptz - g * interval '1 ms', 'bulk',
           '{}', 0, 0, 0, 0, 0, '{}'
         FROM generate_series(1, $2::int) g`,
        [agentId, count, at(0)],
      );
    await insert(big.agentId, TRACE_COUNT_CAP + 1);
    await insert(exact.agentId, TRACE_COUNT_CAP);

    const page = (await list(token)).body as Page;
    expect(page.agents.map((a) => [a.traceCount, a.traceCountCapped, a.lastTraceAt])).toEqual([
      [TRACE_COUNT_CAP, true, at(-1)],
      [TRACE_COUNT_CAP, false, at(-1)],
    ]);
  });

  it('pages by agent id: every agent exactly once, over several pages, the last with nextCursor null', async () => {
    const p = prefix();
    const user = `eve-${newId()}`;
    const ids: string[] = [];
    let token = '';
    for (let i = 1; i <= 7; i++) {
      const agent: TestAgent = await server.createAgent({ id: `${p}-${i}` });
      token = await server.userToken(user, agent.agentId, i % 2 === 0 ? 'viewer' : 'owner');
      ids.push(agent.agentId);
    }
    // someone else's agent between two of hers never fills a gap in her pages
    const between = await server.createAgent({ id: `${p}-35` });
    await server.userToken(`frank-${newId()}`, between.agentId, 'owner');

    const pages = await walk(token, 3);
    expect(pages.map((page) => page.agents.length)).toEqual([3, 3, 1]);
    expect(pages.flatMap((page) => page.agents.map((a) => a.agentId))).toEqual(ids);

    // exactly a page's worth: the last full page says there is no more
    const exactPages = await walk(token, 7);
    expect(exactPages.map((page) => page.agents.length)).toEqual([7]);
    expect(((await list(token)).body as Page).agents.map((a) => a.agentId)).toEqual(ids);

    // an agent created after the first page was read appears on a later page, once
    const first = (await list(token, '?limit=3')).body as Page;
    const late = await server.createAgent({ id: `${p}-9` });
    await server.userToken(user, late.agentId, 'viewer');
    const rest = await list(token, `?limit=500&cursor=${encodeURIComponent(first.nextCursor!)}`);
    expect((rest.body as Page).agents.map((a) => a.agentId)).toEqual([
      ...ids.slice(3),
      late.agentId,
    ]);
  });

  it('pages a user with a role on 10,000 agents, each page a bounded read', async () => {
    const p = prefix();
    const user = `ida-${newId()}`;
    // stored directly: 10,000 agents through the admin API would only slow the test
    await server.store.sql.query(
      `INSERT INTO agents (id) SELECT $1 || '-' || lpad(g::text, 5, '0') FROM generate_series(1, 10000) g`,
      [p],
    );
    await server.store.sql.query(
      `INSERT INTO members (agent_id, user_id, role)
       SELECT $1 || '-' || lpad(g::text, 5, '0'), $2, 'viewer' FROM generate_series(1, 10000) g`,
      [p, user],
    );
    const token = await mintDevToken(server.jwtSecret, user);
    const started = performance.now();
    const first = await list(token);
    const firstMs = performance.now() - started;
    expect(first.status).toBe(200);
    expect((first.body as Page).agents).toHaveLength(100);
    expect((first.body as Page).nextCursor).toEqual(expect.any(String));
    // generous: a read of 101 rows, not of 10,000 (about 10 ms here; CI machines are slower)
    expect(firstMs).toBeLessThan(2_000);

    const pages = await walk(token, 500);
    expect(pages).toHaveLength(20);
    const ids = pages.flatMap((page) => page.agents.map((a) => a.agentId));
    expect(new Set(ids).size).toBe(10_000);
    expect(ids[0]).toBe(`${p}-00001`);
    expect(ids.at(-1)).toBe(`${p}-10000`);
  });

  it('refuses a bad limit or cursor with a 400 problem naming the field', async () => {
    const user = `gil-${newId()}`;
    const agent = await server.createAgent();
    const token = await server.userToken(user, agent.agentId, 'owner');
    for (const limit of ['0', '501', 'abc', '-1', '1.5', '']) {
      const res = await list(token, `?limit=${limit}`);
      expect(isProblem(res, 400), `limit=${limit}: ${res.text}`).toBe(true);
      expect(res.body.errors).toEqual([
        { pointer: '/querystring/limit', detail: 'must be a whole number from 1 to 500' },
      ]);
    }
    expect((await list(token, '?limit=500')).status).toBe(200);
    expect((await list(token, '?limit=1')).status).toBe(200);

    // another list's cursor (a runs list's) is not one of this list
    const { body } = runBatch();
    await postBatch(server.url, agent.apiKey, body);
    await postBatch(server.url, agent.apiKey, runBatch().body);
    const runs = await send(server.url, `/v1/agents/${agent.agentId}/traces?limit=1`, undefined, {
      token,
    });
    const runsCursor = runs.body.nextCursor as string;
    expect(runsCursor).toEqual(expect.any(String));
    const bogus = Buffer.from(JSON.stringify(['agents', 'has space'])).toString('base64url');
    for (const cursor of ['not-a-cursor', runsCursor, bogus, '']) {
      const res = await list(token, `?cursor=${encodeURIComponent(cursor)}`);
      expect(isProblem(res, 400), `cursor=${cursor}: ${res.text}`).toBe(true);
      expect(res.body.errors).toEqual([
        { pointer: '/querystring/cursor', detail: 'is not a cursor returned by this endpoint' },
      ]);
    }
    const both = await list(token, '?limit=0&cursor=x');
    expect(isProblem(both, 400)).toBe(true);
    expect(both.body.errors.map((e: { pointer: string }) => e.pointer)).toEqual([
      '/querystring/limit',
      '/querystring/cursor',
    ]);
  });

  it('answers 401 without a token, with a token of another secret, and with an expired one', async () => {
    const user = `hal-${newId()}`;
    const agent = await server.createAgent({ name: 'secret agent' });
    await server.userToken(user, agent.agentId, 'owner');
    const forged = await mintDevToken('another-secret-another-secret-0123456789', user);
    const expired = await mintDevToken(server.jwtSecret, user, -60);
    for (const token of [undefined, forged, expired, 'not.a.jwt']) {
      const res = await list(token);
      expect(isProblem(res, 401), res.text).toBe(true);
      expect(res.text).not.toContain('secret agent');
    }
  });
});
