import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { mintDevToken } from '../../src/auth/dev-token.js';
import { compareMessageIds, isMessageId } from '../../src/live/live-bus.js';
import { openStore } from '../../src/store/open-store.js';
import { startServeProcess, type ServeProcess } from '../harness/cli-process.js';
import {
  disposeLocation,
  freshLocation,
  postgresUrl,
  redisUrl,
  type EngineLocation,
} from '../harness/engines.js';
import { postBatch, send } from '../harness/http.js';
import { SseClient } from '../harness/sse-client.js';
import { runBatch, type RunBatch } from '../fixtures/batches.js';

const ADMIN_TOKEN = randomBytes(24).toString('hex');
const JWT_SECRET = randomBytes(32).toString('hex');
/** "Within a fraction of a second": the blocking read wakes on the write, it does not poll. */
const DELIVERY_MS = 750;

const available = inject('postgresUrl') !== null && inject('redisUrl') !== null;
if (!available)
  process.stdout.write(
    '!!! SKIPPED "live stream across two instances": PostgreSQL or Redis is unreachable !!!\n',
  );

const serveEnv = (schema: string, prefix: string): Record<string, string> => ({
  DATABASE_URL: postgresUrl(),
  DATABASE_SCHEMA: schema,
  REDIS_URL: redisUrl(),
  LIVE_REDIS_PREFIX: prefix,
  ADMIN_TOKEN,
  JWT_SECRET,
});

/** SIGTERM, then SIGKILL when the process has not exited within `graceMs`. */
async function stop(serve: ServeProcess | undefined, graceMs = 5_000): Promise<void> {
  if (!serve || serve.child.exitCode !== null || serve.child.signalCode !== null) return;
  serve.child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), graceMs);
  });
  const outcome = await Promise.race([serve.exited, timedOut]);
  clearTimeout(timer);
  if (outcome === 'timeout') {
    serve.child.kill('SIGKILL');
    await serve.exited;
  }
}

