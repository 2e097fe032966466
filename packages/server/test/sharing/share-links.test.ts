import type { Event, Trace, TraceAnalysis } from '@flightlog/protocol';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { finishedRun, newId } from '../fixtures/batches.js';
import { startTestWorker } from '../harness/analysis.js';
import { describeEngines, describeWithPostgres } from '../harness/engines.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { waitFor } from '../harness/wait.js';
import type { AnalysisWorker } from '../../src/analysis/analysis-worker.js';
import { KeyGuessLimiter } from '../../src/auth/key-guess-limiter.js';
import { ShareLinks } from '../../src/sharing/share-links.js';
import { deleteRunsInSteps } from '../../src/store/run-rows.js';

/*
 * Public share links of runs (issue 25, part 1): an owner or editor shares a run; the link's
 * holder reads that one run and nothing else; unsharing or deleting the run ends it at once.
 */

type SharedPage = { trace: Trace; events: Event[]; nextCursor: string | null };

const post = async (server: TestServer, agent: TestAgent, trace: Trace, events: Event[]) => {
  const res = await postBatch(server.url, agent.apiKey, {
    batchId: newId(),
    items: [{ trace, events }],
  });
  expect(res.status, res.text).toBe(202);
};

/** A finished run of two model calls, stored. */
const storedRun = async (server: TestServer, agent: TestAgent) => {
  const { trace, events } = finishedRun();
  await post(server, agent, trace, events);
  return { trace, events };
};

const share = (server: TestServer, traceId: string, token: string) =>
  send(server.url, `/v1/traces/${traceId}/share`, {}, { token });
const unshare = (server: TestServer, traceId: string, token: string) =>
  send(server.url, `/v1/traces/${traceId}/share`, undefined, { method: 'DELETE', token });
const readShared = (server: TestServer, shareToken: string, query = '') =>
  send(server.url, `/v1/shared/trace${query}`, undefined, { token: shareToken });

