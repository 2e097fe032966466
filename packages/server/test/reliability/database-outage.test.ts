import { afterAll, expect, it } from 'vitest';
import { AgentLoad } from '../harness/agent-load.js';
import { startServeProcess, type ServeProcess } from '../harness/cli-process.js';
import { describeWithPostgres } from '../harness/engines.js';
import { runBatch } from '../fixtures/batches.js';
import {
  createAgentsWithCli,
  freshServiceLocation,
  stopThenExpectStored,
  type ServiceLocation,
} from '../harness/service-location.js';
import { TcpProxy } from '../harness/tcp-proxy.js';
import { sleep, waitFor } from '../harness/wait.js';

const OUTAGE_MS = 6_000;
/** The service's statement deadline here; a silent database is given up 2 s after it. */
const STATEMENT_TIMEOUT_MS = 1_500;
const GIVE_UP_MS = STATEMENT_TIMEOUT_MS + 2_000;

interface Probe {
  route: 'batch' | 'readyz';
  status: number;
  retryAfter: string | null;
  contentType: string | null;
  ms: number;
}

/** One request with a deadline of its own: a hang shows as status 0. */
async function probe(url: string, route: Probe['route'], apiKey: string): Promise<Probe> {
  const started = Date.now();
  try {
    const response =
      route === 'readyz'
        ? await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(GIVE_UP_MS + 5_000) })
        : await fetch(`${url}/v1/traces/batch`, {
            method: 'POST',
            headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
            body: JSON.stringify(runBatch().body),
            signal: AbortSignal.timeout(GIVE_UP_MS + 5_000),
          });
    await response.arrayBuffer();
    return {
      route,
      status: response.status,
      retryAfter: response.headers.get('retry-after'),
      contentType: response.headers.get('content-type'),
      ms: Date.now() - started,
    };
  } catch {
    return { route, status: 0, retryAfter: null, contentType: null, ms: Date.now() - started };
  }
}

/*
 * PostgreSQL goes away under load: every connection between the service and the database is cut
 * (the service cannot tell this from a crashed or unreachable database) and new ones are refused
 * for several seconds, then it comes back. PGlite runs inside the service's process, so it has no
 * outage of its own: its failure is the process's (see crash.test.ts).
 */
/** How the database goes away: connections cut and refused, or open but silent. */
type OutageKind = 'refused' | 'silent';

describeWithPostgres('PostgreSQL unreachable mid-load, then back', () => {
  const services: ServiceLocation[] = [];
  const servers: ServeProcess[] = [];
  const proxies: TcpProxy[] = [];
  afterAll(async () => {
    for (const s of servers) if (s.child.exitCode === null) s.child.kill('SIGKILL');
    await Promise.all(proxies.map((p) => p.close()));
    await Promise.all(services.map((s) => s.dispose()));
  });

  async function outage(kind: OutageKind): Promise<void> {
    const service = freshServiceLocation('postgres');
    services.push(service);
    const agents = await createAgentsWithCli(service.env, `outage-${kind}`, 4);
    const prober = agents.pop()!;
    const proxy = new TcpProxy(
      '127.0.0.1',
      Number(new URL(service.env.DATABASE_URL!).port || 5432),
    );
    proxies.push(proxy);
    await proxy.start();
    const throughProxy = new URL(service.env.DATABASE_URL!);
    throughProxy.port = String(proxy.port);
    const server = await startServeProcess({
      ...service.env,
      DATABASE_URL: throughProxy.toString(),
      DATABASE_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS),
      ANALYSIS_WORKER: 'off',
    });
    servers.push(server);
    const load = new AgentLoad({ ingestUrl: server.url, agents });
    load.start();
    await load.waitForAcked(300);

    if (kind === 'refused') await proxy.cut();
    else proxy.stall();
    const cutAt = Date.now();
    const ackedAtCut = load.ackedCount;
    const probes: Probe[] = [];
    // give the requests in flight at the cut a moment to fail, then ask every 200 ms
    await sleep(300);
    while (Date.now() - cutAt < OUTAGE_MS) {
      probes.push(
        ...(await Promise.all([
          probe(server.url, 'batch', prober.apiKey),
          probe(server.url, 'readyz', prober.apiKey),
        ])),
      );
      await sleep(200);
    }
    const ackedDuringOutage = load.ackedCount - ackedAtCut;
    if (kind === 'refused') await proxy.restore();
    else proxy.release();
    const restoredAt = Date.now();

    // during the outage: 503 problem+json with Retry-After, within the store's deadline
    expect(probes.length, JSON.stringify(probes)).toBeGreaterThanOrEqual(4);
    for (const p of probes) {
      expect(p, JSON.stringify(p)).toMatchObject({
        status: 503,
        contentType: expect.stringMatching(/^application\/problem\+json/),
      });
      expect(Number(p.retryAfter)).toBeGreaterThan(0);
      expect(p.ms).toBeLessThan(GIVE_UP_MS + 1_500);
    }
    // the clients saw the outage as retryable, never as a 500
    expect(load.refusals.get('retryable HTTP 503') ?? 0).toBeGreaterThan(0);
    expect([...load.refusals.keys()].filter((key) => /HTTP 500|failed/.test(key))).toEqual([]);
    expect(ackedDuringOutage).toBeLessThanOrEqual(5);

    // back by itself: ready again, and the clients' retries go through
    await waitFor(
      async () => ((await probe(server.url, 'readyz', '')).status === 200 ? true : undefined),
      'the service to be ready again',
      15_000,
    );
    const recoveredMs = Date.now() - restoredAt;
    await load.waitForAcked(load.ackedCount + 300, 60_000);
    const stats = await load.stop();
    for (const s of stats) {
      expect(s.droppedEvents).toBe(0);
      expect(s.failedBatches).toBe(0);
    }

    await stopThenExpectStored(server, service, load);
    console.log(
      `[database outage, ${kind}] ${OUTAGE_MS} ms: ${probes.length} probes all 503 ` +
        `(slowest ${Math.max(...probes.map((p) => p.ms))} ms), ready again ${recoveredMs} ms ` +
        `after the database came back; ${load.ackedCount} batches acknowledged in all, ` +
        `${stats.reduce((sum, s) => sum + s.retriedRequests, 0)} requests retried; ` +
        `refusals: ${JSON.stringify(Object.fromEntries(load.refusals))}`,
    );
  }

  it('connections cut and refused: 503 with Retry-After (never 500, never a hang), not ready, then recovers by itself with nothing lost or doubled', () =>
    outage('refused'));

  it('connections open but silent (packets dropped): 503 within the statement deadline, then recovers with nothing lost or doubled', () =>
    outage('silent'));
});
