import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import type { Metrics } from '../observability/metrics.js';
import type { AnalysisStore, ClaimedJob, ReleaseOutcome } from '../store/analysis-store.js';
import type { FingerprintStore } from '../store/fingerprint-store.js';
import type { AnalysisResult, Analyzer } from './analyzer.js';

/** What the worker logs through (pino's and Fastify's loggers fit). */
export interface WorkerLogger {
  debug(details: object, message: string): void;
  info(details: object, message: string): void;
  warn(details: object, message: string): void;
  error(details: object, message: string): void;
}

export interface AnalysisWorkerOptions {
  queue: AnalysisStore;
  /**
   * Where a finished run's fingerprint (`traceHash`) is computed and kept: each job fingerprints
   * its run before analysing it (a failure fails the job, which is retried like an analysis),
   * and between jobs the worker fingerprints again the finished runs a later batch changed.
   */
  fingerprints: Pick<FingerprintStore, 'fingerprint' | 'claimDue' | 'doneDue'>;
  analyzer: Analyzer;
  logger: WorkerLogger;
  metrics: Pick<
    Metrics,
    'analysisJobs' | 'analysisDuration' | 'analysisDelay' | 'analysisFallbacks'
  >;
  /** How long a claimed job is ours; past it another worker may take it. */
  leaseMs: number;
  /** Attempts before a job is marked failed. */
  maxAttempts: number;
  /** Longest idle sleep between looks at the queue. */
  pollMs: number;
  /** Delay before the first retry; it doubles with every attempt (default 5 s). */
  retryBaseMs?: number;
  /** Longest delay between retries (default 10 min). */
  retryMaxMs?: number;
  /** Events loaded per run at most (default 20,000: the first and last halves). */
  maxEvents?: number;
  /**
   * Event bytes (payloads and error messages) loaded per run at most (default 8 MiB): past it
   * the autopsy is written from the first and last events and says how many it left out.
   */
  maxEventBytes?: number;
  workerId?: string;
}

/** Changed runs fingerprinted again per look at the queue, between analysis jobs. */
const REFINGERPRINT_BATCH = 10;
/** Shortest idle sleep: a runnable job another worker has just locked is about to go. */
const MIN_SLEEP_MS = 20;
/** Longest sleep after the store failed, however often. */
const MAX_ERROR_SLEEP_MS = 5_000;
const MAX_ERROR_CHARS = 1_000;
export const DEFAULT_MAX_EVENT_BYTES = 8 * 1024 * 1024;

export function newWorkerId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
}

function describe(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return text.length > MAX_ERROR_CHARS ? `${text.slice(0, MAX_ERROR_CHARS - 1)}…` : text;
}

/**
 * Takes analysis jobs from the queue one at a time and stores their autopsies. Any number of
 * workers, in any processes, may share a queue. Idle, it sleeps until the next job becomes
 * runnable, at most `pollMs`; `nudge` shortens that sleep when this process queued a job.
 */
export class AnalysisWorker {
  readonly workerId: string;
  private readonly abort = new AbortController();
  private loop: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;
  private stopRequested = false;
  /** Earliest time a nudge asked the worker to look again. */
  private wakeAt = Number.POSITIVE_INFINITY;
  /** Re-arms the current sleep for an earlier wake-up; set only while sleeping. */
  private rearm: (() => void) | undefined;
  private nextReapAt = 0;
  private storeFailures = 0;

  constructor(private readonly options: AnalysisWorkerOptions) {
    this.workerId = options.workerId ?? newWorkerId();
  }

  /** Starts the loop; calling it again does nothing. */
  start(): void {
    this.loop ??= this.run();
  }

  /** A job was queued here that becomes runnable in `delayMs`: look again by then. */
  nudge(delayMs = 0): void {
    const at = Date.now() + delayMs;
    if (at >= this.wakeAt) return;
    this.wakeAt = at;
    this.rearm?.();
  }

  /**
   * Stops claiming; lets the job in flight finish within `deadlineMs`, otherwise abandons it to
   * its lease (another worker takes it once the lease runs out). Idempotent.
   */
  stop(deadlineMs: number): Promise<void> {
    this.stopping ??= (async () => {
      this.stopRequested = true;
      this.nudge();
      const loop = this.loop;
      if (!loop) return;
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<'deadline'>((resolve) => {
        timer = setTimeout(() => resolve('deadline'), deadlineMs);
        timer.unref();
      });
      const ended = await Promise.race([loop.then(() => 'ended' as const), deadline]);
      clearTimeout(timer);
      if (ended === 'deadline') {
        this.abort.abort();
        this.options.logger.warn(
          { workerId: this.workerId, deadlineMs },
          'analysis in flight not finished by the shutdown deadline; its lease will return it',
        );
      }
    })();
    return this.stopping;
  }