describeEngines('share links [%s]', (engine) => {
  let server: TestServer;
  let worker: AnalysisWorker;
  const logLines: string[] = [];
  beforeAll(async () => {
    server = await startTestServer(engine, {}, { logLines });
    worker = startTestWorker(server.store);
  });
  afterAll(async () => {
    await worker.stop(5_000);
    await server.close();
  });

  it('an editor shares a run: the link shows that run, its events and its autopsy to anyone, and its team sees the link', async () => {
    const agent = await server.createAgent();
    const { trace, events } = await storedRun(server, agent);
    const editor = await server.userToken(`editor-${newId()}`, agent.agentId, 'editor');

    const first = await share(server, trace.id, editor);
    expect(first.status, first.text).toBe(201);
    const { shareToken, path } = first.body as { shareToken: string; path: string };
    expect(shareToken).toMatch(/^fls_[A-Za-z0-9_-]{43}$/); // 256 random bits
    expect(path).toBe(`/shared/${shareToken}`);
    expect(first.headers.get('cache-control')).toBe('no-store');
    // sharing again shows the same link
    const again = await share(server, trace.id, editor);
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ shareToken, path });

    // the team (a viewer too) sees the current link on the run
    const viewer = await server.userToken(`viewer-${newId()}`, agent.agentId);
    const team = await send(server.url, `/v1/traces/${trace.id}`, undefined, { token: viewer });
    expect(team.status, team.text).toBe(200);
    expect((team.body as SharedPage).trace.shareToken).toBe(shareToken);

    // anyone with the link, no account: the run and its events, without the link itself
    const shared = await readShared(server, shareToken);
    expect(shared.status, shared.text).toBe(200);
    const page = shared.body as SharedPage;
    expect(page.trace).toMatchObject({ id: trace.id, agentId: agent.agentId, status: 'completed' });
    expect(page.trace.shareToken).toBeNull();
    expect(page.events.map((e) => e.id)).toEqual(events.map((e) => e.id));
    // paged as the read API pages
    const one = await readShared(server, shareToken, '?limit=1');
    expect((one.body as SharedPage).events.map((e) => e.id)).toEqual([events[0]?.id]);
    const next = await readShared(
      server,
      shareToken,
      `?limit=1&cursor=${(one.body as SharedPage).nextCursor}`,
    );
    expect((next.body as SharedPage).events.map((e) => e.id)).toEqual([events[1]?.id]);

    const analysis = await waitFor(async () => {
      const res = await send(server.url, '/v1/shared/analysis', undefined, { token: shareToken });
      return res.status === 200 && (res.body as TraceAnalysis).status === 'done' ? res : undefined;
    }, 'the shared run to be analysed');
    expect((analysis.body as TraceAnalysis).autopsy).toEqual(expect.any(String));
  });

  it('unsharing ends the link at once; sharing again makes a new one; a deleted run answers like a link that never was', async () => {
    const agent = await server.createAgent();
    const { trace } = await storedRun(server, agent);
    const owner = await server.userToken(`owner-${newId()}`, agent.agentId, 'owner');
    const first = (await share(server, trace.id, owner)).body as { shareToken: string };
    expect((await readShared(server, first.shareToken)).status).toBe(200);

    const ended = await unshare(server, trace.id, owner);
    expect(ended.status, ended.text).toBe(204);
    const dead = await readShared(server, first.shareToken);
    expect(isProblem(dead, 404), dead.text).toBe(true);
    const team = await send(server.url, `/v1/traces/${trace.id}`, undefined, { token: owner });
    expect((team.body as SharedPage).trace.shareToken).toBeNull();
    // unsharing a run without a link changes nothing
    expect((await unshare(server, trace.id, owner)).status).toBe(204);

    const second = await share(server, trace.id, owner);
    expect(second.status).toBe(201);
    const renewed = (second.body as { shareToken: string }).shareToken;
    expect(renewed).not.toBe(first.shareToken);
    expect((await readShared(server, first.shareToken)).status).toBe(404);
    expect((await readShared(server, renewed)).status).toBe(200);

    const never = await readShared(server, `fls_${'A'.repeat(43)}`);
    const deleted = await send(server.url, `/v1/traces/${trace.id}`, undefined, {
      method: 'DELETE',
      token: owner,
    });
    expect(deleted.status, deleted.text).toBe(204);
    const gone = await readShared(server, renewed);
    expect(gone.status).toBe(404);
    const { requestId: _a, ...goneProblem } = gone.body as Record<string, unknown>;
    const { requestId: _b, ...neverProblem } = never.body as Record<string, unknown>;
    expect(goneProblem).toEqual(neverProblem);
  });

  it('a run being deleted, on request or by retention, loses its link before any of its events go', async () => {
    const agent = await server.createAgent();
    const owner = await server.userToken(`owner-${newId()}`, agent.agentId, 'owner');
    // on request: the tombstone, the first step of a deletion, ends the link
    const requested = await storedRun(server, agent);
    const first = (await share(server, requested.trace.id, owner)).body as { shareToken: string };
    await server.store.lifecycle.tombstone(agent.agentId, requested.trace.id, 60_000, 'admin');
    expect((await readShared(server, first.shareToken)).status).toBe(404);
    expect(await server.store.shares.runExists(requested.trace.id)).toBe(true);

    // retention (and agent deletion): the link is gone while the events are deleted step by step
    const expiring = await storedRun(server, agent);
    const second = (await share(server, expiring.trace.id, owner)).body as { shareToken: string };
    const duringSteps: number[] = [];
    await deleteRunsInSteps(server.store.sql, agent.agentId, [expiring.trace.id], 1, async () => {
      duringSteps.push((await readShared(server, second.shareToken)).status);
    });
    expect(duringSteps.length).toBeGreaterThan(1);
    expect(new Set(duringSteps)).toEqual(new Set([404]));
  });

  it("a viewer cannot share or unshare, another agent's member cannot even see the run, and a server without a secret says so", async () => {
    const agent = await server.createAgent();
    const { trace } = await storedRun(server, agent);
    const viewer = await server.userToken(`viewer-${newId()}`, agent.agentId, 'viewer');
    const refused = await share(server, trace.id, viewer);
    expect(isProblem(refused, 403), refused.text).toBe(true);
    expect(isProblem(await unshare(server, trace.id, viewer), 403)).toBe(true);

    const other = await server.createAgent();
    const stranger = await server.userToken(`stranger-${newId()}`, other.agentId, 'owner');
    expect(isProblem(await share(server, trace.id, stranger), 404)).toBe(true);
    expect(isProblem(await unshare(server, trace.id, stranger), 404)).toBe(true);
    expect(isProblem(await share(server, `tr_${newId()}`, stranger), 404)).toBe(true);

    const noSecret = new ShareLinks({
      store: server.store,
      seal: undefined,
      guesses: new KeyGuessLimiter({ maxFailures: 10, windowMs: 60_000, maxAddresses: 10 }),
    });
    const editor = `editor-${newId()}`;
    await server.userToken(editor, agent.agentId, 'editor');
    expect(await noSecret.share({ kind: 'user', userId: editor }, trace.id)).toEqual({
      kind: 'unavailable',
    });
  });

  it('a link reaches its own run and nothing else, and the store keeps no token', async () => {
    const agent = await server.createAgent();
    const { trace } = await storedRun(server, agent);
    const { trace: neighbour } = await storedRun(server, agent);
    const owner = await server.userToken(`owner-${newId()}`, agent.agentId, 'owner');
    const { shareToken } = (await share(server, trace.id, owner)).body as { shareToken: string };

    // no shared route takes another run: a trace id in the query is refused, not followed
    const other = await readShared(server, shareToken, `?id=${neighbour.id}`);
    expect(isProblem(other, 400), other.text).toBe(true);
    // the token is no identity: the read API, the agent list, the live stream and the export
    for (const path of [
      `/v1/traces/${neighbour.id}`,
      `/v1/traces/${trace.id}`,
      '/v1/agents',
      `/v1/agents/${agent.agentId}/traces`,
      `/v1/agents/${agent.agentId}/live`,
      `/v1/agents/${agent.agentId}/export`,
      `/v1/traces/${trace.id}/analysis`,
    ]) {
      const res = await send(server.url, path, undefined, { token: shareToken, timeoutMs: 5_000 });
      expect(res.status, `${path}: ${res.text}`).toBe(401);
    }
    // nor can it share, unshare or delete
    expect((await unshare(server, trace.id, shareToken)).status).toBe(401);
    expect((await readShared(server, shareToken)).status).toBe(200);

    const rows = await server.store.sql.query<Record<string, unknown>>(
      'SELECT * FROM trace_shares WHERE trace_id = $1',
      [trace.id],
    );
    expect(rows).toHaveLength(1);
    expect(JSON.stringify(rows)).not.toContain(shareToken);
    expect(JSON.stringify(rows)).not.toContain(shareToken.slice(4));
  });

  it("no log line holds a token, whether sent as credential or in the public page's address", async () => {
    const agent = await server.createAgent();
    const { trace } = await storedRun(server, agent);
    const owner = await server.userToken(`owner-${newId()}`, agent.agentId, 'owner');
    const { shareToken } = (await share(server, trace.id, owner)).body as { shareToken: string };
    logLines.length = 0;
    await readShared(server, shareToken);
    await send(server.url, `/shared/${shareToken}?from=mail`);
    await send(server.url, `/shared/${shareToken}`);
    // wherever else a token is written into an address
    await send(server.url, `/SHARED/${shareToken}/`);
    await send(server.url, `/runs/x?link=${encodeURIComponent(shareToken)}`);
    await send(server.url, `/v1/shared/trace?t=${shareToken}`);
    // percent-encoded, as the server decodes it (the first two still reach the public page)
    const rest = shareToken.slice(4);
    for (const path of [
      `/%73hared/%66ls_${rest}`,
      `/sh%61red/fls%5F${rest}`,
      `/runs/x?t=fls%255F${rest}`,
    ])
      await send(server.url, path);
    await readShared(server, `${shareToken.slice(0, -1)}x`);
    expect(logLines.length).toBeGreaterThan(0);
    const logs = logLines.join('\n');
    expect(logs).toContain('/shared/[token]');
    expect(logs).not.toContain(shareToken.slice(4, 30));
  });
});

