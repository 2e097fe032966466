import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildApp, type FlightlogApp } from '../../src/app.js';
import { mintDevToken } from '../../src/auth/dev-token.js';
import { changeConfig, loadConfig } from '../../src/config.js';
import { createRedisBus } from '../../src/live/redis-bus.js';
import { openStore, type Store } from '../../src/store/open-store.js';
import { redisUrl } from '../harness/engines.js';
import { postBatch, send } from '../harness/http.js';
import { SseClient } from '../harness/sse-client.js';
import { TcpProxy } from '../harness/tcp-proxy.js';
import { runBatch, type RunBatch } from '../fixtures/batches.js';

const WARNING_DATA = '{"message":"live stream interrupted"}';
/** The publish gives up after LIVE_PUBLISH_TIMEOUT_MS (250 ms by default). */
const FAST_MS = 1_000;
/** Time for the Redis client to reconnect once the proxy listens again. */
const RECOVERY_MS = 10_000;

const available = inject('redisUrl') !== null;
if (!available)
  process.stdout.write('!!! SKIPPED "live stream, Redis fault": Redis is unreachable !!!\n');

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

interface ProxiedServer extends FlightlogApp {
  url: string;
  prefix: string;
  agentIds: string[];
  /** An agent (admin API), a viewer on it and the viewer's identity token. */
  newAgent(): Promise<{ agentId: string; apiKey: string; token: string }>;
  close(): Promise<void>;
}

/**
 * What startTestServer builds (PGlite, admin API, HS256 identity), but with a Redis bus that
 * reaches the real Redis through `proxy`. The servers of this file share one in-memory store
 * (opening PGlite takes seconds); agents are unique, so they do not meet.
 */
async function startProxiedServer(
  store: Store,
  proxy: { port: number },
  options: { waitForRedis: boolean } = { waitForRedis: true },
): Promise<ProxiedServer> {
  const adminToken = randomBytes(24).toString('hex');
  const jwtSecret = randomBytes(32).toString('hex');
  const prefix = `flightlog-test:fault:${randomBytes(6).toString('hex')}:`;
  const config = changeConfig(loadConfig({}), {
    http: { port: 0, host: '127.0.0.1' },
    auth: { adminToken, jwtSecret },
    analysis: { graceMs: 0 },
  });
  const bus = createRedisBus({
    url: `redis://127.0.0.1:${proxy.port}`,
    keyPrefix: prefix,
    blockMs: 200,
  });
  const built = await buildApp({ config, store, bus, logger: false, closeStoreOnClose: false });
  // The bus connects in the background and fails fast until it is ready; a stream opened before
  // that would (rightly) warn. Wait for a healthy Redis to be usable, so that a warning in these
  // tests is the proxy's doing.
  const deadline = Date.now() + 5_000;
  while (options.waitForRedis) {
    try {
      await bus.replay(`readiness-${randomBytes(4).toString('hex')}`);
      break;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await sleep(20);
    }
  }
  await built.app.listen({ port: 0, host: '127.0.0.1' });
  const address = built.app.server.address();
  if (!address || typeof address === 'string') throw new Error('no address');
  const url = `http://127.0.0.1:${address.port}`;
  const agentIds: string[] = [];
  const admin = async (method: string, path: string, body: unknown) => {
    const res = await send(url, path, body, { method, token: adminToken });
    if (res.status >= 300) throw new Error(`admin ${method} ${path}: ${res.status} ${res.text}`);
    return res.body;
  };
  return {
    ...built,
    url,
    prefix,
    agentIds,
    async newAgent() {
      const agent = (await admin('POST', '/admin/v1/agents', {})) as {
        agentId: string;
        apiKey: string;
      };
      agentIds.push(agent.agentId);
      const user = `viewer-${randomBytes(4).toString('hex')}`;
      await admin('PUT', `/admin/v1/agents/${agent.agentId}/members/${user}`, { role: 'viewer' });
      return { ...agent, token: await mintDevToken(jwtSecret, user) };
    },
    close: () => built.app.close(),
  };
}

/** Deletes the test's streams from the real Redis. */
async function dropStreams(server: ProxiedServer | undefined): Promise<void> {
  if (!server || server.agentIds.length === 0) return;
  const redis = new Redis(redisUrl(), { lazyConnect: true });
  try {
    await redis.connect();
    await redis.del(...server.agentIds.map((id) => `${server.prefix}${id}`));
  } finally {
    redis.disconnect();
  }
}

async function publishFailures(url: string): Promise<number> {
  const res = await send(url, '/metrics');
  const match = /^flightlog_live_publish_failures_total (\d+)$/m.exec(res.text);
  if (!match) throw new Error(`no flightlog_live_publish_failures_total in:\n${res.text}`);
  return Number(match[1]);
}

