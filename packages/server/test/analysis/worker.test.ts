import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import type { AnalysisWorker } from '../../src/analysis/analysis-worker.js';
import type { Analyzer } from '../../src/analysis/analyzer.js';
import { HeuristicAnalyzer } from '../../src/analysis/heuristic-analyzer.js';
import { Metrics } from '../../src/observability/metrics.js';
import type { StoredRun } from '../../src/analysis/analyzer.js';
import { getAnalysis, jobsOf, startTestWorker } from '../harness/analysis.js';
import { describeEngines } from '../harness/engines.js';
import { postBatch } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { sleep, waitFor } from '../harness/wait.js';
import { runBatch } from '../fixtures/batches.js';

/** An analyzer whose behaviour a test scripts; it records when it was called. */
function scripted(behaviour: (run: StoredRun, signal: AbortSignal, call: number) => Promise<void>) {
  const calls: number[] = [];
  const heuristic = new HeuristicAnalyzer();
  const analyzer: Analyzer = {
    name: 'heuristic',
    async analyze(run, signal) {
      calls.push(Date.now());
      await behaviour(run, signal, calls.length);
      return heuristic.analyze(run);
    },
  };
  return { analyzer, calls };
}

const metricValue = async (metrics: Metrics, name: string, labels: string) => {
  const text = await metrics.registry.metrics();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line === undefined ? 0 : Number(line.split(' ').pop());
};

