import { afterAll, afterEach, beforeAll, expect, inject, it } from 'vitest';
import { runCli } from '../harness/cli-process.js';
import { describeWithPostgres, postgresUrl, redisUrl } from '../harness/engines.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import type { SseClient } from '../harness/sse-client.js';
import { startTestServer, type TestServer } from '../harness/test-server.js';
import { runBatch } from '../fixtures/batches.js';
import {
  expectAccessRevoked,
  expectProblem,
  liveDriver,
  newUser,
  sleep,
  within,
} from './live-helpers.js';

/** The bound the issue sets for a revocation made anywhere. */
const BOUND_MS = 5_000;
/** "At once" on the instance that revoked, with room for a noisy machine. */
const AT_ONCE_MS = 2_000;

/**
 * Two instances on one PostgreSQL schema (each its own stream registry, key cache and access
 * check, as two `flightlog serve` processes have), and the CLI as a third process working on
 * the store directly: access removed anywhere ends the streams on every instance within 5 s,
 * and a revoked or deleted agent's key is refused on every instance within 5 s. Defaults
 * throughout: LIVE_ACCESS_CHECK_MS 2 s, API_KEY_CACHE_MS 2 s.
 */
describeWithPostgres('revoked access across two instances and the CLI (PostgreSQL)', () => {
  let a: TestServer;
  let b: TestServer;
  const onA = liveDriver(() => a);
  const onB = liveDriver(() => b);
  /** What each case measured, printed at the end (the README's reliability table quotes it). */
  const figures: string[] = [];

  beforeAll(async () => {
    a = await startTestServer('postgres');
    // the same identity provider: A's tokens are valid on B
    b = await startTestServer('postgres', { auth: { jwtSecret: a.jwtSecret } }, { shareWith: a });
  });
  afterEach(() => {
    onA.closeAll();
    onB.closeAll();
  });
  afterAll(async () => {
    console.log(`[revoked access, two instances] ${figures.join('; ')}`);
    for (const server of [b, a]) {
      server?.app.server.closeAllConnections();
      await server?.close();
    }
  });

  const cli = async (...args: string[]) => {
    const result = await runCli(args, {
      DATABASE_URL: postgresUrl(),
      DATABASE_SCHEMA: a.location.databaseSchema!,
    });
    expect(result.code, result.stderr).toBe(0);
    return JSON.parse(result.stdout) as unknown;
  };

  const watchAs = async (driver: ReturnType<typeof liveDriver>, agentId: string, token: string) => {
    const sse = await driver.open(agentId, token);
    expect(sse.status, sse.body).toBe(200);
    await sse.waitFor((c) => c.comments.includes('connected'), 5_000, ': connected');
    return sse;
  };

  /** Waits for `streams` to end; returns how long that took from `since`. */
  const endedWithin = async (streams: SseClient[], since: number, ms: number, what: string) => {
    await within(Promise.all(streams.map((s) => s.ended)), ms, what);
    for (const sse of streams) expectAccessRevoked(sse);
    return Date.now() - since;
  };

  /** Posts batches to `server` until it answers 401; returns how long that took from `since`. */
  const refusedWithin = async (server: TestServer, apiKey: string, since: number) => {
    let res = await postBatch(server.url, apiKey, runBatch().body);
    while (res.status === 202 && Date.now() - since < BOUND_MS + 1_000) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      res = await postBatch(server.url, apiKey, runBatch().body);
    }
    expect(isProblem(res, 401), `${res.status} ${res.text}`).toBe(true);
    return Date.now() - since;
  };

  it('a member removed through A’s admin API: A’s stream ends at once, B’s within 5 s, and B refuses them next', async () => {
    const agent = await a.createAgent();
    const run = runBatch();
    expect((await postBatch(b.url, agent.apiKey, run.body)).status).toBe(202);
    const viewer = newUser();
    const token = await a.userToken(viewer, agent.agentId, 'viewer');
    const streamOnA = await watchAs(onA, agent.agentId, token);
    const streamOnB = await watchAs(onB, agent.agentId, token);
    const bystander = await watchAs(
      onB,
      agent.agentId,
      await a.userToken(newUser(), agent.agentId),
    );

    const removedAt = Date.now();
    const removed = await send(
      a.url,
      `/admin/v1/agents/${agent.agentId}/members/${viewer}`,
      undefined,
      {
        method: 'DELETE',
        token: a.adminToken,
      },
    );
    expect(removed.status).toBe(204);
    await endedWithin([streamOnA], removedAt, AT_ONCE_MS, 'the stream on A');
    const tookMs = await endedWithin([streamOnB], removedAt, BOUND_MS, 'the stream on B');
    expect(tookMs).toBeLessThan(BOUND_MS);
    figures.push(`member removed on A: B's stream ended after ${tookMs} ms`);

    expectProblem(await onB.open(agent.agentId, token), 403);
    const read = await send(b.url, `/v1/traces/${run.trace.id}`, undefined, { token });
    expect(isProblem(read, 404)).toBe(true);
    await onB.settle(agent, bystander);
    expect(bystander.isEnded).toBe(false);
  });

  it('a key revoked through A’s admin API is refused by B within 5 s, though B had it cached', async () => {
    const agent = await a.createAgent();
    const issued = await send(
      a.url,
      `/admin/v1/agents/${agent.agentId}/keys`,
      {},
      {
        token: a.adminToken,
      },
    );
    const { keyId, apiKey } = issued.body as { keyId: string; apiKey: string };
    expect((await postBatch(b.url, apiKey, runBatch().body)).status).toBe(202);
    const revokedAt = Date.now();
    const revoked = await send(a.url, `/admin/v1/keys/${keyId}`, undefined, {
      method: 'DELETE',
      token: a.adminToken,
    });
    expect(revoked.status).toBe(204);
    expect(isProblem(await postBatch(a.url, apiKey, runBatch().body), 401)).toBe(true);
    const refusedMs = await refusedWithin(b, apiKey, revokedAt);
    expect(refusedMs).toBeLessThan(BOUND_MS);
    figures.push(`key revoked on A: refused by B after ${refusedMs} ms`);
    expect((await postBatch(b.url, agent.apiKey, runBatch().body)).status).toBe(202);
  });

  it('`flightlog member revoke` (a process of its own, no server involved) ends the streams on A and B within 5 s', async () => {
    const agent = await a.createAgent();
    const viewer = newUser();
    const token = await a.userToken(viewer, agent.agentId, 'owner');
    const streams = [
      await watchAs(onA, agent.agentId, token),
      await watchAs(onB, agent.agentId, token),
      await watchAs(onB, agent.agentId, token),
    ];
    expect(await cli('member', 'revoke', '--agent', agent.agentId, '--user', viewer)).toEqual({
      agentId: agent.agentId,
      userId: viewer,
      removed: true,
    });
    const tookMs = await endedWithin(streams, Date.now(), BOUND_MS, 'the streams on A and B');
    expect(tookMs).toBeLessThan(BOUND_MS);
    figures.push(`member revoked by the CLI: streams ended ${tookMs} ms after it exited`);
    expectProblem(await onA.open(agent.agentId, token), 403);
  });

  it('`flightlog agent delete` ends every stream of the agent on A and B, its key is refused and its reads answer 404 within 5 s; another agent is untouched', async () => {
    const agent = await a.createAgent();
    const other = await a.createAgent();
    const run = runBatch();
    // both instances have the key cached
    for (const server of [a, b])
      expect((await postBatch(server.url, agent.apiKey, run.body)).status).toBe(202);
    const user = newUser();
    const token = await a.userToken(user, agent.agentId, 'owner');
    await a.userToken(user, other.agentId, 'viewer');
    const streams = [
      await watchAs(onA, agent.agentId, token),
      await watchAs(onB, agent.agentId, await a.userToken(newUser(), agent.agentId)),
    ];
    const untouched = await watchAs(onB, other.agentId, token);

    expect(await cli('agent', 'delete', agent.agentId)).toEqual({
      agentId: agent.agentId,
      deleted: true,
    });
    const deletedAt = Date.now();
    const [streamsMs, refusedOnA, refusedOnB] = await Promise.all([
      endedWithin(streams, deletedAt, BOUND_MS, 'the streams of the agent'),
      refusedWithin(a, agent.apiKey, deletedAt),
      refusedWithin(b, agent.apiKey, deletedAt),
    ]);
    for (const ms of [streamsMs, refusedOnA, refusedOnB]) expect(ms).toBeLessThan(BOUND_MS);
    figures.push(
      `agent deleted by the CLI: streams ended after ${streamsMs} ms, key refused by A after ` +
        `${refusedOnA} ms and by B after ${refusedOnB} ms`,
    );
    for (const server of [a, b]) {
      const read = await send(server.url, `/v1/traces/${run.trace.id}`, undefined, { token });
      expect(isProblem(read, 404)).toBe(true);
    }
    await onB.settle(other, untouched);
    expect(untouched.isEnded).toBe(false);

    const again = await runCli(['agent', 'delete', agent.agentId], {
      DATABASE_URL: postgresUrl(),
      DATABASE_SCHEMA: a.location.databaseSchema!,
    });
    expect(again.code).toBe(2);
    expect(again.stderr).toContain(`no agent ${agent.agentId}`);
  });

  it('an agent deleted through A’s admin API: A refuses its key at once, B within 5 s, and B’s streams of it end', async () => {
    const agent = await a.createAgent();
    for (const server of [a, b])
      expect((await postBatch(server.url, agent.apiKey, runBatch().body)).status).toBe(202);
    const streamOnB = await watchAs(
      onB,
      agent.agentId,
      await a.userToken(newUser(), agent.agentId),
    );
    const deletedAt = Date.now();
    const deleted = await send(a.url, `/admin/v1/agents/${agent.agentId}`, undefined, {
      method: 'DELETE',
      token: a.adminToken,
    });
    expect(deleted.status).toBe(204);
    expect(isProblem(await postBatch(a.url, agent.apiKey, runBatch().body), 401)).toBe(true);
    const [refusedOnB, endedOnB] = await Promise.all([
      refusedWithin(b, agent.apiKey, deletedAt),
      endedWithin([streamOnB], deletedAt, BOUND_MS, 'the stream on B'),
    ]);
    expect(refusedOnB).toBeLessThan(BOUND_MS);
    expect(endedOnB).toBeLessThan(BOUND_MS);
    figures.push(
      `agent deleted on A: B's stream ended after ${endedOnB} ms, key refused by B after ${refusedOnB} ms`,
    );
  });
});

