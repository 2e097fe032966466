import type { Trace } from '@flightlog/protocol';
import type { LiveBus } from '../live/live-bus.js';
import {
  WALK_START,
  type AgentRetention,
  type LifecycleStore,
  type RunningPosition,
  type StartPosition,
} from '../store/lifecycle-store.js';
import { RUNS_PER_STEP } from '../store/run-rows.js';
import { Pacer } from './pacer.js';
import type { LifecycleConfig } from './lifecycle-config.js';

/** What one pass of the sweeper did. */
export interface SweepReport {
  /** Runs ended as `timeout`. */
  timedOut: number;
  /** Deletions finished (rows left by one cut short, a live buffer not cleared, a write-back). */
  deletionsFinished: number;
  /** Tombstones past DELETED_RUN_TOMBSTONE_MS forgotten. */
  tombstonesExpired: number;
  /** Runs deleted by retention, and their events. */
  expiredRuns: number;
  expiredEvents: number;
  /** Time the pass spent in statements, and in all (ms): its share of the store's time. */
  workMs: number;
  elapsedMs: number;
}

/** What retention deleted of one agent in one pass. */
export interface RetentionSweep {
  agentId: string;
  days: number;
  runs: number;
  events: number;
}

/** Agents read per statement by the retention pass. */
const AGENTS_PER_STEP = 100;
/** Deleted runs' ids held before their live buffer is cleaned of them, at most. */
const FORGET_BATCH = 10_000;

/** A run written back by a batch that raced its deletion is looked for this long after it. */
const RESURRECTION_WINDOW_MS = 10 * 60_000;

export interface SweeperLog {
  warn(context: object, message: string): void;
  info(context: object, message: string): void;
}

export interface SweeperDependencies {
  store: Pick<
    LifecycleStore,
    | 'shortestRunTimeout'
    | 'walkRunning'
    | 'timeOut'
    | 'unfinishedDeletions'
    | 'deleteRunRows'
    | 'markLiveCleared'
    | 'expireTombstones'
    | 'retentionPage'
    | 'expiredRuns'
    | 'deleteRuns'
  >;
  config: LifecycleConfig;
  /** Where a run's new snapshot goes when the sweeper ends it (live `trace` message). */
  live: { publish(agentId: string, data: string[]): void };
  /** The live buffer deleted runs are removed from. */
  bus: Pick<LiveBus, 'forgetTraces'>;
  log: SweeperLog;
  /** The store's engine: the share of its time the sweeper takes depends on it (pacer.ts). */
  engine: 'pglite' | 'postgres';
  /** Told how many runs each step timed out (metrics). */
  onTimedOut?: (count: number) => void;
  /** Told of each pass when it ends (metrics). */
  onPass?: (report: SweepReport) => void;
  /** Told what retention deleted of each agent in a pass (metrics, the audit log). */
  onExpired?: (sweep: RetentionSweep) => void | Promise<void>;
}

/** Lets other work (ingest on the same event loop and, on PGlite, the same engine) run. */

/**
 * The background worker of the data lifecycle: every `sweepIntervalMs` one pass ends abandoned
 * runs (`timeout`), deletes runs past their retention, and finishes deletions (see
 * finishDeletions). A pass is a series of short statements, each bounded by `sweepRows` and its
 * own transaction, with a turn of the event loop between them: it never holds a lock or the
 * embedded engine for long, so ingest goes on beside it. Passes never overlap; the timer is
 * unref'd (it keeps no process alive) and `stop` ends the pass in progress after its current
 * statement. Every instance sharing a database runs one: the statements skip rows another
 * instance (or a batch) holds, so they share the work instead of doing it twice.
 */
export class LifecycleSweeper {
  private timer: NodeJS.Timeout | undefined;
  private pass: Promise<SweepReport> | undefined;
  private stopped = false;
  private readonly pacer: Pacer;

  constructor(private readonly deps: SweeperDependencies) {
    this.pacer = new Pacer(deps.config.sweepDutyPercent ?? (deps.engine === 'pglite' ? 10 : 50));
  }