describe.runIf(available)(
  'live stream across two `flightlog serve` instances sharing PostgreSQL and Redis',
  () => {
    let location: EngineLocation;
    let prefix: string;
    let a: ServeProcess | undefined;
    let b: ServeProcess | undefined;
    const clients: SseClient[] = [];
    const agentIds: string[] = [];

    const admin = async (method: string, path: string, body: unknown) => {
      const res = await send(a!.url, path, body, { method, token: ADMIN_TOKEN });
      if (res.status >= 300) throw new Error(`admin ${method} ${path}: ${res.status} ${res.text}`);
      return res.body;
    };

    /** An agent created through A's admin API, a viewer on it, and that viewer's token. */
    const newAgent = async () => {
      const agent = (await admin('POST', '/admin/v1/agents', {})) as {
        agentId: string;
        apiKey: string;
      };
      agentIds.push(agent.agentId);
      const user = `viewer-${randomBytes(4).toString('hex')}`;
      await admin('PUT', `/admin/v1/agents/${agent.agentId}/members/${user}`, { role: 'viewer' });
      return { ...agent, token: await mintDevToken(JWT_SECRET, user) };
    };

    const open = async (
      url: string,
      agentId: string,
      token: string,
      headers: Record<string, string> = {},
    ) => {
      const sse = await SseClient.open(`${url}/v1/agents/${agentId}/live`, token, headers);
      clients.push(sse);
      expect(sse.status, sse.body).toBe(200);
      await sse.waitFor((c) => c.comments.includes('connected'), 5_000, ': connected');
      return sse;
    };

    /** Posts `batch` and returns how long it took until `sse` had `count` traces. */
    const postAndTime = async (
      url: string,
      apiKey: string,
      batch: RunBatch,
      sse: SseClient,
      count: number,
    ) => {
      const started = Date.now();
      const res = await postBatch(url, apiKey, batch.body);
      expect(res.status, res.text).toBe(202);
      await sse.waitFor((c) => c.traces().length >= count, 5_000, `trace #${count}`);
      return Date.now() - started;
    };

    const expectIncreasingIds = (ids: (string | undefined)[]) => {
      for (const id of ids) expect(isMessageId(id ?? ''), `${id} is a Redis stream id`).toBe(true);
      for (let i = 1; i < ids.length; i++)
        expect(compareMessageIds(ids[i]!, ids[i - 1]!)).toBeGreaterThan(0);
    };

    beforeAll(async () => {
      location = freshLocation('postgres');
      prefix = `flightlog-test:multi:${randomBytes(6).toString('hex')}:`;
      const env = serveEnv(location.databaseSchema!, prefix);
      // One after the other: see the separate test of two instances starting at once.
      a = await startServeProcess(env);
      b = await startServeProcess(env);
      expect(a.url).not.toBe(b.url);
    });

    afterAll(async () => {
      for (const sse of clients) sse.close();
      await Promise.all([stop(a), stop(b)]);
      if (location) await disposeLocation(location);
      if (agentIds.length > 0) {
        const redis = new Redis(redisUrl(), { lazyConnect: true });
        try {
          await redis.connect();
          await redis.del(...agentIds.map((id) => `${prefix}${id}`));
        } finally {
          redis.disconnect();
        }
      }
    });

    it('a stream on B receives every batch posted to A or B, in order, each within a fraction of a second', async () => {
      const agent = await newAgent();
      const sse = await open(b!.url, agent.agentId, agent.token);
      const posted: RunBatch[] = [];
      const latencies: number[] = [];
      for (let i = 0; i < 9; i++) {
        // two of every three batches go to A, the instance the stream is not on
        const target = i % 3 === 2 ? b! : a!;
        const batch = runBatch({ events: 1 + (i % 3) });
        posted.push(batch);
        latencies.push(await postAndTime(target.url, agent.apiKey, batch, sse, i + 1));
      }

      const traces = sse.traces();
      expect(traces.map((t) => t.item.trace.id)).toEqual(posted.map((p) => p.trace.id));
      expect(traces.map((t) => t.item.events.map((e: { id: string }) => e.id))).toEqual(
        posted.map((p) => p.events.map((e) => e.id)),
      );
      for (const t of traces) expect(t.item.trace.agentId).toBe(agent.agentId);
      expectIncreasingIds(traces.map((t) => t.id));
      expect(sse.events.filter((e) => e.event !== 'trace')).toEqual([]);
      expect(sse.isEnded).toBe(false);
      for (const [i, ms] of latencies.entries())
        expect(ms, `batch ${i} reached the stream after ${ms} ms`).toBeLessThan(DELIVERY_MS);
    });

    it('a stream opened on B after batches were posted to A replays them, then continues live; A and B show the same ids', async () => {
      const agent = await newAgent();
      const before = [runBatch(), runBatch({ events: 2 }), runBatch()];
      for (const batch of before)
        expect((await postBatch(a!.url, agent.apiKey, batch.body)).status).toBe(202);

      const onB = await open(b!.url, agent.agentId, agent.token);
      await onB.waitFor((c) => c.traces().length === before.length, 5_000, 'replay on B');
      const onA = await open(a!.url, agent.agentId, agent.token);
      await onA.waitFor((c) => c.traces().length === before.length, 5_000, 'replay on A');

      const after = [runBatch(), runBatch({ events: 3 })];
      const latencies: number[] = [];
      for (const [i, batch] of after.entries())
        latencies.push(await postAndTime(a!.url, agent.apiKey, batch, onB, before.length + i + 1));
      await onA.waitFor((c) => c.traces().length === before.length + after.length, 5_000, 'A');

      const expected = [...before, ...after].map((p) => p.trace.id);
      expect(onB.traces().map((t) => t.item.trace.id)).toEqual(expected);
      expect(onA.traces().map((t) => t.item.trace.id)).toEqual(expected);
      // one Redis stream behind both instances: the same message has the same id everywhere
      expect(onB.traces().map((t) => t.id)).toEqual(onA.traces().map((t) => t.id));
      expectIncreasingIds(onB.traces().map((t) => t.id));
      for (const [i, ms] of latencies.entries())
        expect(ms, `live batch ${i} reached B after ${ms} ms`).toBeLessThan(DELIVERY_MS);
    });

    it('Last-Event-ID from a stream on A resumes on B after exactly that message', async () => {
      const agent = await newAgent();
      const first = [runBatch(), runBatch(), runBatch()];
      for (const batch of first)
        expect((await postBatch(a!.url, agent.apiKey, batch.body)).status).toBe(202);

      const onA = await open(a!.url, agent.agentId, agent.token);
      await onA.waitFor((c) => c.traces().length === first.length, 5_000, 'replay on A');
      const seen = onA.traces();
      // the client saw the first two, then lost its connection to A
      const lastEventId = seen[1]!.id!;
      onA.close();

      const missed = [runBatch(), runBatch({ events: 2 })];
      for (const batch of missed)
        expect((await postBatch(a!.url, agent.apiKey, batch.body)).status).toBe(202);

      const onB = await open(b!.url, agent.agentId, agent.token, { 'last-event-id': lastEventId });
      const resumed = [first[2]!, ...missed];
      await onB.waitFor((c) => c.traces().length === resumed.length, 5_000, 'resumed replay');
      expect(onB.traces()[0]!.id).toBe(seen[2]!.id);

      const live = runBatch();
      const ms = await postAndTime(b!.url, agent.apiKey, live, onB, resumed.length + 1);
      // nothing repeated, nothing skipped
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(onB.traces().map((t) => t.item.trace.id)).toEqual(
        [...resumed, live].map((p) => p.trace.id),
      );
      expect(compareMessageIds(onB.traces()[0]!.id!, lastEventId)).toBeGreaterThan(0);
      expectIncreasingIds(onB.traces().map((t) => t.id));
      expect(ms, `the live batch reached B after ${ms} ms`).toBeLessThan(DELIVERY_MS);
    });

    it('a stream opened on B while B already streams another agent gets its first live batch within a fraction of a second', async () => {
      const first = await newAgent();
      const second = await newAgent();
      const watching = await open(b!.url, first.agentId, first.token);
      // a delivery on the first agent: B's reader starts a new blocking read over that agent
      await postAndTime(a!.url, first.apiKey, runBatch(), watching, 1);
      const sse = await open(b!.url, second.agentId, second.token);
      const latencies: number[] = [];
      for (let i = 0; i < 3; i++)
        latencies.push(await postAndTime(a!.url, second.apiKey, runBatch(), sse, i + 1));
      expect(sse.traces()).toHaveLength(3);
      for (const [i, ms] of latencies.entries())
        expect(ms, `batch ${i} reached B after ${ms} ms`).toBeLessThan(DELIVERY_MS);
    });

    it('both processes exit 0 on SIGTERM with live streams still open', async () => {
      const agent = await newAgent();
      const onA = await open(a!.url, agent.agentId, agent.token);
      const onB = await open(b!.url, agent.agentId, agent.token);
      a!.child.kill('SIGTERM');
      b!.child.kill('SIGTERM');
      const [codeA, codeB] = await Promise.all([a!.exited, b!.exited]);
      expect([codeA, codeB]).toEqual([0, 0]);
      await Promise.all([onA.ended, onB.ended]);
    });
  },
);

describe.runIf(available)('two instances starting at once on a fresh DATABASE_SCHEMA', () => {
  // What `flightlog serve` does first (server.ts: openStore, which creates the schema and
  // migrates). Processes rarely start within the same millisecond, so the race is provoked in
  // process, several times over: each round is two instances opening one fresh schema at once.
  it('both open the store (schema creation and migrations serialize)', async () => {
    const failures: string[] = [];
    for (let round = 0; round < 8; round++) {
      const location = freshLocation('postgres');
      const opened = await Promise.allSettled([
        openStore({ ...location, poolSize: 2 }),
        openStore({ ...location, poolSize: 2 }),
      ]);
      for (const o of opened)
        if (o.status === 'fulfilled') await o.value.close();
        else failures.push(`round ${round}: ${(o.reason as Error).message}`);
      await disposeLocation(location);
    }
    expect(failures).toEqual([]);
  });
});
