import { traceHashOf, type Trace } from '@flightlog/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEngines } from '../harness/engines.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { at, llmCallEvent, newId, runBatch, traceSnapshot } from '../fixtures/batches.js';

interface Page {
  traces: Trace[];
  nextCursor: string | null;
}

describeEngines('read API [%s]', (engine) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(engine);
  });
  afterAll(() => server.close());

  const admin = (method: string, path: string, body?: unknown) =>
    send(server.url, path, body, { method, token: server.adminToken });
  const getTrace = (id: string, token: string) =>
    send(server.url, `/v1/traces/${encodeURIComponent(id)}`, undefined, { token });
  const listPage = (agentId: string, token: string, query = '') =>
    send(server.url, `/v1/agents/${agentId}/traces${query}`, undefined, { token });

  /** A fresh agent with an owner token, so every test sees only its own traces. */
  async function agentWithOwner(): Promise<{ agent: TestAgent; owner: string }> {
    const agent = await server.createAgent();
    return { agent, owner: await server.userToken(`owner-${newId()}`, agent.agentId, 'owner') };
  }

  /** Stores one trace per snapshot through the batch endpoint. */
  async function ingest(agent: TestAgent, traces: Trace[]): Promise<void> {
    for (const trace of traces) {
      const res = await postBatch(server.url, agent.apiKey, {
        batchId: newId(),
        items: [{ trace, events: [] }],
      });
      expect(res.status).toBe(202);
    }
  }

  /** Follows nextCursor from the first page to the last; returns every page. */
  async function walk(agentId: string, token: string, query: string): Promise<Page[]> {
    const pages: Page[] = [];
    let cursor: string | null = null;
    do {
      const suffix: string = cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`;
      const res = await listPage(agentId, token, `?${query}${suffix}`);
      expect(res.status).toBe(200);
      pages.push(res.body as Page);
      cursor = (res.body as Page).nextCursor;
      expect(pages.length).toBeLessThanOrEqual(50); // a cursor that never ends is a failure too
    } while (cursor !== null);
    return pages;
  }

  describe('GET /v1/traces/:id', () => {
    it('returns the trace as stored and its events by sequence, though sent out of order in two batches', async () => {
      const { agent, owner } = await agentWithOwner();
      const trace = traceSnapshot({
        agentId: 'sent-by-client',
        status: 'completed',
        endedAt: at(9_000),
        durationMs: 9_000,
        outputSummary: 'Swapped 1 SOL for 142.17 USDC',
        tags: ['swap', 'devnet'],
        eventCount: 4,
        totalTokens: 160,
        totalCostUsd: '0.000125000',
        totalLamports: '123456789012345678901234567890',
        chainTxCount: 1,
        toolsCalled: ['jupiter.quote'],
        anchorSlot: '98765432109876543210',
      });
      const events = [0, 1, 2, 3].map((sequence) => llmCallEvent(trace.id, sequence));
      const [e0, e1, e2, e3] = events as [
        (typeof events)[0],
        (typeof events)[0],
        (typeof events)[0],
        (typeof events)[0],
      ];
      const first = await postBatch(server.url, agent.apiKey, {
        batchId: newId(),
        items: [{ trace: { ...trace, status: 'running', eventCount: 2 }, events: [e3, e1] }],
      });
      expect(first.status).toBe(202);
      const second = await postBatch(server.url, agent.apiKey, {
        batchId: newId(),
        items: [{ trace, events: [e2, e0] }],
      });
      expect(second.status).toBe(202);

      const res = await getTrace(trace.id, owner);
      expect(res.status).toBe(200);
      // the proof fields are the server's: what the client sent there is not kept, and the
      // run's fingerprint is null until the worker computed it, then the hash of what is read
      const { traceHash, ...stored } = res.body.trace as Trace;
      expect(stored).toEqual({
        ...trace,
        agentId: agent.agentId,
        anchorSlot: null,
        traceHash: undefined,
      });
      expect([null, traceHashOf(res.body.trace as Trace, events)]).toContain(traceHash);
      expect(res.body.events).toEqual(events);
      expect(res.body.events.map((e: { sequence: number }) => e.sequence)).toEqual([0, 1, 2, 3]);
    });

    it.each(['owner', 'editor', 'viewer'] as const)('lets a %s of the agent read', async (role) => {
      const { agent } = await agentWithOwner();
      const { body, trace } = runBatch({ events: 1 });
      expect((await postBatch(server.url, agent.apiKey, body)).status).toBe(202);
      const token = await server.userToken(`${role}-${newId()}`, agent.agentId, role);
      const res = await getTrace(trace.id, token);
      expect(res.status).toBe(200);
      expect(res.body.trace.id).toBe(trace.id);
      expect(res.body.events).toHaveLength(1);
    });

    it('answers 404 to a user with no role, the same as for a trace that does not exist', async () => {
      const { agent } = await agentWithOwner();
      const { body, trace } = runBatch({ trace: { inputSummary: 'private run' } });
      await postBatch(server.url, agent.apiKey, body);
      const stranger = await server.userToken(`stranger-${newId()}`);
      const res = await getTrace(trace.id, stranger);
      expect(isProblem(res, 404)).toBe(true);
      expect(res.text).not.toContain('private run');
      const missing = await getTrace(newId(), stranger);
      expect(isProblem(missing, 404)).toBe(true);
      expect(res.body.detail).toBe(missing.body.detail);
    });

    it('pages the events by sequence then id, each exactly once, with nextCursor null on the last page', async () => {
      const { agent, owner } = await agentWithOwner();
      const trace = traceSnapshot({ eventCount: 7 });
      // two events share each sequence: the order within one is by id
      const events = [0, 0, 1, 1, 2, 2, 3].map((sequence) => llmCallEvent(trace.id, sequence));
      const expected = [...events]
        .sort((a, b) => a.sequence - b.sequence || (a.id < b.id ? -1 : 1))
        .map((e) => e.id);
      const res = await postBatch(server.url, agent.apiKey, {
        batchId: newId(),
        items: [{ trace, events: [...events].reverse() }],
      });
      expect(res.status).toBe(202);

      const seen: string[] = [];
      let query = '?limit=3';
      for (let pages = 0; ; pages++) {
        expect(pages).toBeLessThan(10);
        const page = await send(server.url, `/v1/traces/${trace.id}${query}`, undefined, {
          token: owner,
        });
        expect(page.status).toBe(200);
        expect(page.body.events.length).toBeLessThanOrEqual(3);
        seen.push(...page.body.events.map((e: { id: string }) => e.id));
        if (page.body.nextCursor === null) break;
        query = `?limit=3&cursor=${encodeURIComponent(page.body.nextCursor)}`;
      }
      expect(seen).toEqual(expected);

      const whole = await getTrace(trace.id, owner);
      expect(whole.body.events.map((e: { id: string }) => e.id)).toEqual(expected);
      expect(whole.body.nextCursor).toBeNull();
    });

    it('answers 400 with the field to a limit out of range or a cursor it did not issue', async () => {
      const { agent, owner } = await agentWithOwner();
      const { body, trace } = runBatch({ events: 1 });
      expect((await postBatch(server.url, agent.apiKey, body)).status).toBe(202);
      for (const [query, pointer] of [
        ['?limit=0', '/querystring/limit'],
        ['?limit=1001', '/querystring/limit'],
        ['?cursor=bm90LW91cnM', '/querystring/cursor'],
        [
          `?cursor=${Buffer.from('["99999999999999999999","x"]').toString('base64url')}`,
          '/querystring/cursor',
        ],
      ] as const) {
        const res = await send(server.url, `/v1/traces/${trace.id}${query}`, undefined, {
          token: owner,
        });
        expect(isProblem(res, 400), `${query}: ${res.text}`).toBe(true);
        expect(res.body.errors.map((e: { pointer: string }) => e.pointer)).toEqual([pointer]);
      }
    });

    it('answers 404 for a trace that does not exist, even to an owner', async () => {
      const { owner } = await agentWithOwner();
      expect(isProblem(await getTrace(newId(), owner), 404)).toBe(true);
    });

    it('answers 404 once the member has been removed', async () => {
      const { agent } = await agentWithOwner();
      const { body, trace } = runBatch();
      await postBatch(server.url, agent.apiKey, body);
      const userId = `leaver-${newId()}`;
      const token = await server.userToken(userId, agent.agentId, 'editor');
      expect((await getTrace(trace.id, token)).status).toBe(200);
      const removed = await admin('DELETE', `/admin/v1/agents/${agent.agentId}/members/${userId}`);
      expect(removed.status).toBe(204);
      expect(isProblem(await getTrace(trace.id, token), 404)).toBe(true);
      expect(isProblem(await listPage(agent.agentId, token), 404)).toBe(true);
    });
  });

  describe('GET /v1/agents/:id/traces', () => {
    it('lists newest first by startedAt, whatever the order of ingest', async () => {
      const { agent, owner } = await agentWithOwner();
      const offsets = [3, 0, 4, 1, 2];
      const traces = offsets.map((n) => traceSnapshot({ startedAt: at(n * 60_000) }));
      await ingest(agent, traces);
      const res = await listPage(agent.agentId, owner);
      expect(res.status).toBe(200);
      expect(res.body.nextCursor).toBeNull();
      expect(res.body.traces.map((t: Trace) => t.startedAt)).toEqual(
        [4, 3, 2, 1, 0].map((n) => at(n * 60_000)),
      );
      const newest = traces[2] as Trace;
      expect(res.body.traces[0]).toEqual({ ...newest, agentId: agent.agentId });
    });

    it('walks every trace exactly once with limit and cursor, ending with nextCursor null', async () => {
      const { agent, owner } = await agentWithOwner();
      const traces = Array.from({ length: 7 }, (_, i) =>
        traceSnapshot({ startedAt: at(i * 1_000) }),
      );
      await ingest(agent, traces);
      const pages = await walk(agent.agentId, owner, 'limit=3');
      expect(pages.map((p) => p.traces.length)).toEqual([3, 3, 1]);
      expect(pages.map((p) => p.nextCursor === null)).toEqual([false, false, true]);
      const ids = pages.flatMap((p) => p.traces.map((t) => t.id));
      expect(ids).toEqual(traces.map((t) => t.id).reverse());
    });

    it('gives nextCursor null on a page that holds exactly the last traces', async () => {
      const { agent, owner } = await agentWithOwner();
      const traces = Array.from({ length: 4 }, (_, i) =>
        traceSnapshot({ startedAt: at(i * 1_000) }),
      );
      await ingest(agent, traces);
      const pages = await walk(agent.agentId, owner, 'limit=2');
      expect(pages.map((p) => p.traces.length)).toEqual([2, 2]);
      const exact = await listPage(agent.agentId, owner, '?limit=4');
      expect(exact.body.traces).toHaveLength(4);
      expect(exact.body.nextCursor).toBeNull();
    });

    it('paginates traces with equal startedAt without loss or repetition (ties broken by id)', async () => {
      const { agent, owner } = await agentWithOwner();
      const same = at(42_000);
      const tied = Array.from({ length: 5 }, () => traceSnapshot({ startedAt: same }));
      const older = traceSnapshot({ startedAt: at(41_999) });
      const newer = traceSnapshot({ startedAt: at(42_001) });
      await ingest(agent, [older, ...tied, newer]);
      const pages = await walk(agent.agentId, owner, 'limit=2');
      const ids = pages.flatMap((p) => p.traces.map((t) => t.id));
      expect(ids).toHaveLength(7);
      expect(new Set(ids).size).toBe(7);
      expect(ids[0]).toBe(newer.id);
      expect(ids[6]).toBe(older.id);
      expect(ids.slice(1, 6).sort()).toEqual(tied.map((t) => t.id).sort());
    });

    it('filters by status, also across pages', async () => {
      const { agent, owner } = await agentWithOwner();
      const statuses = ['running', 'completed', 'errored', 'completed', 'timeout', 'completed'];
      const traces = statuses.map((status, i) =>
        traceSnapshot({
          status: status as Trace['status'],
          startedAt: at(i * 1_000),
          ...(status === 'running' ? {} : { endedAt: at(i * 1_000 + 500), durationMs: 500 }),
        }),
      );
      await ingest(agent, traces);
      const completed = traces.filter((t) => t.status === 'completed').map((t) => t.id);
      const pages = await walk(agent.agentId, owner, 'status=completed&limit=2');
      const ids = pages.flatMap((p) => p.traces.map((t) => t.id));
      expect(ids).toEqual(completed.reverse());
      expect(pages.flatMap((p) => p.traces.map((t) => t.status))).toEqual([
        'completed',
        'completed',
        'completed',
      ]);
      const errored = await listPage(agent.agentId, owner, '?status=errored');
      expect(errored.body.traces.map((t: Trace) => t.id)).toEqual([traces[2]?.id]);
    });

    it.each(['0', '201', 'abc', '-1', '2.5'])(
      'answers 400 for limit=%s, naming the field',
      async (limit) => {
        const { agent, owner } = await agentWithOwner();
        const res = await listPage(agent.agentId, owner, `?limit=${limit}`);
        expect(isProblem(res, 400)).toBe(true);
        expect(res.body.errors.map((e: { pointer: string }) => e.pointer)).toEqual([
          expect.stringMatching(/\/limit$/),
        ]);
      },
    );

    it('accepts the bounds limit=1 and limit=200', async () => {
      const { agent, owner } = await agentWithOwner();
      await ingest(agent, [
        traceSnapshot({ startedAt: at(0) }),
        traceSnapshot({ startedAt: at(1) }),
      ]);
      const one = await listPage(agent.agentId, owner, '?limit=1');
      expect(one.status).toBe(200);
      expect(one.body.traces).toHaveLength(1);
      expect(one.body.nextCursor).toEqual(expect.any(String));
      const all = await listPage(agent.agentId, owner, '?limit=200');
      expect(all.status).toBe(200);
      expect(all.body.traces).toHaveLength(2);
    });

    it.each([
      ['garbage', 'not-a-cursor'],
      ['a JSON object', Buffer.from('{"a":1}').toString('base64url')],
      ['a wrong time form', Buffer.from('["2026-11-01","x"]').toString('base64url')],
    ])('answers 400 naming /cursor for a cursor that is %s', async (_name, cursor) => {
      const { agent, owner } = await agentWithOwner();
      await ingest(agent, [traceSnapshot()]);
      const res = await listPage(agent.agentId, owner, `?cursor=${encodeURIComponent(cursor)}`);
      expect(isProblem(res, 400)).toBe(true);
      expect(res.body.errors.map((e: { pointer: string }) => e.pointer)).toEqual([
        expect.stringMatching(/\/cursor$/),
      ]);
    });

    // Forged cursors of the right shape reach the database; they must still be a client error.
    it.each([
      ['an impossible date', '["2026-13-45T25:61:61.000000Z","x"]'],
      ['an id with a NUL', '["2026-11-01T12:00:00.000000Z","a\\u0000b"]'],
    ])('answers 400, not 500, for a forged cursor with %s', async (_name, json) => {
      const { agent, owner } = await agentWithOwner();
      await ingest(agent, [traceSnapshot()]);
      const cursor = Buffer.from(json).toString('base64url');
      const res = await listPage(agent.agentId, owner, `?cursor=${cursor}`);
      expect(isProblem(res, 400)).toBe(true);
    });

    it('answers 400 for an unknown status value', async () => {
      const { agent, owner } = await agentWithOwner();
      const res = await listPage(agent.agentId, owner, '?status=finished');
      expect(isProblem(res, 400)).toBe(true);
      expect(res.body.errors.map((e: { pointer: string }) => e.pointer)).toEqual([
        expect.stringMatching(/\/status$/),
      ]);
    });

    it('answers 404 for an agent the user has no role on, the same as for no agent at all', async () => {
      const { agent } = await agentWithOwner();
      await ingest(agent, [traceSnapshot({ inputSummary: 'not yours' })]);
      const other = await agentWithOwner();
      const res = await listPage(agent.agentId, other.owner);
      expect(isProblem(res, 404)).toBe(true);
      expect(res.text).not.toContain('not yours');
      const missing = await listPage(`no-such-agent-${newId()}`, other.owner);
      expect(isProblem(missing, 404)).toBe(true);
      expect(res.body.detail).toBe(missing.body.detail);
    });

    it("lists only the agent's own traces", async () => {
      const mine = await agentWithOwner();
      const theirs = await agentWithOwner();
      const own = traceSnapshot();
      await ingest(mine.agent, [own]);
      await ingest(theirs.agent, [traceSnapshot()]);
      const res = await listPage(mine.agent.agentId, mine.owner);
      expect(res.body.traces.map((t: Trace) => t.id)).toEqual([own.id]);
    });
  });
});