  private async run(): Promise<void> {
    const { logger } = this.options;
    logger.info({ workerId: this.workerId }, 'analysis worker started');
    while (!this.stopRequested) {
      let sleepMs = this.options.pollMs;
      try {
        this.wakeAt = Number.POSITIVE_INFINITY;
        await this.requeueExpiredIfDue();
        const { job, nextRunInMs } = await this.options.queue.claimNext(
          this.workerId,
          this.options.leaseMs,
        );
        if (this.storeFailures > 0)
          logger.info({ workerId: this.workerId }, 'analysis queue reachable again');
        this.storeFailures = 0;
        // On PGlite every query resolves without I/O: a queue of jobs would keep the event
        // loop from ever reaching other requests (another agent's reads waited out a 4,000-run
        // flood). One turn of the loop between jobs lets them in.
        if (job) {
          await this.process(job);
          await new Promise<void>((resolve) => setImmediate(resolve));
          continue;
        }
        if ((await this.refingerprintDue()) > 0) {
          await new Promise<void>((resolve) => setImmediate(resolve));
          continue;
        }
        if (nextRunInMs !== null)
          sleepMs = Math.min(sleepMs, Math.max(MIN_SLEEP_MS, Math.ceil(nextRunInMs)));
      } catch (error) {
        // The store is unreachable (or a bug): back off, keep trying; held jobs come back
        // through their leases.
        this.storeFailures++;
        sleepMs = Math.min(MAX_ERROR_SLEEP_MS, this.options.pollMs * 2 ** this.storeFailures);
        if (this.storeFailures === 1 || this.storeFailures % 20 === 0)
          logger.warn({ err: error, workerId: this.workerId }, 'analysis queue unavailable');
      }
      await this.sleep(sleepMs);
    }
    logger.info({ workerId: this.workerId }, 'analysis worker stopped');
  }

  /**
   * Fingerprints again a few finished runs that a later batch changed; how many it took. A run
   * whose fingerprinting fails stays claimed until its lease runs out, then is taken again.
   */
  private async refingerprintDue(): Promise<number> {
    const { fingerprints, logger, leaseMs } = this.options;
    const due = await fingerprints.claimDue(REFINGERPRINT_BATCH, leaseMs);
    for (const run of due) {
      if (this.stopRequested) break;
      try {
        const outcome = await fingerprints.fingerprint(run.traceId);
        // changed while read: the change marked the run again
        if (outcome.kind !== 'changed') await fingerprints.doneDue(run);
      } catch (error) {
        logger.warn(
          { workerId: this.workerId, traceId: run.traceId, error: describe(error) },
          'fingerprinting a changed run failed; it is taken again after its lease',
        );
      }
    }
    return due.length;
  }

  private sleep(ms: number): Promise<void> {
    if (this.stopRequested) return Promise.resolve();
    return new Promise<void>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const until = Date.now() + ms;
      const arm = () => {
        clearTimeout(timer);
        timer = setTimeout(
          () => {
            this.rearm = undefined;
            resolve();
          },
          Math.max(0, Math.min(until, this.wakeAt) - Date.now()),
        );
        // never what keeps a process alive: the server's listener or the worker command is
        timer.unref();
      };
      this.rearm = arm;
      arm();
    });
  }

  private async requeueExpiredIfDue(): Promise<void> {
    const now = Date.now();
    if (now < this.nextReapAt) return;
    this.nextReapAt = now + this.options.pollMs;
    const counts = await this.options.queue.requeueExpired(this.options.maxAttempts);
    for (const [state, n] of Object.entries(counts)) {
      const outcome = state === 'pending' ? 'lease-expired' : state;
      this.options.metrics.analysisJobs.inc({ outcome }, n);
      this.options.logger.warn(
        { workerId: this.workerId, jobs: n, now: state },
        'analysis jobs whose lease expired were taken back',
      );
    }
  }

  private backoffMs(attempt: number): number {
    const base = this.options.retryBaseMs ?? 5_000;
    const max = this.options.retryMaxMs ?? 10 * 60_000;
    // exponential, plus up to a quarter of jitter so that jobs failing together spread out
    const delay = Math.min(max, base * 2 ** Math.min(30, attempt - 1));
    return Math.round(delay * (1 + Math.random() * 0.25));
  }

  private async process(job: ClaimedJob): Promise<void> {
    const { queue, analyzer, metrics, logger } = this.options;
    const started = performance.now();
    let result: AnalysisResult | undefined;
    let failure = 'the trace no longer exists';
    try {
      await this.options.fingerprints.fingerprint(job.traceId);
      const run = await queue.loadRun(
        job.traceId,
        this.options.maxEvents ?? 20_000,
        this.options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES,
      );
      if (run) result = await analyzer.analyze(run, this.abort.signal);
    } catch (error) {
      failure = describe(error);
    }
    const context = { workerId: this.workerId, jobId: job.id, traceId: job.traceId };
    if (this.abort.signal.aborted) return; // past the shutdown deadline: the lease returns it

    let outcome: ReleaseOutcome;
    if (result) {
      const timings = await queue.complete(job, result);
      outcome = timings ? 'done' : 'lost-lease';
      if (timings) {
        metrics.analysisDuration.observe(
          { analyzer: result.analyzer },
          (performance.now() - started) / 1000,
        );
        metrics.analysisDelay.observe(Math.max(0, timings.delayMs) / 1000);
      }
      if (result.fallbackReason) {
        metrics.analysisFallbacks.inc();
        logger.warn({ ...context, reason: result.fallbackReason }, 'LLM analyzer fell back');
      }
    } else {
      outcome = await queue.fail(job, failure, {
        maxAttempts: this.options.maxAttempts,
        backoffMs: this.backoffMs(job.attempt),
      });
    }
    metrics.analysisJobs.inc({ outcome });
    if (outcome === 'done') logger.debug({ ...context, analyzer: result?.analyzer }, 'analysed');
    else if (outcome === 'lost-lease')
      logger.warn(context, 'analysis finished after its lease was lost; another worker owns it');
    else
      logger.warn(
        { ...context, attempt: job.attempt, outcome, error: failure },
        'analysis attempt failed',
      );
  }
}
