import { afterEach, expect, inject, it } from 'vitest';
import { compareMessageIds, RESYNC_MESSAGE } from '../../src/live/live-bus.js';
import { describeEngines } from '../harness/engines.js';
import { postBatch, send } from '../harness/http.js';
import { startServedOnOwnRedis, type RedisServed } from '../harness/redis-served.js';
import { SseClient } from '../harness/sse-client.js';
import { runBatch, type RunBatch } from '../fixtures/batches.js';

/** Time for the bus to reconnect and deliver what waited, on a busy 2-core machine. */
const RECOVERY_MS = 15_000;
/** A POST while Redis is away must not wait for it. */
const FAST_MS = 1_000;

const redisAvailable = inject('redisUrl') !== null;
if (!redisAvailable)
  process.stdout.write('!!! SKIPPED "live bus outage": Redis is unreachable !!!\n');

type Running = RedisServed;
const start = startServedOnOwnRedis;

const traceIds = (sse: SseClient) => sse.traces().map((t) => t.item.trace.id as string);
const idsOf = (batches: RunBatch[]) => batches.map((b) => b.trace.id);
const resyncs = (sse: SseClient) => sse.events.filter((e) => e.event === 'resync');

async function post(url: string, apiKey: string, batches: RunBatch[]): Promise<void> {
  for (const batch of batches) {
    const started = Date.now();
    const res = await postBatch(url, apiKey, batch.body);
    expect(res.status, res.text).toBe(202);
    expect(Date.now() - started, 'a POST waited for the bus').toBeLessThan(FAST_MS);
  }
}

async function publishFailures(running: Running): Promise<number> {
  return (await running.server.metrics.livePublishFailures.get()).values[0]?.value ?? 0;
}