  /** One statement of the sweeper, then the pause that keeps it to its share. */
  private paced<T>(work: () => Promise<T>): Promise<T> {
    return this.pacer.step(work);
  }

  private readonly between = (statementMs: number) => this.pacer.between(statementMs);

  /** Schedules passes every `sweepIntervalMs` (none when it is 0). */
  start(): void {
    if (this.deps.config.sweepIntervalMs > 0) this.schedule();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.sweep()
        .catch((error: unknown) => this.deps.log.warn({ err: error }, 'lifecycle sweep failed'))
        .finally(() => this.schedule());
    }, this.deps.config.sweepIntervalMs);
    this.timer.unref();
  }

  /** Runs one pass now (or joins the one in progress). */
  sweep(): Promise<SweepReport> {
    this.pass ??= this.run().finally(() => (this.pass = undefined));
    return this.pass;
  }

  /** No pass starts from now on; resolves when the one in progress has stopped. Idempotent. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.pacer.stop();
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.pass?.catch(() => {});
  }

  private async run(): Promise<SweepReport> {
    const report: SweepReport = {
      timedOut: 0,
      deletionsFinished: 0,
      tombstonesExpired: 0,
      expiredRuns: 0,
      expiredEvents: 0,
      workMs: 0,
      elapsedMs: 0,
    };
    if (this.stopped) return report;
    const started = performance.now();
    const workBefore = this.pacer.workMs;
    report.timedOut = await this.endAbandonedRuns();
    if (!this.stopped) Object.assign(report, await this.applyRetention());
    if (!this.stopped) report.deletionsFinished = await this.finishDeletions();
    if (!this.stopped) report.tombstonesExpired = await this.expireTombstones();
    report.workMs = Math.round(this.pacer.workMs - workBefore);
    report.elapsedMs = Math.round(performance.now() - started);
    this.deps.onPass?.(report);
    const { workMs: _work, elapsedMs: _elapsed, ...done } = report;
    if (Object.values(done).some((n) => n > 0))
      this.deps.log.info({ ...report }, 'lifecycle sweep');
    return report;
  }

  /** Ends every run idle past its agent's time-out, a step of `sweepRows` runs at a time. */
  private async endAbandonedRuns(): Promise<number> {
    const { store, config } = this.deps;
    const defaultTimeoutMs = config.runTimeoutMs;
    const idleForMs = await this.paced(() => store.shortestRunTimeout(defaultTimeoutMs));
    if (idleForMs === undefined) return 0;
    let after: RunningPosition = WALK_START;
    let ended = 0;
    while (!this.stopped) {
      const walked = await this.paced(() =>
        store.walkRunning({ idleForMs, after, limit: config.sweepRows, defaultTimeoutMs }),
      );
      const due = walked.filter((row) => row.due).map((row) => row.id);
      if (due.length > 0) {
        const traces = await this.paced(() => store.timeOut(due, defaultTimeoutMs));
        for (const trace of traces) this.announce(trace);
        ended += traces.length;
        if (traces.length > 0) this.deps.onTimedOut?.(traces.length);
      }
      const last = walked.at(-1);
      if (walked.length < config.sweepRows || last === undefined) break;
      after = [last.at, last.id];
    }
    return ended;
  }

  /**
   * Finishes deletions: the rows of one cut short (the process stopped mid-way), a live buffer
   * that could not be cleared (Redis was unreachable), and a run that a batch wrote back while it
   * was being deleted (on PostgreSQL, a batch statement that began before the tombstone's commit
   * does not see it). A step of `sweepRows` deletions at a time; a live buffer still unreachable
   * waits for the next pass.
   */
  private async finishDeletions(): Promise<number> {
    const { store, config, bus } = this.deps;
    let finished = 0;
    while (!this.stopped) {
      const unfinished = await this.paced(() =>
        store.unfinishedDeletions(config.sweepRows, RESURRECTION_WINDOW_MS),
      );
      let progressed = false;
      for (const deletion of unfinished) {
        if (this.stopped) break;
        if (!deletion.rowsDeleted) {
          await store.deleteRunRows(
            deletion.agentId,
            deletion.traceId,
            config.sweepRows,
            this.between,
          );
          progressed = true;
        }
        if (!deletion.liveCleared) {
          try {
            await bus.forgetTraces(deletion.agentId, [deletion.traceId]);
          } catch (error) {
            this.deps.log.warn(
              { err: error, agentId: deletion.agentId },
              'live buffer of a deleted run not cleared; tried again at the next pass',
            );
            continue;
          }
          await this.paced(() => store.markLiveCleared(deletion.agentId, deletion.traceId));
          progressed = true;
        }
        finished++;
      }
      // a step that changed nothing (only unreachable buffers left) ends the pass
      if (unfinished.length < config.sweepRows || !progressed) break;
    }
    return finished;
  }

  /**
   * Deletes the runs past their agent's retention (its own, or RETENTION_DAYS): agents a page
   * at a time, each agent's expired runs RUNS_PER_STEP at a time oldest first, their events
   * `sweepRows` per statement; then cleans the live buffer of them (only when it may still hold
   * batches that old).
   */
  private async applyRetention(): Promise<{ expiredRuns: number; expiredEvents: number }> {
    const { store, config } = this.deps;
    const total = { expiredRuns: 0, expiredEvents: 0 };
    let after = '';
    while (!this.stopped) {
      const agents = await this.paced(() =>
        store.retentionPage(config.retentionDays ?? 0, after, AGENTS_PER_STEP),
      );
      for (const agent of agents) {
        if (this.stopped) break;
        const swept = await this.expireRunsOf(agent);
        total.expiredRuns += swept.runs;
        total.expiredEvents += swept.events;
        if (swept.runs > 0) await this.deps.onExpired?.(swept);
      }
      const last = agents.at(-1);
      if (agents.length < AGENTS_PER_STEP || last === undefined) break;
      after = last.agentId;
    }
    return total;
  }

  private async expireRunsOf({ agentId, days }: AgentRetention): Promise<RetentionSweep> {
    const { store, config } = this.deps;
    const swept: RetentionSweep = { agentId, days, runs: 0, events: 0 };
    let after: StartPosition = WALK_START;
    let forget: string[] = [];
    let lastBatchBefore = 0;
    const cleanLive = async () => {
      if (forget.length === 0) return;
      try {
        await this.deps.bus.forgetTraces(agentId, forget, { lastBatchBefore: lastBatchBefore + 1 });
      } catch (error) {
        // the store is primary: the runs are gone; their batches leave the buffer by its bounds
        this.deps.log.warn({ err: error, agentId }, 'live buffer not cleaned of expired runs');
      }
      forget = [];
    };
    while (!this.stopped) {
      const walked = await this.paced(() => store.expiredRuns(agentId, days, after, RUNS_PER_STEP));
      const expired = walked.filter((run) => run.expired);
      if (expired.length > 0) {
        const ids = expired.map((run) => run.id);
        // paced statement by statement
        const gone = await store.deleteRuns(agentId, ids, config.sweepRows, this.between);
        swept.runs += gone.runs;
        swept.events += gone.events;
        forget.push(...ids);
        for (const run of expired) lastBatchBefore = Math.max(lastBatchBefore, run.lastBatchMs);
        if (forget.length >= FORGET_BATCH) await cleanLive();
      }
      const last = walked.at(-1);
      if (walked.length < RUNS_PER_STEP || last === undefined) break;
      after = [last.at, last.id];
    }
    await cleanLive();
    return swept;
  }

  private async expireTombstones(): Promise<number> {
    let expired = 0;
    while (!this.stopped) {
      const n = await this.paced(() =>
        this.deps.store.expireTombstones(this.deps.config.sweepRows),
      );
      expired += n;
      if (n < this.deps.config.sweepRows) break;
    }
    return expired;
  }

  /** A run the sweeper changed reaches its agent's live streams like a finalisation does. */
  private announce(trace: Trace): void {
    this.deps.live.publish(trace.agentId, [JSON.stringify({ trace, events: [] })]);
  }
}
