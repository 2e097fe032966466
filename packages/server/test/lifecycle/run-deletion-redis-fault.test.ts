import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { BufferBatchItem } from '@flightlog/protocol';
import { buildApp, type FlightlogApp } from '../../src/app.js';
import { mintDevToken } from '../../src/auth/dev-token.js';
import { changeConfig, loadConfig } from '../../src/config.js';
import { createRedisBus } from '../../src/live/redis-bus.js';
import { describeEngines, openTestStore, redisUrl, type TestStore } from '../harness/engines.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import { storedTrace } from '../harness/inspect.js';
import { TcpProxy } from '../harness/tcp-proxy.js';
import { newId, runBatch } from '../fixtures/batches.js';
import { inject } from 'vitest';

const available = inject('redisUrl') !== null;
if (!available)
  process.stdout.write('!!! SKIPPED "deleting a run while Redis is away": no Redis !!!\n');

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describeEngines('deleting a run while Redis is unreachable [%s]', (engine) => {
  if (!available) return;
  let proxy: TcpProxy;
  let test: TestStore;
  let built: FlightlogApp;
  let url: string;
  const prefix = `flightlog-test:delete-fault:${randomBytes(6).toString('hex')}:`;
  const adminToken = randomBytes(24).toString('hex');
  const jwtSecret = randomBytes(32).toString('hex');

  beforeAll(async () => {
    const target = new URL(redisUrl());
    proxy = new TcpProxy(target.hostname, Number(target.port || 6379));
    await proxy.start();
    test = await openTestStore(engine);
    const bus = createRedisBus({
      url: `redis://127.0.0.1:${proxy.port}`,
      keyPrefix: prefix,
      blockMs: 200,
    });
    expect(await bus.ready(5_000)).toBe(true);
    const config = changeConfig(loadConfig({}), {
      http: { port: 0, host: '127.0.0.1' },
      auth: { adminToken, jwtSecret },
      analysis: { graceMs: 0 },
      lifecycle: { ...loadConfig({}).lifecycle, sweepIntervalMs: 0 },
    });
    built = await buildApp({
      config,
      store: test.store,
      bus,
      logger: false,
      closeStoreOnClose: false,
    });
    await built.app.listen({ port: 0, host: '127.0.0.1' });
    const address = built.app.server.address();
    if (!address || typeof address === 'string') throw new Error('no address');
    url = `http://127.0.0.1:${address.port}`;
  });
  afterAll(async () => {
    await built?.app.close();
    await proxy?.close();
    await test?.dispose();
    const redis = new Redis(redisUrl());
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  it('answers 503 live-unavailable with the rows gone; asking again, or the sweeper, clears the replay once Redis is back', async () => {
    const admin = (method: string, path: string, body?: unknown) =>
      send(url, path, body, { method, token: adminToken });
    const agent = (await admin('POST', '/admin/v1/agents', {})).body as {
      agentId: string;
      apiKey: string;
    };
    const user = `owner-${newId()}`;
    await admin('PUT', `/admin/v1/agents/${agent.agentId}/members/${user}`, { role: 'owner' });
    const token = await mintDevToken(jwtSecret, user);
    const [first, second] = [runBatch({ events: 2 }), runBatch()];
    for (const run of [first, second])
      expect((await postBatch(url, agent.apiKey, run.body)).status).toBe(202);
    const replayed = async () =>
      (await built.bus.replay(agent.agentId)).messages.map(
        (m) => (JSON.parse(m.data) as BufferBatchItem).trace.id,
      );
    const deadline = Date.now() + 5_000;
    while ((await replayed()).length < 2) {
      if (Date.now() > deadline) throw new Error('the batches did not reach Redis');
      await sleep(20);
    }

    await proxy.cut();
    for (const run of [first, second]) {
      const res = await send(url, `/v1/traces/${run.trace.id}`, undefined, {
        method: 'DELETE',
        token,
      });
      expect(isProblem(res, 503), res.text).toBe(true);
      expect(res.body.type).toBe('urn:flightlog:problem:live-unavailable');
      expect(res.headers.get('retry-after')).toBe('1');
      // the store is primary: the run is gone from it already
      expect(await storedTrace(test.store, run.trace.id)).toBeUndefined();
    }
    // while Redis is away the sweeper cannot clear it either, and says so without failing
    expect((await built.lifecycle.sweep()).deletionsFinished).toBe(0);

    await proxy.restore();
    expect(await built.bus.ready(10_000)).toBe(true);
    // the client asks again: 204, and the replay no longer shows it
    const again = await send(url, `/v1/traces/${first.trace.id}`, undefined, {
      method: 'DELETE',
      token,
    });
    expect(again.status, again.text).toBe(204);
    // nobody asks again for the other: the sweeper clears it
    let report = await built.lifecycle.sweep();
    while (report.deletionsFinished === 0 && Date.now() < deadline + 10_000) {
      await sleep(100);
      report = await built.lifecycle.sweep();
    }
    expect(report.deletionsFinished).toBe(1);
    expect(await replayed()).toEqual([]);
  });
});
