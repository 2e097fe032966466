import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { jobsOf } from '../harness/analysis.js';
import { startChatStandIn, type ChatStandIn } from '../harness/chat-stand-in.js';
import {
  runCli,
  startServeProcess,
  startWorkerProcess,
  type WorkerProcess,
} from '../harness/cli-process.js';
import { describeWithPostgres, openTestStore, type TestStore } from '../harness/engines.js';
import { waitFor } from '../harness/wait.js';
import { newId, runBatch } from '../fixtures/batches.js';

const MODEL = 'stand-in-model';

describeWithPostgres('flightlog worker processes [postgres]', () => {
  let t: TestStore;
  const agentId = `agent-${newId()}`;
  const processes: WorkerProcess[] = [];
  const standIns: ChatStandIn[] = [];
  beforeAll(async () => {
    t = await openTestStore('postgres');
    await t.store.agents.createAgent({
      id: agentId,
      name: null,
      keyId: newId(),
      keyHash: newId(),
      verifyTokenHash: newId(),
    });
  });
  afterEach(async () => {
    for (const p of processes.splice(0)) if (p.child.exitCode === null) p.child.kill('SIGKILL');
    await Promise.all(standIns.splice(0).map((s) => s.close()));
  });
  afterAll(() => t.dispose());

  const env = (standIn: ChatStandIn, extra: Record<string, string> = {}) => ({
    DATABASE_URL: t.location.databaseUrl!,
    DATABASE_SCHEMA: t.location.databaseSchema!,
    ANALYSIS_LLM_BASE_URL: standIn.baseUrl,
    ANALYSIS_LLM_MODEL: MODEL,
    ANALYSIS_LLM_API_KEY: 'sk-test-process',
    ANALYSIS_LEASE_MS: '2000',
    ANALYSIS_LLM_TIMEOUT_MS: '1500',
    ANALYSIS_POLL_MS: '100',
    ...extra,
  });
  const worker = async (e: Record<string, string>) => {
    const started = await startWorkerProcess(e);
    processes.push(started);
    return started;
  };
  const standIn = async (behaviour: Parameters<typeof startChatStandIn>[0]) => {
    const started = await startChatStandIn(behaviour);
    standIns.push(started);
    return started;
  };

  async function finishedRun(): Promise<string> {
    const { body, trace } = runBatch({ events: 4, trace: { status: 'errored' } });
    await t.store.traces.writeBatch({
      agentId,
      batchId: body.batchId,
      items: body.items.map((i) => ({ ...i, trace: { ...i.trace, agentId } })),
      analysisGraceMs: 0,
    });
    return trace.id;
  }

  const promptsFor = (s: ChatStandIn, traceId: string) =>
    s.requests.filter((r) => JSON.stringify(r.body).includes(traceId));

  it('a worker killed with SIGKILL mid-job loses nothing: after the lease another worker completes the job, once', async () => {
    const hanging = await standIn({ kind: 'hang' });
    const doomed = await worker(env(hanging));
    const traceId = await finishedRun();
    await hanging.received(1);
    doomed.child.kill('SIGKILL');
    expect(await doomed.exited).toBeNull(); // killed, no exit code
    const killedAt = Date.now();
    expect((await jobsOf(t.store, traceId))[0]).toMatchObject({
      state: 'running',
      attempts: 1,
      worker_id: doomed.workerId,
    });

    const answering = await standIn({ kind: 'answer', content: `model prose for ${traceId}` });
    const rescuer = await worker(env(answering));
    const row = await waitFor(async () => {
      const [job] = await jobsOf(t.store, traceId);
      return job?.state === 'done' ? job : undefined;
    }, 'the job to be done by the second worker');
    // not before the lease ran out
    expect(Date.now() - killedAt).toBeGreaterThanOrEqual(1_500);
    expect(row).toMatchObject({
      state: 'done',
      attempts: 2,
      worker_id: rescuer.workerId,
      analyzer: `llm:${MODEL}`,
      // the model's prose between the computed verdict and evidence
      autopsy: expect.stringContaining(`, from the facts below)\n\nmodel prose for ${traceId}\n`),
      fallback_reason: null,
    });
    expect(row.last_error).toMatch(/^lease expired/);
    // exactly once each: the killed worker's one call, the rescuer's one call
    expect(promptsFor(hanging, traceId)).toHaveLength(1);
    expect(promptsFor(answering, traceId)).toHaveLength(1);
    expect(await jobsOf(t.store, traceId)).toHaveLength(1);

    rescuer.child.kill('SIGTERM');
    expect(await rescuer.exited).toBe(0);
  }, 60_000);

  it('SIGTERM: stops claiming, finishes the job in flight, exits 0', async () => {
    const slow = await standIn({ kind: 'answer', content: 'slow but fine', delayMs: 800 });
    const graceful = await worker(env(slow, { SHUTDOWN_TIMEOUT_MS: '5000' }));
    const traceId = await finishedRun();
    await slow.received(1);
    graceful.child.kill('SIGTERM');
    expect(await graceful.exited).toBe(0);
    expect((await jobsOf(t.store, traceId))[0]).toMatchObject({
      state: 'done',
      autopsy: expect.stringContaining('\n\nslow but fine\n'),
      worker_id: graceful.workerId,
    });
    // it claimed nothing after the signal
    const later = await finishedRun();
    expect((await jobsOf(t.store, later))[0]).toMatchObject({ state: 'pending', attempts: 0 });
    await t.store.sql.query("UPDATE analysis_jobs SET state = 'failed' WHERE trace_id = $1", [
      later,
    ]);
  }, 60_000);

  it('SIGTERM past SHUTDOWN_TIMEOUT_MS: exits anyway and leaves the job to its lease', async () => {
    const hanging = await standIn({ kind: 'hang' });
    const stuck = await worker(env(hanging, { SHUTDOWN_TIMEOUT_MS: '300' }));
    const traceId = await finishedRun();
    await hanging.received(1);
    const signalled = Date.now();
    stuck.child.kill('SIGTERM');
    expect(await stuck.exited).toBe(0);
    expect(Date.now() - signalled).toBeLessThan(1_500);
    expect((await jobsOf(t.store, traceId))[0]).toMatchObject({
      state: 'running',
      attempts: 1,
      autopsy: null,
    });
    await t.store.sql.query("UPDATE analysis_jobs SET state = 'failed' WHERE trace_id = $1", [
      traceId,
    ]);
  }, 60_000);
});

describe('flightlog worker on the embedded engine', () => {
  let dataDir: string;
  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'flightlog-worker-'));
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('says clearly that it needs DATABASE_URL when a server holds DATA_DIR', async () => {
    const serve = await startServeProcess({ DATA_DIR: dataDir });
    try {
      const result = await runCli(['worker'], { DATA_DIR: dataDir });
      expect(result.code).toBe(2);
      expect(result.stderr).toMatch(/DATA_DIR .* is in use by process \d+, probably a server/);
      expect(result.stderr).toContain('the server already runs an analysis worker');
      expect(result.stderr).toContain('set DATABASE_URL');
    } finally {
      serve.child.kill('SIGTERM');
      await serve.exited;
    }
  }, 60_000);

  it('refuses an invalid SERVICE_MASTER_KEY at start-up, naming the variable', async () => {
    const result = await runCli(['worker'], { DATA_DIR: dataDir, SERVICE_MASTER_KEY: 'c2hvcnQ=' });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      'SERVICE_MASTER_KEY must be 32 random bytes in base64, but it decodes to 5 bytes, not 32',
    );
    expect(result.stderr).not.toContain('c2hvcnQ=');
  });
});
