import { afterAll, beforeAll, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/store/open-store.js';
import { startFourRecordingWorkers } from '../harness/analysis.js';
import { describeWithPostgres, openTestStore, type TestStore } from '../harness/engines.js';
import { waitFor } from '../harness/wait.js';
import { newId, runBatch } from '../fixtures/batches.js';

const JOBS = 300;

describeWithPostgres('analysis workers sharing one PostgreSQL queue [postgres]', () => {
  let t: TestStore;
  let second: Store;
  const agentId = `agent-${newId()}`;
  beforeAll(async () => {
    t = await openTestStore('postgres');
    // a second instance: its own connection pool on the same schema
    second = await openStore({ ...t.location, poolSize: 4 });
    await t.store.agents.createAgent({
      id: agentId,
      name: null,
      keyId: newId(),
      keyHash: newId(),
      verifyTokenHash: newId(),
    });
  });
  afterAll(async () => {
    await second.close();
    await t.dispose();
  });

  it(`never process the same job twice: ${JOBS} jobs, four workers on two pools, each job done exactly once`, async () => {
    const traceIds: string[] = [];
    for (let i = 0; i < JOBS; i++) {
      const { body, trace } = runBatch({ events: 5, trace: { status: 'completed' } });
      // queued far in the future: released to all workers at once below
      await t.store.traces.writeBatch({
        agentId,
        batchId: body.batchId,
        items: body.items.map((item) => ({ ...item, trace: { ...item.trace, agentId } })),
        analysisGraceMs: 3_600_000,
      });
      traceIds.push(trace.id);
    }

    const { workers, analysed } = startFourRecordingWorkers(t.store, second);
    try {
      await t.store.sql.query("UPDATE analysis_jobs SET run_after = now() WHERE state = 'pending'");
      await waitFor(
        async () => {
          const [row] = await t.store.sql.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM analysis_jobs WHERE state = 'done'",
          );
          return row!.n === JOBS ? true : undefined;
        },
        'every job done',
        60_000,
      );
    } finally {
      await Promise.all(workers.map((w) => w.stop(5_000)));
    }

    // each trace analysed by exactly one worker, once
    expect(analysed.size).toBe(JOBS);
    const twice = [...analysed].filter(([, by]) => by.length !== 1);
    expect(twice).toEqual([]);
    // and every one of the four took part
    const perWorker = new Map<string, number>();
    for (const [, [by]] of analysed) perWorker.set(by!, (perWorker.get(by!) ?? 0) + 1);
    expect([...perWorker.keys()].sort()).toEqual(['a1', 'a2', 'b1', 'b2']);

    const rows = await t.store.sql.query<{ trace_id: string; attempts: number; worker_id: string }>(
      'SELECT trace_id, attempts, worker_id FROM analysis_jobs ORDER BY id',
    );
    expect(rows).toHaveLength(JOBS);
    expect(rows.every((r) => r.attempts === 1)).toBe(true);
    // the stored result comes from the worker that analysed it
    for (const row of rows) expect(analysed.get(row.trace_id)).toEqual([row.worker_id]);
    expect(new Set(rows.map((r) => r.trace_id))).toEqual(new Set(traceIds));
  }, 90_000);
});