/**
 * The same two instances, now sharing a Redis bus, with the periodic check slowed to its
 * longest (4 s): a removal made through either admin API, or by the CLI given REDIS_URL, is
 * announced on the bus and ends the streams on every instance at once, not at the next check.
 */
describeWithPostgres('revoked access announced through Redis (PostgreSQL + Redis)', () => {
  const redisAvailable = inject('redisUrl') !== null;
  if (!redisAvailable) {
    process.stdout.write('!!! SKIPPED "revoked access announced through Redis": no Redis !!!\n');
    return;
  }
  let a: TestServer;
  let b: TestServer;
  const onA = liveDriver(() => a);
  const onB = liveDriver(() => b);
  const figures: string[] = [];
  const SLOW_CHECK_MS = 4_000;
  /** Well under the slowed check: only an announcement can end a stream this fast. */
  const ANNOUNCED_MS = 1_500;

  beforeAll(async () => {
    a = await startTestServer(
      'postgres',
      { live: { accessCheckMs: SLOW_CHECK_MS } },
      { bus: 'redis' },
    );
    b = await startTestServer(
      'postgres',
      { auth: { jwtSecret: a.jwtSecret }, live: { accessCheckMs: SLOW_CHECK_MS } },
      { shareWith: a, bus: 'redis' },
    );
  });
  afterEach(() => {
    onA.closeAll();
    onB.closeAll();
  });
  afterAll(async () => {
    console.log(`[revoked access announced through Redis] ${figures.join('; ')}`);
    for (const server of [b, a]) {
      server?.app.server.closeAllConnections();
      await server?.close();
    }
  });

  const watchAs = async (driver: ReturnType<typeof liveDriver>, agentId: string, token: string) => {
    const sse = await driver.open(agentId, token);
    expect(sse.status, sse.body).toBe(200);
    await sse.waitFor((c) => c.comments.includes('connected'), 5_000, ': connected');
    return sse;
  };
  const broadcastRevocations = async (server: TestServer) =>
    (await server.metrics.liveStreamsRevoked.get()).values.find((v) => v.labels.via === 'broadcast')
      ?.value ?? 0;

  it('a member removed through A’s admin API: B’s stream ends at once, told through Redis', async () => {
    const agent = await a.createAgent();
    const viewer = newUser();
    const token = await a.userToken(viewer, agent.agentId, 'viewer');
    const streamOnB = await watchAs(onB, agent.agentId, token);
    const bystander = await watchAs(
      onB,
      agent.agentId,
      await a.userToken(newUser(), agent.agentId),
    );
    const before = await broadcastRevocations(b);

    const removedAt = Date.now();
    const removed = await send(
      a.url,
      `/admin/v1/agents/${agent.agentId}/members/${viewer}`,
      undefined,
      { method: 'DELETE', token: a.adminToken },
    );
    expect(removed.status).toBe(204);
    await within(streamOnB.ended, ANNOUNCED_MS, 'the stream on B, through Redis');
    const tookMs = Date.now() - removedAt;
    expectAccessRevoked(streamOnB);
    expect(await broadcastRevocations(b)).toBe(before + 1);
    expect(bystander.isEnded).toBe(false);
    figures.push(`member removed on A: B's stream ended after ${tookMs} ms`);
  });

  it('`flightlog member revoke` and `agent delete` with REDIS_URL: every stream on A and B ends at once', async () => {
    const env = {
      DATABASE_URL: postgresUrl(),
      DATABASE_SCHEMA: a.location.databaseSchema!,
      REDIS_URL: redisUrl(),
      LIVE_REDIS_PREFIX: a.liveRedisPrefix,
    };
    const agent = await a.createAgent();
    const viewer = newUser();
    const token = await a.userToken(viewer, agent.agentId, 'viewer');
    const ownerToken = await a.userToken(newUser(), agent.agentId, 'owner');
    const viewerStreams = [
      await watchAs(onA, agent.agentId, token),
      await watchAs(onB, agent.agentId, token),
    ];
    const ownerStreams = [
      await watchAs(onA, agent.agentId, ownerToken),
      await watchAs(onB, agent.agentId, ownerToken),
    ];

    const announced = async () => (await broadcastRevocations(a)) + (await broadcastRevocations(b));
    const before = await announced();
    const cliEnds = async (args: string[], streams: SseClient[], what: string) => {
      const result = await runCli(args, env);
      expect(result.code, result.stderr).toBe(0);
      const exitedAt = Date.now();
      await within(Promise.all(streams.map((s) => s.ended)), ANNOUNCED_MS, what);
      for (const sse of streams) expectAccessRevoked(sse);
      figures.push(`${what}: streams ended ${Date.now() - exitedAt} ms after the CLI exited`);
    };
    await cliEnds(
      ['member', 'revoke', '--agent', agent.agentId, '--user', viewer],
      viewerStreams,
      'member revoked by the CLI',
    );
    for (const sse of ownerStreams) expect(sse.isEnded).toBe(false);
    // ended by the announcement, not by a periodic check that happened to come
    expect(await announced()).toBe(before + 2);

    expect((await postBatch(b.url, agent.apiKey, runBatch().body)).status).toBe(202);
    // published after the 202: wait until A's view of the shared bus has it
    const deadline = Date.now() + 5_000;
    while ((await a.bus.replay(agent.agentId)).messages.length === 0 && Date.now() < deadline)
      await sleep(20);
    expect((await a.bus.replay(agent.agentId)).messages).toHaveLength(1);
    await cliEnds(['agent', 'delete', agent.agentId], ownerStreams, 'agent deleted by the CLI');
    expect(await announced()).toBe(before + 4);
    // and its buffer on the shared bus went with it
    expect((await a.bus.replay(agent.agentId)).messages).toEqual([]);
  });
});
