import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { getAnalysis, jobsOf } from '../harness/analysis.js';
import { startChatStandIn, type ChatStandIn } from '../harness/chat-stand-in.js';
import { runCli, startServeProcess, type ServeProcess } from '../harness/cli-process.js';
import { openStore } from '../../src/store/open-store.js';
import {
  describeEngines,
  disposeLocation,
  freshLocation,
  type EngineLocation,
} from '../harness/engines.js';
import { postBatch } from '../harness/http.js';
import { waitFor } from '../harness/wait.js';
import { runBatch } from '../fixtures/batches.js';

const JWT_SECRET = 'analysis-crash-test-secret-0123456789abcdef';
const MODEL = 'stand-in-model';

/*
 * The worker inside the server dies with its process. On the embedded engine this is the only
 * worker there is (one process holds DATA_DIR), so the crash that matters is the server's.
 */
describeEngines('a server killed with SIGKILL mid-analysis [%s]', (engine) => {
  let dataDir: string;
  let location: EngineLocation;
  let env: Record<string, string>;
  let apiKey = '';
  let token = '';
  const servers: ServeProcess[] = [];
  const standIns: ChatStandIn[] = [];

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'flightlog-analysis-crash-'));
    location = freshLocation(engine);
    env = {
      JWT_SECRET,
      ANALYSIS_GRACE_MS: '0',
      ANALYSIS_LEASE_MS: '2000',
      ANALYSIS_LLM_TIMEOUT_MS: '1500',
      ANALYSIS_POLL_MS: '100',
      ...(engine === 'pglite'
        ? { DATA_DIR: dataDir }
        : { DATABASE_URL: location.databaseUrl!, DATABASE_SCHEMA: location.databaseSchema! }),
    };
    const created = await runCli(['agent', 'create', '--id', 'crash-agent'], env);
    expect(created.code, created.stderr).toBe(0);
    apiKey = JSON.parse(created.stdout).apiKey as string;
    const granted = await runCli(
      ['member', 'grant', '--agent', 'crash-agent', '--user', 'ana', '--role', 'viewer'],
      env,
    );
    expect(granted.code, granted.stderr).toBe(0);
    token = (await runCli(['dev-token', '--user', 'ana'], env)).stdout.trim();
  }, 120_000);
  afterEach(async () => {
    for (const s of servers.splice(0)) if (s.child.exitCode === null) s.child.kill('SIGKILL');
    await Promise.all(standIns.splice(0).map((s) => s.close()));
  });
  afterAll(async () => {
    await disposeLocation(location);
    rmSync(dataDir, { recursive: true, force: true });
  });

  const serve = async (standIn: ChatStandIn) => {
    const started = await startServeProcess({
      ...env,
      ANALYSIS_LLM_BASE_URL: standIn.baseUrl,
      ANALYSIS_LLM_MODEL: MODEL,
    });
    servers.push(started);
    return started;
  };
  const standIn = async (behaviour: Parameters<typeof startChatStandIn>[0]) => {
    const started = await startChatStandIn(behaviour);
    standIns.push(started);
    return started;
  };

  it('the restarted server analyses the run once, after the lease; nothing is lost', async () => {
    const hanging = await standIn({ kind: 'hang' });
    const doomed = await serve(hanging);
    const { body, trace } = runBatch({ events: 4, trace: { status: 'errored' } });
    expect((await postBatch(doomed.url, apiKey, body)).status).toBe(202);
    await hanging.received(1); // the worker inside the server is mid-job
    const running = await getAnalysis(doomed.url, token, trace.id);
    expect(running.body).toMatchObject({ status: 'pending', attempts: 1, autopsy: null });

    doomed.child.kill('SIGKILL');
    expect(await doomed.exited).toBeNull();

    const answering = await standIn({ kind: 'answer', content: `model prose for ${trace.id}` });
    const restarted = await serve(answering);
    const done = await waitFor(async () => {
      const res = await getAnalysis(restarted.url, token, trace.id);
      return res.body.status === 'done' ? res.body : undefined;
    }, 'the autopsy after the restart');
    expect(done).toMatchObject({
      status: 'done',
      analyzer: `llm:${MODEL}`,
      // the model's prose between the computed verdict and evidence
      autopsy: expect.stringContaining(`, from the facts below)\n\nmodel prose for ${trace.id}\n`),
      attempts: 2,
    });
    const asked = (s: ChatStandIn) =>
      s.requests.filter((r) => JSON.stringify(r.body).includes(trace.id)).length;
    expect(asked(hanging)).toBe(1);
    expect(asked(answering)).toBe(1);

    restarted.child.kill('SIGTERM');
    expect(await restarted.exited).toBe(0);
    // one job, done once, the lost attempt recorded
    const store = await openStore(engine === 'pglite' ? { dataDir } : { ...location });
    try {
      const jobs = await jobsOf(store, trace.id);
      expect(jobs).toHaveLength(1);
      expect(jobs[0]).toMatchObject({ state: 'done', attempts: 2 });
      expect(jobs[0]!.last_error).toMatch(/^lease expired/);
    } finally {
      await store.close();
    }
  }, 120_000);
});