/**
 * Publishes happen after the 202 (off the request's path): each lost one is counted once the
 * bus fails it or the publish timeout passes, so wait for the count, then check it is exact.
 */
async function expectPublishFailures(url: string, expected: number): Promise<void> {
  const deadline = Date.now() + 5_000;
  while ((await publishFailures(url)) < expected && Date.now() < deadline) await sleep(50);
  await sleep(300); // no late extra failure for the same publishes
  expect(await publishFailures(url)).toBe(expected);
}

const warnings = (sse: SseClient) => sse.events.filter((e) => e.event === 'warning');
const traceIds = (sse: SseClient) => sse.traces().map((t) => t.item.trace.id as string);

/**
 * After Redis is back: posts a probe batch every few hundred ms until one reaches `sse` (batches
 * published while the bus is still reconnecting wait in its backlog, so every probe arrives, in
 * order). Returns the probes posted.
 */
async function waitForRecovery(
  url: string,
  apiKey: string,
  sse: SseClient,
): Promise<{ probes: RunBatch[]; tookMs: number }> {
  const started = Date.now();
  const probes: RunBatch[] = [];
  while (Date.now() - started < RECOVERY_MS) {
    const probe = runBatch();
    probes.push(probe);
    expect((await postBatch(url, apiKey, probe.body)).status).toBe(202);
    try {
      await sse.waitFor((c) => traceIds(c).includes(probe.trace.id), 400, 'probe');
      return { probes, tookMs: Date.now() - started };
    } catch {
      if (sse.isEnded) throw new Error('the live stream ended while Redis was away');
    }
  }
  throw new Error(`no batch reached the live stream within ${RECOVERY_MS} ms of Redis returning`);
}

/** Posts `count` batches and expects each on `sse` promptly, in order. */
async function expectLiveDelivery(url: string, apiKey: string, sse: SseClient, count: number) {
  const posted: RunBatch[] = [];
  for (let i = 0; i < count; i++) {
    const batch = runBatch({ events: 2 });
    posted.push(batch);
    const started = Date.now();
    expect((await postBatch(url, apiKey, batch.body)).status).toBe(202);
    await sse.waitFor((c) => traceIds(c).includes(batch.trace.id), 3_000, `batch ${i}`);
    expect(Date.now() - started).toBeLessThan(FAST_MS);
  }
  const ids = traceIds(sse);
  expect(ids.slice(-count)).toEqual(posted.map((p) => p.trace.id));
  expect(new Set(ids).size).toBe(ids.length);
}