describeEngines('share link guessing [%s]', (engine) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(engine, { auth: { apiKeyMaxFailures: 3 } });
  });
  afterAll(() => server.close());

  it('guessing links costs an address what guessing API keys does: 429 with Retry-After, while a link already read there keeps working', async () => {
    const agent = await server.createAgent();
    const { trace } = await storedRun(server, agent);
    const owner = await server.userToken(`owner-${newId()}`, agent.agentId, 'owner');
    const { shareToken } = (await share(server, trace.id, owner)).body as { shareToken: string };
    expect((await readShared(server, shareToken)).status).toBe(200);
    // requests without a token guess nothing
    for (let i = 0; i < 5; i++)
      expect((await send(server.url, '/v1/shared/trace')).status).toBe(404);
    const guesses = [] as number[];
    for (let i = 0; i < 3; i++)
      guesses.push((await readShared(server, `fls_${String(i).repeat(43)}`)).status);
    expect(guesses).toEqual([404, 404, 404]);
    const limited = await readShared(server, `fls_${'9'.repeat(43)}`);
    expect(isProblem(limited, 429), limited.text).toBe(true);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    // text that is not a token at all counts as a guess too
    expect((await readShared(server, 'not-a-token')).status).toBe(429);
    // the link read here before is no guess: it still opens, and still ends when unshared
    expect((await readShared(server, shareToken)).status).toBe(200);
    expect((await unshare(server, trace.id, owner)).status).toBe(204);
    expect((await readShared(server, shareToken)).status).toBe(404);
    expect((await readShared(server, shareToken)).status).toBe(429);
  });
});

describeWithPostgres('share links on two instances', () => {
  let a: TestServer;
  let b: TestServer;
  beforeAll(async () => {
    a = await startTestServer('postgres');
    b = await startTestServer('postgres', {}, { shareWith: a });
  });
  afterAll(async () => {
    await b.close();
    await a.close();
  });

  it('a link shared on one instance opens on the other, and unsharing it on one ends it on both at once', async () => {
    const agent = await a.createAgent();
    const { trace } = await storedRun(a, agent);
    const owner = await a.userToken(`owner-${newId()}`, agent.agentId, 'owner');
    const { shareToken } = (await share(a, trace.id, owner)).body as { shareToken: string };
    expect((await readShared(b, shareToken)).status).toBe(200);
    // the other instance shows the team the same link (both keep the same secret)
    const onB = await send(b.url, `/v1/traces/${trace.id}`, undefined, { token: owner });
    expect((onB.body as SharedPage).trace.shareToken).toBe(shareToken);

    expect((await unshare(b, trace.id, owner)).status).toBe(204);
    expect((await readShared(a, shareToken)).status).toBe(404);
    expect((await readShared(b, shareToken)).status).toBe(404);
  });
});
