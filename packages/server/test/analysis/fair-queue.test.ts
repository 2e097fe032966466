import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Analyzer } from '../../src/analysis/analyzer.js';
import { HeuristicAnalyzer } from '../../src/analysis/heuristic-analyzer.js';
import { jobsOf, startTestWorker } from '../harness/analysis.js';
import { describeEngines, openTestStore, type TestStore } from '../harness/engines.js';
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
