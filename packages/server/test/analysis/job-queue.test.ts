import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ClaimedJob } from '../../src/store/analysis-store.js';
import { jobsOf } from '../harness/analysis.js';
import { describeEngines, openTestStore, type TestStore } from '../harness/engines.js';
import { sleep } from '../harness/wait.js';
import { newId, runBatch } from '../fixtures/batches.js';

const RESULT = { autopsy: '## Verdict: succeeded\n', analyzer: 'heuristic', fallbackReason: null };
const LEASE_EXPIRED = /^lease expired/;

describeEngines('analysis queue in the store [%s]', (engine) => {
  let t: TestStore;
  const agentId = `agent-${newId()}`;
  beforeAll(async () => {
    t = await openTestStore(engine);
    await t.store.agents.createAgent({
      id: agentId,
      name: null,
      keyId: newId(),
      keyHash: newId(),
      verifyTokenHash: newId(),
    });
  });
  afterAll(() => t.dispose());

  const queue = () => t.store.analysis;

  /** Stores a run finished through a batch: its job is queued, runnable after `graceMs`. */
  async function finishedRun(graceMs = 0): Promise<string> {
    const { body, trace } = runBatch({ trace: { status: 'completed' } });
    const outcome = await t.store.traces.writeBatch({
      agentId,
      batchId: body.batchId,
      items: body.items.map((i) => ({ ...i, trace: { ...i.trace, agentId } })),
      analysisGraceMs: graceMs,
    });
    expect(outcome).toMatchObject({ kind: 'accepted', analysisQueued: true });
    return trace.id;
  }

  const refinalise = (traceId: string, graceMs = 0) =>
    t.store.traces.completeTrace(agentId, traceId, { status: 'errored' }, graceMs);

  /** Claims until the job of `traceId` comes up (other tests' jobs are completed on the way). */
  async function claimOf(traceId: string, leaseMs = 60_000): Promise<ClaimedJob> {
    for (let i = 0; i < 50; i++) {
      const { job } = await queue().claimNext('test-worker', leaseMs);
      if (!job) break;
      if (job.traceId === traceId) return job;
      await queue().complete(job, RESULT);
    }
    throw new Error(`no runnable job for ${traceId}`);
  }

  it('a job becomes runnable after its grace delay; idle claims say how long to wait', async () => {
    const traceId = await finishedRun(400);
    const early = await queue().claimNext('w', 60_000);
    expect(early.job).toBeUndefined();
    expect(early.nextRunInMs).toBeGreaterThan(200);
    expect(early.nextRunInMs).toBeLessThanOrEqual(400);
    await sleep(450);
    const job = await claimOf(traceId);
    expect(job).toMatchObject({ traceId, agentId, attempt: 1 });
    const [row] = await jobsOf(t.store, traceId);
    expect(row).toMatchObject({ state: 'running', attempts: 1, worker_id: 'test-worker' });
    expect(row!.locked_until!.getTime()).toBeGreaterThan(Date.now() + 50_000);
    expect((await queue().claimNext('w', 60_000)).job).toBeUndefined();
  });

  it('completion stores the autopsy with the analyzer and timings, once', async () => {
    const traceId = await finishedRun();
    const job = await claimOf(traceId);
    const timings = await queue().complete(job, {
      autopsy: 'A',
      analyzer: 'llm:m',
      fallbackReason: null,
    });
    expect(timings?.durationMs).toBeGreaterThanOrEqual(0);
    expect(timings?.delayMs).toBeGreaterThanOrEqual(0);
    expect(await queue().complete(job, RESULT)).toBeUndefined();
    const [row] = await jobsOf(t.store, traceId);
    expect(row).toMatchObject({
      state: 'done',
      autopsy: 'A',
      analyzer: 'llm:m',
      locked_until: null,
    });
    expect(row!.finished_at!.getTime()).toBeGreaterThanOrEqual(row!.started_at!.getTime());
  });

  it('is fenced: a worker whose lease expired and whose job was re-claimed changes nothing', async () => {
    const traceId = await finishedRun();
    const stale = await claimOf(traceId, 50);
    await sleep(120);
    expect(await queue().requeueExpired(5)).toMatchObject({ pending: 1 });
    const fresh = await claimOf(traceId);
    expect(fresh.attempt).toBe(2);
    // the first worker wakes up late: neither its result nor its failure is written
    expect(await queue().complete(stale, { ...RESULT, autopsy: 'stale' })).toBeUndefined();
    expect(await queue().fail(stale, 'stale failure', { maxAttempts: 5, backoffMs: 0 })).toBe(
      'lost-lease',
    );
    expect(await queue().complete(fresh, { ...RESULT, autopsy: 'fresh' })).toBeDefined();
    const rows = await jobsOf(t.store, traceId);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ state: 'done', autopsy: 'fresh', attempts: 2 });
    expect(rows[0]!.last_error).toMatch(LEASE_EXPIRED);
  });

  it('retries a failed attempt after its backoff, then fails for good with the last error kept', async () => {
    const traceId = await finishedRun();
    const options = { maxAttempts: 3, backoffMs: 300 };
    expect(await queue().fail(await claimOf(traceId), 'boom 1', options)).toBe('retried');
    let [row] = await jobsOf(t.store, traceId);
    expect(row).toMatchObject({ state: 'pending', attempts: 1, last_error: 'boom 1' });
    // not runnable during the backoff
    expect(row!.run_after.getTime()).toBeGreaterThan(Date.now() + 100);
    const during = await queue().claimNext('w', 60_000);
    expect(during.job?.traceId).not.toBe(traceId);
    await sleep(350);
    expect(await queue().fail(await claimOf(traceId), 'boom 2', options)).toBe('retried');
    await sleep(350);
    expect(await queue().fail(await claimOf(traceId), 'boom 3', options)).toBe('failed');
    [row] = await jobsOf(t.store, traceId);
    expect(row).toMatchObject({ state: 'failed', attempts: 3, last_error: 'boom 3' });
    expect(row!.finished_at).not.toBeNull();
    expect((await queue().claimNext('w', 60_000)).job?.traceId).not.toBe(traceId);
  });

  it('counts a lease that expired as an attempt: a job whose workers keep dying ends failed', async () => {
    const traceId = await finishedRun();
    await claimOf(traceId, 30);
    await sleep(80);
    expect(await queue().requeueExpired(2)).toMatchObject({ pending: 1 });
    await claimOf(traceId, 30);
    await sleep(80);
    expect(await queue().requeueExpired(2)).toMatchObject({ failed: 1 });
    const [row] = await jobsOf(t.store, traceId);
    expect(row).toMatchObject({ state: 'failed', attempts: 2 });
    expect(row!.last_error).toMatch(LEASE_EXPIRED);
  });

  it('a re-finalisation refreshes a job not tried yet, and replaces one waiting for a retry', async () => {
    const traceId = await finishedRun(60_000);
    const [first] = await jobsOf(t.store, traceId);
    await refinalise(traceId, 0);
    let rows = await jobsOf(t.store, traceId);
    // the same job, now runnable at once
    expect(rows.map((r) => [r.id, r.state])).toEqual([[first!.id, 'pending']]);
    expect(rows[0]!.run_after.getTime()).toBeLessThan(first!.run_after.getTime());

    await queue().fail(await claimOf(traceId), 'boom', { maxAttempts: 5, backoffMs: 60_000 });
    await refinalise(traceId, 0);
    rows = await jobsOf(t.store, traceId);
    // the retry would analyse the older state with fewer attempts left: a fresh job instead
    expect(rows.map((r) => [r.state, r.attempts])).toEqual([
      ['superseded', 1],
      ['pending', 0],
    ]);
  });

  it('a running job that fails while a newer finalisation queued a job is superseded, not pending twice', async () => {
    const traceId = await finishedRun();
    const older = await claimOf(traceId);
    await refinalise(traceId); // a new pending job while the older one runs
    expect(await queue().fail(older, 'boom', { maxAttempts: 5, backoffMs: 0 })).toBe('superseded');
    const rows = await jobsOf(t.store, traceId);
    expect(rows.map((r) => r.state)).toEqual(['superseded', 'pending']);
    expect(rows[0]!.last_error).toBe('boom');
  });

  it('a running job whose lease expires after a newer finalisation is superseded, not pending twice', async () => {
    const traceId = await finishedRun();
    await claimOf(traceId, 30);
    await refinalise(traceId);
    await sleep(80);
    expect(await queue().requeueExpired(5)).toMatchObject({ superseded: 1 });
    expect((await jobsOf(t.store, traceId)).map((r) => r.state)).toEqual(['superseded', 'pending']);
  });

  if (engine === 'postgres')
    it('a retry racing a concurrent finalisation on the one-pending index ends superseded', async () => {
      const traceId = await finishedRun();
      const older = await claimOf(traceId);
      // Another instance finalises the trace again and has not committed yet: the retry's
      // snapshot cannot see that job, and its update to pending waits on the unique index.
      const other = new pg.Client({
        connectionString: t.location.databaseUrl,
        options: `-c search_path=${t.location.databaseSchema}`,
      });
      await other.connect();
      try {
        await other.query('BEGIN');
        await other.query(
          `INSERT INTO analysis_jobs (trace_id, agent_id, run_after) VALUES ($1, $2, now())`,
          [traceId, agentId],
        );
        const retry = queue().fail(older, 'boom', { maxAttempts: 5, backoffMs: 0 });
        await sleep(200);
        await other.query('COMMIT');
        expect(await retry).toBe('superseded');
      } finally {
        await other.end();
      }
      expect((await jobsOf(t.store, traceId)).map((r) => r.state)).toEqual([
        'superseded',
        'pending',
      ]);
    });
});
