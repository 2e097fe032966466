import { afterAll, beforeAll, expect, it } from 'vitest';
import { newId, runBatch } from '../fixtures/batches.js';
import type { AnalysisWorker } from '../../src/analysis/analysis-worker.js';
import { getAnalysis, startTestWorker } from '../harness/analysis.js';
import { describeEngines } from '../harness/engines.js';
import { postBatch } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { waitFor } from '../harness/wait.js';

const REQUESTS = 4;
const RUNS_PER_REQUEST = 1_000;
const GRACE_MS = 2_000;

/**
 * One agent finishes thousands of runs at once (requests of 1,000 finished traces, the most a
 * batch holds); another agent then finishes one run. Its autopsy must come after the documented
 * grace and about one job, not after the flood: agents take turns in the analysis queue.
 */
describeEngines('the analysis queue under one agent flood [%s]', (engine) => {
  let server: TestServer;
  let flooder: TestAgent;
  let other: TestAgent;
  let token = '';
  let worker: AnalysisWorker;

  beforeAll(async () => {
    server = await startTestServer(engine, { analysis: { graceMs: GRACE_MS } });
    flooder = await server.createAgent({ name: 'flooder' });
    other = await server.createAgent({ name: 'other' });
    token = await server.userToken('other-owner', other.agentId);
    // the server's own worker, as `flightlog serve` runs it (heuristic analyzer)
    worker = startTestWorker(server.store, { pollMs: 100 });
  });
  afterAll(async () => {
    await worker.stop(5_000);
    await server.close();
  });

  /** From the 202 of the other agent's finished run to its autopsy, read as its user would. */
  async function autopsyDelay(): Promise<number> {
    const { body, trace } = runBatch({ events: 3, trace: { status: 'completed' } });
    const res = await postBatch(server.url, other.apiKey, body);
    expect(res.status, res.text).toBe(202);
    const accepted = performance.now();
    await waitFor(
      async () => {
        const analysis = await getAnalysis(server.url, token, trace.id);
        return analysis.body.status === 'done' ? true : undefined;
      },
      "the other agent's autopsy",
      120_000,
      25,
    );
    return performance.now() - accepted;
  }

  it(`another agent's autopsy stays within a few seconds while one agent floods the queue with ${REQUESTS} × ${RUNS_PER_REQUEST} finished runs`, async () => {
    const quiet = await autopsyDelay();

    const flood = Array.from({ length: REQUESTS }, () => {
      const runs = Array.from({ length: RUNS_PER_REQUEST }, () =>
        runBatch({ trace: { status: 'completed' } }),
      );
      return { batchId: newId(), items: runs.flatMap((run) => run.body.items) };
    });
    const posted = await Promise.all(flood.map((b) => postBatch(server.url, flooder.apiKey, b)));
    for (const res of posted) expect(res.status, res.text).toBe(202);
    const started = performance.now();
    const during = await autopsyDelay();
    console.log(
      `[${engine}] other agent's autopsy delay: quiet ${quiet.toFixed(0)} ms, behind ` +
        `${REQUESTS * RUNS_PER_REQUEST} finished runs of one agent ${during.toFixed(0)} ms ` +
        `(ANALYSIS_GRACE_MS ${GRACE_MS})`,
    );
    // the grace, then about one job; before the turns it waited for the flood (10–14 s)
    expect(during).toBeLessThan(GRACE_MS + 4_000);

    // and the flood is still analysed, every run once
    await waitFor(
      async () => {
        const [row] = await server.store.sql.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM analysis_jobs WHERE state = 'done'",
        );
        return row!.n === REQUESTS * RUNS_PER_REQUEST + 2 ? true : undefined;
      },
      'the whole flood analysed',
      170_000,
      200,
    );
    console.log(
      `[${engine}] the flood's ${REQUESTS * RUNS_PER_REQUEST} analyses done in ` +
        `${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
    const perTrace = await server.store.sql.query<{ jobs: number; done: number }>(
      `SELECT count(*)::int AS jobs, count(*) FILTER (WHERE state = 'done')::int AS done
       FROM analysis_jobs GROUP BY trace_id HAVING count(*) <> 1 OR count(*) FILTER (WHERE state = 'done') <> 1`,
    );
    expect(perTrace).toEqual([]);
  });
});
