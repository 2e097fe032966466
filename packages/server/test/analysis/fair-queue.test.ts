import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Analyzer } from '../../src/analysis/analyzer.js';
import { HeuristicAnalyzer } from '../../src/analysis/heuristic-analyzer.js';
import { openStore, type Store } from '../../src/store/open-store.js';
import { jobsOf, startFourRecordingWorkers, startTestWorker } from '../harness/analysis.js';
import {
  describeEngines,
  describeWithPostgres,
  openTestStore,
  type TestStore,
} from '../harness/engines.js';
import { waitFor } from '../harness/wait.js';
import { newId, runBatch } from '../fixtures/batches.js';

const FLOOD = 1_000;
const PER_BATCH = 100;

describeEngines('analysis queue shared fairly between agents [%s]', (engine) => {
  let t: TestStore;
  const flooder = `agent-${newId()}`;
  const victim = `agent-${newId()}`;
  beforeAll(async () => {
    t = await openTestStore(engine);
    for (const id of [flooder, victim])
      await t.store.agents.createAgent({
        id,
        name: null,
        keyId: newId(),
        keyHash: newId(),
        verifyTokenHash: newId(),
      });
  });
  afterAll(() => t.dispose());

  /** Finished runs of `agentId`, in one batch; returns their trace ids. */
  async function finishRuns(agentId: string, count: number): Promise<string[]> {
    const runs = Array.from({ length: count }, () => runBatch({ trace: { status: 'completed' } }));
    const outcome = await t.store.traces.writeBatch({
      agentId,
      batchId: newId(),
      items: runs.map(({ body: { items } }) => ({
        ...items[0]!,
        trace: { ...items[0]!.trace, agentId },
      })),
      analysisGraceMs: 0,
    });
    expect(outcome).toMatchObject({ kind: 'accepted', analysisQueued: true });
    return runs.map(({ trace }) => trace.id);
  }

  it(`one agent's ${FLOOD} finished runs do not hold back another agent's autopsy; the flood is still analysed, each run once`, async () => {
    const flood: string[] = [];
    for (let i = 0; i < FLOOD / PER_BATCH; i++)
      flood.push(...(await finishRuns(flooder, PER_BATCH)));
    // the other agent finishes its run after the whole flood was queued
    const [mine] = await finishRuns(victim, 1);

    const order: string[] = [];
    const heuristic = new HeuristicAnalyzer();
    const recording: Analyzer = {
      name: 'heuristic',
      analyze(run) {
        order.push(run.trace.id);
        return heuristic.analyze(run);
      },
    };
    const worker = startTestWorker(t.store, { analyzer: recording, pollMs: 20 });
    try {
      const [job] = await waitFor(
        async () => {
          const jobs = await jobsOf(t.store, mine!);
          return jobs[0]?.state === 'done' ? jobs : undefined;
        },
        "the other agent's autopsy",
        120_000,
      );
      const delayMs = job!.finished_at!.getTime() - job!.run_after.getTime();
      const position = order.indexOf(mine!) + 1;
      console.log(
        `[${engine}] other agent's autopsy behind a ${FLOOD}-run flood: analysed as job #${position}, ` +
          `delay ${delayMs.toFixed(0)} ms`,
      );
      // Served in turn with the flooding agent: first or second, whatever the flood's size.
      expect(position).toBeLessThanOrEqual(2);
      expect(delayMs).toBeLessThan(5_000);

      await waitFor(
        async () => {
          const [row] = await t.store.sql.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM analysis_jobs WHERE state = 'done'",
          );
          return row!.n === FLOOD + 1 ? true : undefined;
        },
        'every job done',
        120_000,
      );
    } finally {
      await worker.stop(5_000);
    }
    expect(order).toHaveLength(FLOOD + 1);
    expect(new Set(order)).toEqual(new Set([...flood, mine]));
  });
});

describeWithPostgres('turns between agents with four workers on two pools [postgres]', () => {
  let t: TestStore;
  let second: Store;
  const agents = { flood: `agent-${newId()}`, a: `agent-${newId()}`, b: `agent-${newId()}` };
  const counts = { flood: 240, a: 30, b: 30 };
  beforeAll(async () => {
    t = await openTestStore('postgres');
    second = await openStore({ ...t.location, poolSize: 4 });
    for (const id of Object.values(agents))
      await t.store.agents.createAgent({
        id,
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

  it('each job is done exactly once, and the small agents are served alongside the flood', async () => {
    const traceAgent = new Map<string, string>();
    for (const [name, agentId] of Object.entries(agents)) {
      const total = counts[name as keyof typeof counts];
      for (let done = 0; done < total; done += 30) {
        const runs = Array.from({ length: Math.min(30, total - done) }, () =>
          runBatch({ trace: { status: 'completed' } }),
        );
        // queued far in the future: released to all workers at once below, the flood first
        await t.store.traces.writeBatch({
          agentId,
          batchId: newId(),
          items: runs.map(({ body: { items } }) => ({
            ...items[0]!,
            trace: { ...items[0]!.trace, agentId },
          })),
          analysisGraceMs: 3_600_000,
        });
        for (const { trace } of runs) traceAgent.set(trace.id, agentId);
      }
    }
    const total = traceAgent.size;

    const { workers, analysed } = startFourRecordingWorkers(t.store, second);
    try {
      // the flood's jobs the oldest: arrival order alone would serve them all first
      await t.store.sql.query(
        `UPDATE analysis_jobs SET run_after = now() - make_interval(secs =>
           CASE WHEN agent_id = $1 THEN 60 ELSE 1 END)
         WHERE state = 'pending'`,
        [agents.flood],
      );
      await waitFor(
        async () => {
          const [row] = await t.store.sql.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM analysis_jobs WHERE state = 'done'",
          );
          return row!.n === total ? true : undefined;
        },
        'every job done',
        60_000,
      );
    } finally {
      await Promise.all(workers.map((w) => w.stop(5_000)));
    }

    expect(analysed.size).toBe(total);
    expect([...analysed].filter(([, by]) => by.length !== 1)).toEqual([]);
    const rows = await t.store.sql.query<{ trace_id: string; attempts: number; agent_id: string }>(
      "SELECT trace_id, attempts, agent_id FROM analysis_jobs WHERE state = 'done' ORDER BY started_at, id",
    );
    expect(rows).toHaveLength(total);
    expect(rows.every((r) => r.attempts === 1)).toBe(true);
    // in turns, the two small agents' 60 jobs are done within about the first 3 × 30 claims
    const lastSmall = Math.max(...rows.map((r, i) => (r.agent_id === agents.flood ? -1 : i + 1)));
    console.log(
      `[postgres, 4 workers] the small agents' last job claimed as #${lastSmall} of ${total}`,
    );
    expect(lastSmall).toBeLessThanOrEqual(150);
  }, 90_000);
});