describe.runIf(available)('live stream, Redis fault (real Redis behind a TCP proxy)', () => {
  let proxy: TcpProxy;
  let store: Store | undefined;
  let server: ProxiedServer | undefined;
  const clients: SseClient[] = [];

  beforeAll(async () => {
    store = await openStore({ poolSize: 4 });
    const target = new URL(redisUrl());
    proxy = new TcpProxy(target.hostname, Number(target.port || 6379));
    await proxy.start();
    server = await startProxiedServer(store, proxy);
  });
  afterAll(async () => {
    for (const sse of clients) sse.close();
    await server?.close();
    await proxy.close();
    await dropStreams(server);
    await store?.close();
  });

  const open = async (agentId: string, token: string, base = server!.url) => {
    const sse = await SseClient.open(`${base}/v1/agents/${agentId}/live`, token);
    clients.push(sse);
    return sse;
  };

  it('Redis lost mid-stream: a warning, the connection stays, ingest stays fast and stored, delivery resumes on the same connection', async () => {
    const s = server!;
    const agent = await s.newAgent();
    const sse = await open(agent.agentId, agent.token);
    expect(sse.status).toBe(200);
    const before = runBatch();
    expect((await postBatch(s.url, agent.apiKey, before.body)).status).toBe(202);
    await sse.waitFor((c) => traceIds(c).includes(before.trace.id), 3_000, 'a live batch');
    expect(warnings(sse)).toEqual([]);
    const failuresBefore = await publishFailures(s.url);

    await proxy.cut();
    await sse.waitFor((c) => warnings(c).length > 0, 3_000, 'event: warning');
    expect(warnings(sse)[0]).toEqual({ event: 'warning', data: WARNING_DATA, id: undefined });

    // Ingest does not wait on the missing bus beyond the publish timeout; the store has it all.
    const during = [runBatch({ events: 3 }), runBatch(), runBatch({ events: 2 })];
    for (const batch of during) {
      const started = Date.now();
      const res = await postBatch(s.url, agent.apiKey, batch.body);
      const tookMs = Date.now() - started;
      expect(res.status, res.text).toBe(202);
      expect(res.body).toEqual({ traceId: batch.trace.id });
      expect(tookMs, `POST took ${tookMs} ms while Redis was away`).toBeLessThan(FAST_MS);
    }
    for (const batch of during) {
      const read = await send(s.url, `/v1/traces/${batch.trace.id}`, undefined, {
        token: agent.token,
      });
      expect(read.status, read.text).toBe(200);
      expect(read.body.trace.id).toBe(batch.trace.id);
      expect(read.body.events.map((e: { id: string }) => e.id)).toEqual(
        batch.events.map((e) => e.id),
      );
    }
    // none lost: they wait in the bus's backlog for Redis
    await expectPublishFailures(s.url, failuresBefore);

    // still the same open connection, still registered
    await sleep(300);
    expect(sse.isEnded).toBe(false);
    expect(s.streams.size).toBe(1);
    expect(sse.events.every((e) => e.event === 'trace' || e.data === WARNING_DATA)).toBe(true);

    await proxy.restore();
    const { probes } = await waitForRecovery(s.url, agent.apiKey, sse);
    // what was stored during the outage came first, in order, then every probe
    expect(traceIds(sse)).toEqual([before, ...during, ...probes].map((b) => b.trace.id));
    await expectLiveDelivery(s.url, agent.apiKey, sse, 3);
    expect(sse.isEnded).toBe(false);
    expect(sse.comments.filter((c) => c === 'connected')).toHaveLength(1);
    // no batch twice, and the batch from before the cut still first
    expect(traceIds(sse)[0]).toBe(before.trace.id);
    expect(await publishFailures(s.url)).toBe(failuresBefore);

    // a second outage warns again, and is recovered from again
    await proxy.cut();
    await sse.waitFor((c) => warnings(c).length > 1, 3_000, 'a second event: warning');
    expect(warnings(sse)[1]!.data).toBe(WARNING_DATA);
    await proxy.restore();
    await waitForRecovery(s.url, agent.apiKey, sse);
    await expectLiveDelivery(s.url, agent.apiKey, sse, 1);
    expect(sse.isEnded).toBe(false);
    sse.close();
    await sse.ended;
  });

  it('Redis down when the stream opens: 200, `: connected` and a warning, then new batches once Redis is back', async () => {
    const s = server!;
    const agent = await s.newAgent();
    await proxy.cut();
    let restored = false;
    try {
      const sse = await open(agent.agentId, agent.token);
      expect(sse.status).toBe(200);
      expect(sse.headers?.get('content-type')).toBe('text/event-stream; charset=utf-8');
      await sse.waitFor((c) => warnings(c).length > 0, 3_000, 'event: warning');
      expect(sse.comments[0]).toBe('connected');
      expect(warnings(sse)[0]!.data).toBe(WARNING_DATA);
      expect(sse.events.every((e) => e.event === 'warning' && e.data === WARNING_DATA)).toBe(true);

      const during = runBatch();
      const started = Date.now();
      expect((await postBatch(s.url, agent.apiKey, during.body)).status).toBe(202);
      expect(Date.now() - started).toBeLessThan(FAST_MS);

      await proxy.restore();
      restored = true;
      await waitForRecovery(s.url, agent.apiKey, sse);
      await expectLiveDelivery(s.url, agent.apiKey, sse, 2);
      expect(sse.isEnded).toBe(false);
      sse.close();
    } finally {
      if (!restored) await proxy.restore();
    }
  });

  it('Redis down when the stream opens: the batches stored before the outage arrive on that connection once Redis is back, each once, then new ones', async () => {
    const s = server!;
    const agent = await s.newAgent();
    const before = [runBatch(), runBatch({ events: 2 }), runBatch()];
    for (const batch of before)
      expect((await postBatch(s.url, agent.apiKey, batch.body)).status).toBe(202);
    // on the bus before the outage
    expect((await s.bus.replay(agent.agentId)).messages).toHaveLength(before.length);
    const beforeIds = before.map((b) => b.trace.id);

    await proxy.cut();
    let restored = false;
    try {
      const sse = await open(agent.agentId, agent.token);
      expect(sse.status).toBe(200);
      await sse.waitFor((c) => warnings(c).length > 0, 3_000, 'event: warning');
      await sleep(300);
      expect(traceIds(sse)).toEqual([]);
      // one outage, one warning (the bus being down and the replay failing are the same news)
      expect(warnings(sse)).toHaveLength(1);

      await proxy.restore();
      restored = true;
      await sse.waitFor(
        (c) => beforeIds.every((id) => traceIds(c).includes(id)),
        RECOVERY_MS,
        'the replay once Redis is back',
      );
      expect(traceIds(sse).slice(0, before.length)).toEqual(beforeIds);
      await expectLiveDelivery(s.url, agent.apiKey, sse, 2);
      // every batch once, the ones from before the outage first
      const ids = traceIds(sse);
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids.slice(0, before.length)).toEqual(beforeIds);
      expect(sse.comments.filter((c) => c === 'connected')).toHaveLength(1);
      expect(sse.isEnded).toBe(false);
      sse.close();
    } finally {
      if (!restored) await proxy.restore();
    }
  });

  it('after an outage with no stream open, the next stream gets no warning', async () => {
    const target = new URL(redisUrl());
    const own = new TcpProxy(target.hostname, Number(target.port || 6379));
    await own.start();
    let other: ProxiedServer | undefined;
    try {
      other = await startProxiedServer(store!, own);
      const bus = other.bus;
      await own.cut();
      // the bus has noticed
      const deadline = Date.now() + 3_000;
      while (await bus.ready(0)) {
        if (Date.now() > deadline) throw new Error('the bus did not notice the outage');
        await sleep(20);
      }
      await own.restore();
      expect(await bus.ready(RECOVERY_MS)).toBe(true);

      const agent = await other.newAgent();
      const sse = await open(agent.agentId, agent.token, other.url);
      expect(sse.status).toBe(200);
      const batch = runBatch();
      expect((await postBatch(other.url, agent.apiKey, batch.body)).status).toBe(202);
      await sse.waitFor((c) => traceIds(c).includes(batch.trace.id), 3_000, 'the batch');
      await sleep(300);
      expect(warnings(sse)).toEqual([]);
      sse.close();
    } finally {
      await other?.close();
      await own.close();
      await dropStreams(other);
    }
  });

  it('Redis down when the service starts: it serves, streams warn, and delivery starts once Redis is up', async () => {
    const target = new URL(redisUrl());
    const late = new TcpProxy(target.hostname, Number(target.port || 6379));
    await late.start();
    await late.cut();
    let other: ProxiedServer | undefined;
    try {
      other = await startProxiedServer(store!, late, { waitForRedis: false });
      const agent = await other.newAgent();
      const sse = await open(agent.agentId, agent.token, other.url);
      expect(sse.status).toBe(200);
      await sse.waitFor((c) => warnings(c).length > 0, 3_000, 'event: warning');
      expect(sse.comments[0]).toBe('connected');
      expect(warnings(sse)[0]!.data).toBe(WARNING_DATA);
      const started = Date.now();
      expect((await postBatch(other.url, agent.apiKey, runBatch().body)).status).toBe(202);
      expect(Date.now() - started).toBeLessThan(FAST_MS);

      await late.restore();
      await waitForRecovery(other.url, agent.apiKey, sse);
      await expectLiveDelivery(other.url, agent.apiKey, sse, 2);
      sse.close();
    } finally {
      await other?.close();
      await late.close();
      await dropStreams(other);
    }
  });

  it('Redis stalls (connections open, no answers): ingest stays fast, the stream warns, delivery resumes after', async () => {
    const target = new URL(redisUrl());
    const stalling = new TcpProxy(target.hostname, Number(target.port || 6379));
    await stalling.start();
    let other: ProxiedServer | undefined;
    try {
      other = await startProxiedServer(store!, stalling);
      const agent = await other.newAgent();
      const sse = await open(agent.agentId, agent.token, other.url);
      const before = runBatch();
      expect((await postBatch(other.url, agent.apiKey, before.body)).status).toBe(202);
      await sse.waitFor((c) => traceIds(c).includes(before.trace.id), 3_000, 'a live batch');
      const failuresBefore = await publishFailures(other.url);

      stalling.stall();
      const stalledAt = Date.now();
      const during = [runBatch(), runBatch()];
      for (const batch of during) {
        const started = Date.now();
        const res = await postBatch(other.url, agent.apiKey, batch.body);
        expect(res.status, res.text).toBe(202);
        expect(Date.now() - started).toBeLessThan(FAST_MS);
      }
      // not lost: retried from the backlog
      await expectPublishFailures(other.url, failuresBefore);
      // the blocking read's watchdog (blockMs + 3 s) notices a read that never returns
      await sse.waitFor((c) => warnings(c).length > 0, 6_000, 'event: warning');
      expect(warnings(sse)[0]!.data).toBe(WARNING_DATA);
      expect(Date.now() - stalledAt).toBeLessThan(6_000);
      expect(sse.isEnded).toBe(false);

      stalling.release();
      const { probes } = await waitForRecovery(other.url, agent.apiKey, sse);
      // The writes that timed out reached Redis once it answered again, and their retries found
      // them there: each batch once, in order.
      expect(traceIds(sse)).toEqual([before, ...during, ...probes].map((b) => b.trace.id));
      await expectLiveDelivery(other.url, agent.apiKey, sse, 2);
      await sleep(500);
      const ids = traceIds(sse);
      expect(new Set(ids).size).toBe(ids.length);
      expect(await publishFailures(other.url)).toBe(failuresBefore);
      expect(sse.isEnded).toBe(false);
      sse.close();
    } finally {
      stalling.release();
      await other?.close();
      await stalling.close();
      await dropStreams(other);
    }
  });
});
