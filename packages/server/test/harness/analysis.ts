import { AnalysisWorker, type WorkerLogger } from '../../src/analysis/analysis-worker.js';
import type { Analyzer } from '../../src/analysis/analyzer.js';
import { HeuristicAnalyzer } from '../../src/analysis/heuristic-analyzer.js';
import { Metrics } from '../../src/observability/metrics.js';
import type { Store } from '../../src/store/open-store.js';
import { send } from './http.js';

export const silentLogger: WorkerLogger = {
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
};

export interface TestWorkerOptions {
  analyzer?: Analyzer;
  leaseMs?: number;
  maxAttempts?: number;
  pollMs?: number;
  retryBaseMs?: number;
  metrics?: Metrics;
  workerId?: string;
}

/** A started in-process worker on `store`'s queue (heuristic analyzer, short poll). */
export function startTestWorker(store: Store, options: TestWorkerOptions = {}): AnalysisWorker {
  const worker = new AnalysisWorker({
    queue: store.analysis,
    fingerprints: store.fingerprints,
    analyzer: options.analyzer ?? new HeuristicAnalyzer(),
    logger: silentLogger,
    metrics: options.metrics ?? new Metrics(),
    leaseMs: options.leaseMs ?? 60_000,
    maxAttempts: options.maxAttempts ?? 5,
    pollMs: options.pollMs ?? 50,
    ...(options.retryBaseMs !== undefined ? { retryBaseMs: options.retryBaseMs } : {}),
    ...(options.workerId !== undefined ? { workerId: options.workerId } : {}),
  });
  worker.start();
  return worker;
}

export interface JobRow {
  id: number;
  state: string;
  attempts: number;
  last_error: string | null;
  analyzer: string | null;
  autopsy: string | null;
  fallback_reason: string | null;
  worker_id: string | null;
  run_after: Date;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  locked_until: Date | null;
}

/** Every job of a trace, oldest first, read straight from the table. */
export function jobsOf(store: Store, traceId: string): Promise<JobRow[]> {
  return store.sql.query<JobRow>(
    `SELECT id, state, attempts, last_error, analyzer, autopsy, fallback_reason, worker_id,
            run_after, created_at, started_at, finished_at, locked_until
     FROM analysis_jobs WHERE trace_id = $1 ORDER BY id`,
    [traceId],
  );
}

/** GET /v1/traces/:id/analysis as a dashboard user. */
export function getAnalysis(url: string, token: string, traceId: string) {
  return send(url, `/v1/traces/${traceId}/analysis`, undefined, { token });
}

/**
 * Four heuristic workers, two on each of two stores (two instances' pools on one database),
 * that record which worker analysed each trace, and pause a few ms inside each job so that their
 * claims interleave.
 */
export function startFourRecordingWorkers(
  first: Store,
  second: Store,
): { workers: AnalysisWorker[]; analysed: Map<string, string[]> } {
  const analysed = new Map<string, string[]>();
  const heuristic = new HeuristicAnalyzer();
  const recording = (name: string): Analyzer => ({
    name: 'heuristic',
    async analyze(run) {
      analysed.set(run.trace.id, [...(analysed.get(run.trace.id) ?? []), name]);
      await new Promise((r) => setTimeout(r, Math.random() * 3));
      return heuristic.analyze(run);
    },
  });
  const workers = [
    ['a1', first],
    ['a2', first],
    ['b1', second],
    ['b2', second],
  ].map(([workerId, store]) =>
    startTestWorker(store as Store, {
      analyzer: recording(workerId as string),
      workerId: workerId as string,
      pollMs: 20,
    }),
  );
  return { workers, analysed };
}
