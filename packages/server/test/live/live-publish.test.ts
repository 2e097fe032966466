import { afterEach, describe, expect, it } from 'vitest';
import { buildApp, type FlightlogApp } from '../../src/app.js';
import { changeConfig, loadConfig } from '../../src/config.js';
import { createInProcessBus } from '../../src/live/in-process-bus.js';
import type { LiveBus } from '../../src/live/live-bus.js';
import { openStore } from '../../src/store/open-store.js';
import { postBatch, send } from '../harness/http.js';
import { waitFor } from '../harness/wait.js';
import { runBatch } from '../fixtures/batches.js';

const ADMIN_TOKEN = 'admin-token-for-publish-tests';

/** An in-process bus whose publish is replaced (the rest works, so streams can open). */
function busWith(publish: LiveBus['publish']): LiveBus & { calls: string[][] } {
  const bus = createInProcessBus();
  const calls: string[][] = [];
  return {
    ...bus,
    calls,
    publish(agentId, data) {
      calls.push(data);
      return publish(agentId, data);
    },
  };
}

interface Started extends FlightlogApp {
  url: string;
  apiKey: string;
}

async function start(bus: LiveBus, livePublishTimeoutMs: number): Promise<Started> {
  const store = await openStore({});
  const config = changeConfig(loadConfig({}), {
    auth: { adminToken: ADMIN_TOKEN },
    live: { publishTimeoutMs: livePublishTimeoutMs },
  });
  const built = await buildApp({ config, store, bus, logger: false });
  await built.app.listen({ port: 0, host: '127.0.0.1' });
  const url = `http://127.0.0.1:${(built.app.server.address() as { port: number }).port}`;
  const created = await send(url, '/admin/v1/agents', {}, { token: ADMIN_TOKEN });
  return { ...built, url, apiKey: created.body.apiKey };
}

const failures = async (s: Started) =>
  (await s.metrics.livePublishFailures.get()).values[0]?.value ?? 0;

describe('live publishing is off the request path', () => {
  let started: Started | undefined;
  afterEach(async () => {
    await started?.app.close();
    started = undefined;
  });

  it('answers 202 at once while the bus hangs; a hung publish is not a failure, and shutdown waits for it at most LIVE_PUBLISH_TIMEOUT_MS', async () => {
    const bus = busWith(() => new Promise<string[]>(() => {}));
    const s = (started = await start(bus, 1_500));
    const t0 = Date.now();
    const res = await postBatch(s.url, s.apiKey, runBatch({ events: 3 }).body);
    expect(res.status).toBe(202);
    expect(Date.now() - t0).toBeLessThan(1_000);
    expect(bus.calls).toHaveLength(1);
    // A bus that has not answered yet (Redis away, the batch in its backlog) may still deliver.
    await new Promise((resolve) => setTimeout(resolve, 1_800));
    expect(await failures(s)).toBe(0);
    const closing = Date.now();
    await s.app.close();
    started = undefined;
    const tookMs = Date.now() - closing;
    expect(tookMs).toBeGreaterThanOrEqual(1_400);
    expect(tookMs).toBeLessThan(5_000);
  });

  it('answers 202 when the bus throws at once or rejects, and counts each failure', async () => {
    let n = 0;
    const bus = busWith(() => {
      n++;
      if (n === 1) throw new Error('bus exploded');
      return Promise.reject(new Error('bus rejected'));
    });
    const s = (started = await start(bus, 2_000));
    for (let i = 0; i < 2; i++)
      expect((await postBatch(s.url, s.apiKey, runBatch().body)).status).toBe(202);
    await waitFor(async () => ((await failures(s)) === 2 ? true : undefined), 'two failures');
  });

  it('hands batches to the bus in the order they were accepted, each exactly once', async () => {
    const bus = busWith((agentId, data) => createInProcessBus().publish(agentId, data));
    const s = (started = await start(bus, 2_000));
    const batches = Array.from({ length: 20 }, () => runBatch({ events: 1 }));
    for (const batch of batches)
      expect((await postBatch(s.url, s.apiKey, batch.body)).status).toBe(202);
    // a repeated batch id is answered, but not published again
    expect((await postBatch(s.url, s.apiKey, batches[0]!.body)).status).toBe(202);
    expect(bus.calls.map((data) => JSON.parse(data[0]!).trace.id)).toEqual(
      batches.map((b) => b.trace.id),
    );
  });

  it('lets a publish still in flight finish before the bus closes', async () => {
    let release: (() => void) | undefined;
    const bus = busWith(
      () =>
        new Promise<string[]>((resolve) => {
          release = () => resolve(['1-1']);
        }),
    );
    const closeBus = bus.close;
    let closedWhilePending = false;
    bus.close = async () => {
      closedWhilePending = release !== undefined;
      await closeBus();
    };
    const s = (started = await start(bus, 5_000));
    expect((await postBatch(s.url, s.apiKey, runBatch().body)).status).toBe(202);
    const closing = s.app.close();
    await new Promise((r) => setTimeout(r, 100));
    expect(closedWhilePending).toBe(false);
    const finish = release!;
    release = undefined;
    finish();
    await closing;
    started = undefined;
    expect(await failures(s)).toBe(0);
  });
});