describeEngines('analysis worker [%s]', (engine) => {
  let server: TestServer;
  let agent: TestAgent;
  const workers: AnalysisWorker[] = [];
  beforeAll(async () => {
    server = await startTestServer(engine, { analysis: { graceMs: 0 } });
    agent = await server.createAgent();
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop(5_000)));
    // leave no runnable job to the next test
    await server.store.sql.query(
      "UPDATE analysis_jobs SET state = 'failed' WHERE state IN ('pending', 'running')",
    );
  });
  afterAll(() => server.close());

  const worker = (options: Parameters<typeof startTestWorker>[1]) => {
    const started = startTestWorker(server.store, options);
    workers.push(started);
    return started;
  };

  async function finishRun(status: 'completed' | 'errored' = 'completed') {
    const { body, trace } = runBatch({ events: 3, trace: { status } });
    expect((await postBatch(server.url, agent.apiKey, body)).status).toBe(202);
    return trace.id;
  }

  const doneJob = (traceId: string, timeoutMs = 15_000) =>
    waitFor(
      async () => {
        const [row] = await jobsOf(server.store, traceId);
        return row && (row.state === 'done' || row.state === 'failed') ? row : undefined;
      },
      `the job of ${traceId} to end`,
      timeoutMs,
    );

  it('sleeps until the next job becomes runnable: picked up within 150 ms of its grace', async () => {
    worker({ pollMs: 500 });
    await sleep(100); // idle, asleep
    const { body, trace } = runBatch({ trace: { status: 'completed' } });
    // a grace the test can see: the job is runnable 1.2 s after the batch
    await server.store.traces.writeBatch({
      agentId: agent.agentId,
      batchId: body.batchId,
      items: body.items.map((i) => ({ ...i, trace: { ...i.trace, agentId: agent.agentId } })),
      analysisGraceMs: 1_200,
    });
    const row = await doneJob(trace.id);
    expect(row.state).toBe('done');
    const delay = row.finished_at!.getTime() - row.run_after.getTime();
    expect(delay).toBeGreaterThanOrEqual(0);
    expect(delay).toBeLessThan(150);
  });

  it('a nudge from this process wakes an idle worker at once', async () => {
    const w = worker({ pollMs: 10_000 });
    await sleep(200); // the first look found nothing: asleep for 10 s
    const traceId = await finishRun();
    const nudged = Date.now();
    w.nudge(0);
    const row = await doneJob(traceId, 3_000);
    expect(row.finished_at!.getTime() - nudged).toBeLessThan(1_000);
  });

  it('retries a failing analysis with growing backoff, then marks it failed with the last error', async () => {
    const metrics = new Metrics();
    const { analyzer, calls } = scripted(async (_run, _signal, call) => {
      throw new Error(`analyzer exploded on call ${call}`);
    });
    worker({ analyzer, maxAttempts: 3, retryBaseMs: 150, metrics });
    const traceId = await finishRun('errored');
    const row = await doneJob(traceId);
    expect(row).toMatchObject({
      state: 'failed',
      attempts: 3,
      last_error: 'Error: analyzer exploded on call 3',
      autopsy: null,
    });
    expect(calls).toHaveLength(3);
    const [first, second, third] = calls as [number, number, number];
    expect(second - first).toBeGreaterThanOrEqual(150); // base
    expect(third - second).toBeGreaterThanOrEqual(300); // doubled
    expect(await metricValue(metrics, 'flightlog_analysis_jobs_total', 'outcome="retried"')).toBe(
      2,
    );
    expect(await metricValue(metrics, 'flightlog_analysis_jobs_total', 'outcome="failed"')).toBe(1);
    const token = await server.userToken('fay', agent.agentId);
    const res = await getAnalysis(server.url, token, traceId);
    expect(res.body).toMatchObject({
      status: 'failed',
      autopsy: null,
      attempts: 3,
      error: 'Error: analyzer exploded on call 3',
    });
  });

  it('a flaky analysis succeeds on its retry; the metrics count the outcome, duration and delay', async () => {
    const metrics = new Metrics();
    const { analyzer } = scripted(async (_run, _signal, call) => {
      if (call === 1) throw new Error('transient');
    });
    worker({ analyzer, retryBaseMs: 50, metrics });
    const traceId = await finishRun();
    const row = await doneJob(traceId);
    expect(row).toMatchObject({ state: 'done', attempts: 2, analyzer: 'heuristic' });
    expect(row.autopsy).toMatch(/^## Verdict: succeeded/);
    expect(await metricValue(metrics, 'flightlog_analysis_jobs_total', 'outcome="done"')).toBe(1);
    expect(
      await metricValue(
        metrics,
        'flightlog_analysis_duration_seconds_count',
        'analyzer="heuristic"',
      ),
    ).toBe(1);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/^flightlog_analysis_delay_seconds_count 1$/m);
  });

  it('stop() stops claiming and lets the job in flight finish', async () => {
    let started!: () => void;
    const inFlight = new Promise<void>((resolve) => (started = resolve));
    const { analyzer } = scripted(async () => {
      started();
      await sleep(400);
    });
    const w = worker({ analyzer });
    const traceId = await finishRun();
    await inFlight;
    const stopping = Date.now();
    await w.stop(5_000);
    expect(Date.now() - stopping).toBeGreaterThanOrEqual(300);
    expect((await jobsOf(server.store, traceId))[0]).toMatchObject({ state: 'done' });
    // stopped: a new job stays pending
    const next = await finishRun();
    await sleep(300);
    expect((await jobsOf(server.store, next))[0]).toMatchObject({ state: 'pending' });
    await w.stop(5_000); // idempotent
  });

  it('stop() past its deadline abandons the job to its lease; another worker finishes it once', async () => {
    let started!: () => void;
    const inFlight = new Promise<void>((resolve) => (started = resolve));
    let aborted = false;
    const { analyzer: hanging } = scripted(
      (_run, signal) =>
        new Promise<void>((_, reject) => {
          started();
          signal.addEventListener('abort', () => {
            aborted = true;
            reject(new Error('aborted'));
          });
        }),
    );
    const first = worker({ analyzer: hanging, leaseMs: 1_000, workerId: 'first' });
    const traceId = await finishRun();
    await inFlight;
    const stopping = Date.now();
    await first.stop(200);
    expect(Date.now() - stopping).toBeLessThan(1_000);
    expect(aborted).toBe(true);
    // left to its lease: still running, nothing written
    expect((await jobsOf(server.store, traceId))[0]).toMatchObject({
      state: 'running',
      attempts: 1,
      worker_id: 'first',
      last_error: null,
    });
    worker({ workerId: 'second' });
    const row = await doneJob(traceId);
    expect(row).toMatchObject({ state: 'done', attempts: 2, worker_id: 'second' });
    expect(row.last_error).toMatch(/^lease expired/);
  });
});
