import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { mintDevToken } from '../../src/auth/dev-token.js';
import { changeConfig, loadConfig, type Config, type ConfigChanges } from '../../src/config.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { openStore, type Store } from '../../src/store/open-store.js';
import { getAnalysis, jobsOf } from '../harness/analysis.js';
import { startChatStandIn } from '../harness/chat-stand-in.js';
import {
  describeEngines,
  disposeLocation,
  freshLocation,
  type EngineLocation,
} from '../harness/engines.js';
import { postBatch, send } from '../harness/http.js';
import { sleep, waitFor } from '../harness/wait.js';
import { runBatch } from '../fixtures/batches.js';

/** The server as `flightlog serve` runs it (startServer), with its in-process worker. */
describeEngines('the analysis worker inside the server [%s]', (engine) => {
  let location: EngineLocation;
  let dataDir: string;
  let base: Config;
  let apiKey: string;
  let agentId: string;
  let token: string;
  beforeAll(async () => {
    location = freshLocation(engine);
    dataDir = mkdtempSync(join(tmpdir(), 'flightlog-server-worker-'));
    base = changeConfig(loadConfig({}), {
      http: { port: 0, host: '127.0.0.1' },
      store: engine === 'pglite' ? { dataDir } : location,
      auth: {
        adminToken: randomBytes(16).toString('hex'),
        jwtSecret: randomBytes(32).toString('hex'),
      },
      analysis: { graceMs: 0 },
      process: { shutdownTimeoutMs: 5_000 },
    });
  });
  afterAll(async () => {
    await disposeLocation(location);
    rmSync(dataDir, { recursive: true, force: true });
  });

  async function start(changes: ConfigChanges = {}): Promise<RunningServer> {
    const server = await startServer(changeConfig(base, changes), { logger: false });
    if (!apiKey) {
      const admin = { authorization: `Bearer ${base.auth.adminToken}` };
      const created = await send(server.url, '/admin/v1/agents', {}, { headers: admin });
      ({ apiKey, agentId } = created.body);
      await send(
        server.url,
        `/admin/v1/agents/${agentId}/members/ana`,
        { role: 'viewer' },
        { method: 'PUT', headers: admin },
      );
      token = await mintDevToken(base.auth.jwtSecret!, 'ana');
    }
    return server;
  }

  /** The store, opened while no server holds it. */
  async function withStore<T>(work: (store: Store) => Promise<T>): Promise<T> {
    const store = await openStore(engine === 'pglite' ? { dataDir } : location);
    try {
      return await work(store);
    } finally {
      await store.close();
    }
  }

  async function finishRun(url: string): Promise<string> {
    const { body, trace } = runBatch({ events: 3, trace: { status: 'completed' } });
    expect((await postBatch(url, apiKey, body)).status).toBe(202);
    return trace.id;
  }

  let queuedWhileOff = '';

  it('ANALYSIS_WORKER=off: the server runs no worker, its queued jobs stay pending', async () => {
    const server = await start({ analysis: { worker: false } });
    try {
      expect(server.worker).toBeUndefined();
      queuedWhileOff = await finishRun(server.url);
      await sleep(1_500);
      expect((await jobsOf(server.store, queuedWhileOff)).map((j) => j.state)).toEqual(['pending']);
      expect((await getAnalysis(server.url, token, queuedWhileOff)).body.status).toBe('pending');
    } finally {
      await server.close();
    }
  });

  it('on (the default): analyses what it queues well within a second, and what waited meanwhile', async () => {
    const server = await start();
    try {
      expect(server.worker).toBeDefined();
      const finalised = Date.now();
      const traceId = await finishRun(server.url);
      const done = await waitFor(
        async () => {
          const res = await getAnalysis(server.url, token, traceId);
          return res.body.status === 'done' ? res.body : undefined;
        },
        'the autopsy',
        5_000,
        10,
      );
      expect(Date.now() - finalised).toBeLessThan(1_000);
      expect(done.analyzer).toBe('heuristic');
      // the job queued while no worker ran was not lost
      await waitFor(async () => {
        const res = await getAnalysis(server.url, token, queuedWhileOff);
        return res.body.status === 'done' ? true : undefined;
      }, 'the older job');
      const metrics = await send(server.url, '/metrics');
      expect(metrics.text).toMatch(/^flightlog_analysis_jobs_total\{outcome="done"\} 2$/m);
      expect(metrics.text).toMatch(
        /^flightlog_analysis_duration_seconds_count\{analyzer="heuristic"\} 2$/m,
      );
    } finally {
      await server.close();
    }
  });

  it('shutdown lets the analysis in flight finish, then nothing is claimed any more', async () => {
    const standIn = await startChatStandIn({
      kind: 'answer',
      content: 'late answer',
      delayMs: 600,
    });
    const server = await start({
      analysis: { llmBaseUrl: standIn.baseUrl, llmModel: 'stand-in', llmTimeoutMs: 5_000 },
    });
    let traceId = '';
    try {
      traceId = await finishRun(server.url);
      await standIn.received(1);
    } finally {
      await server.close();
      await standIn.close();
    }
    await server.close(); // idempotent
    await withStore(async (store) => {
      expect((await jobsOf(store, traceId))[0]).toMatchObject({
        state: 'done',
        autopsy: expect.stringContaining('\n\nlate answer\n'),
        analyzer: 'llm:stand-in',
      });
      // a job queued after the shutdown stays pending: no worker lingers
      await store.traces.completeTrace(agentId, traceId, { status: 'errored' }, 0);
      await sleep(700);
      expect((await jobsOf(store, traceId)).map((j) => j.state)).toEqual(['done', 'pending']);
    });
  });
});