describeEngines('live bus outage: Redis killed and restarted empty [%s]', (engine) => {
  let running: Running | undefined;
  const streams: SseClient[] = [];
  afterEach(async () => {
    for (const sse of streams.splice(0)) sse.close();
    await running?.dispose();
    running = undefined;
  });

  const open = async (r: Running) => {
    const sse = await SseClient.open(`${r.server.url}/v1/agents/${r.agent.agentId}/live`, r.token);
    streams.push(sse);
    expect(sse.status).toBe(200);
    return sse;
  };

  it.runIf(redisAvailable)(
    'what was stored while Redis was down, and right after it came back, reaches the open stream in order, each once; a new stream gets every run, rebuilt from the store',
    async () => {
      const r = (running = await start(engine));
      const { url } = r.server;
      const live = await open(r);
      const before = Array.from({ length: 8 }, () => runBatch({ events: 2 }));
      await post(url, r.agent.apiKey, before);
      await live.waitFor((c) => idsOf(before).every((id) => traceIds(c).includes(id)), 5_000);

      await r.redis.kill();
      await live.waitFor((c) => c.events.some((e) => e.event === 'warning'), 5_000, 'warning');
      const during = Array.from({ length: 8 }, () => runBatch({ events: 2 }));
      await post(url, r.agent.apiKey, during);
      // the operator sees what waits for Redis
      const metrics = (await send(url, '/metrics')).text;
      expect(metrics).toMatch(/^flightlog_live_backlog_batches 8$/m);
      expect(Number(/^flightlog_live_backlog_bytes (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThan(0);

      await r.redis.restart();
      const restartedAt = Date.now();
      // at once: the bus is still reconnecting (its backoff), these must not be lost either
      const after = Array.from({ length: 8 }, () => runBatch({ events: 2 }));
      await post(url, r.agent.apiKey, after);

      const expected = [...idsOf(before), ...idsOf(during), ...idsOf(after)];
      await live.waitFor(
        (c) => expected.every((id) => traceIds(c).includes(id)),
        RECOVERY_MS,
        'every batch on the open stream',
      );
      const deliveredMs = Date.now() - restartedAt;
      // each once, in the order stored, on the same connection
      expect(traceIds(live)).toEqual(expected);
      expect(live.comments.filter((c) => c === 'connected')).toHaveLength(1);
      expect(live.isEnded).toBe(false);
      expect(resyncs(live)).toEqual([]);
      expect(await publishFailures(r)).toBe(0);
      expect((await send(url, '/metrics')).text).toMatch(/^flightlog_live_backlog_batches 0$/m);

      // Redis lost the batches from before the kill: a new stream's replay is rebuilt from the
      // store (each run with its events), then what Redis holds now.
      const fresh = await open(r);
      await fresh.waitFor(
        (c) => expected.every((id) => traceIds(c).includes(id)),
        RECOVERY_MS,
        'every run in the replay',
      );
      // the whole replay: what the bus holds for the agent now
      const held = (await r.server.bus.replay(r.agent.agentId)).messages;
      await fresh.waitFor((c) => c.events.length >= held.length, 5_000, 'the whole replay');
      expect(fresh.events.map((e) => e.id)).toEqual(held.map((m) => m.id));
      for (const batch of before) {
        const message = fresh.traces().find((t) => t.item.trace.id === batch.trace.id);
        expect(message?.item.events.map((e: { id: string }) => e.id)).toEqual(
          batch.events.map((e) => e.id),
        );
        expect(message?.item.trace.eventCount).toBe(batch.trace.eventCount);
      }
      const ids = fresh.events.map((e) => e.id as string);
      for (let i = 1; i < ids.length; i++)
        expect(compareMessageIds(ids[i] as string, ids[i - 1] as string)).toBeGreaterThan(0);
      // what came after the restart is still in publish order, after the rebuilt runs
      const order = traceIds(fresh);
      expect(order.slice(-after.length)).toEqual(idsOf(after));

      console.log(
        `[${engine}] Redis killed, ${during.length} batches stored meanwhile and ${after.length} ` +
          `right after its restart: all on the open stream ${deliveredMs} ms after the restart; ` +
          `a new stream's replay held ${traceIds(fresh).length} runs/batches for ` +
          `${expected.length} stored`,
      );
      // a second stream is not rebuilt again (once per Redis epoch)
      const again = await open(r);
      await again.waitFor((c) => traceIds(c).length >= traceIds(fresh).length, 5_000);
      expect(traceIds(again)).toEqual(traceIds(fresh));

      // and real time goes on
      const next = runBatch();
      await post(url, r.agent.apiKey, [next]);
      for (const sse of [live, fresh, again])
        await sse.waitFor((c) => traceIds(c).includes(next.trace.id), 5_000, 'a new batch');
    },
  );

  it.runIf(redisAvailable)(
    'past LIVE_BACKLOG_MAX_BYTES the oldest batches are given up and the stream gets one `resync` saying so, then the newest in order',
    async () => {
      // each batch of 3 events is ~2.5 KB of JSON, ~5 KB held: room for 5
      const r = (running = await start(engine, { live: { backlogMaxBytes: 26 * 1024 } }));
      const { url } = r.server;
      const live = await open(r);
      const first = runBatch();
      await post(url, r.agent.apiKey, [first]);
      await live.waitFor((c) => traceIds(c).includes(first.trace.id), 5_000);

      await r.redis.kill();
      await live.waitFor((c) => c.events.some((e) => e.event === 'warning'), 5_000, 'warning');
      const during = Array.from({ length: 10 }, () => runBatch({ events: 3 }));
      await post(url, r.agent.apiKey, during);
      await r.redis.restart();

      await live.waitFor((c) => resyncs(c).length > 0, RECOVERY_MS, 'event: resync');
      const last = during.at(-1) as RunBatch;
      await live.waitFor((c) => traceIds(c).includes(last.trace.id), RECOVERY_MS, 'the newest');
      const [resync] = resyncs(live);
      const notice = JSON.parse(resync?.data ?? '{}') as Record<string, unknown>;
      const delivered = traceIds(live).slice(1);
      const missed = during.length - delivered.length;
      expect(missed).toBeGreaterThan(0);
      console.log(
        `[${engine}] backlog of 26 KiB: ${missed} of ` +
          `${during.length} batches given up, one resync, ${delivered.length} delivered`,
      );
      expect(notice).toEqual({
        message: RESYNC_MESSAGE,
        missedBatches: missed,
        from: expect.any(String),
        to: expect.any(String),
      });
      expect(Date.parse(notice.to as string)).toBeGreaterThanOrEqual(
        Date.parse(notice.from as string),
      );
      // the ones kept are the newest, in order, after the notice
      expect(delivered).toEqual(idsOf(during.slice(missed)));
      const resyncAt = live.events.indexOf(resync!);
      const firstKeptAt = live.events.findIndex(
        (e) => e.event === 'trace' && e.data.includes(during[missed]!.trace.id),
      );
      expect(resyncAt).toBeLessThan(firstKeptAt);
      expect(resync?.id).toMatch(/^\d+-\d+$/);
      // the lost ones are counted, and still in the store
      expect(await publishFailures(r)).toBe(missed);
      for (const batch of during.slice(0, missed)) {
        const read = await send(url, `/v1/traces/${batch.trace.id}`, undefined, { token: r.token });
        expect(read.status).toBe(200);
      }
    },
  );
});
