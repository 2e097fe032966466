import type { Trace } from '@flightlog/protocol';
import type { LiveBus } from '../live/live-bus.js';
import { WALK_START, type LifecycleStore, type RunningPosition } from '../store/lifecycle-store.js';
import type { LifecycleConfig } from './lifecycle-config.js';

/** What one pass of the sweeper did. */
export interface SweepReport {
  /** Runs ended as `timeout`. */
  timedOut: number;
  /** Deletions finished (rows left by one cut short, a live buffer not cleared, a write-back). */
  deletionsFinished: number;
  /** Tombstones past DELETED_RUN_TOMBSTONE_MS forgotten. */
  tombstonesExpired: number;
}

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
  >;
  config: LifecycleConfig;
  /** Where a run's new snapshot goes when the sweeper ends it (live `trace` message). */
  live: { publish(agentId: string, data: string[]): void };
  /** The live buffer deleted runs are removed from. */
  bus: Pick<LiveBus, 'forgetTraces'>;
  log: SweeperLog;
  /** Told how many runs each step timed out (metrics). */
  onTimedOut?: (count: number) => void;
}

/** Lets other work (ingest on the same event loop and, on PGlite, the same engine) run. */
const yieldTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * The background worker of the data lifecycle: every `sweepIntervalMs` one pass ends abandoned
 * runs (`timeout`) and finishes deletions (see finishDeletions). A pass is a series of short statements, each bounded by `sweepRows` and its
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

  constructor(private readonly deps: SweeperDependencies) {}

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
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.pass?.catch(() => {});
  }

  private async run(): Promise<SweepReport> {
    const report: SweepReport = { timedOut: 0, deletionsFinished: 0, tombstonesExpired: 0 };
    if (this.stopped) return report;
    report.timedOut = await this.endAbandonedRuns();
    if (!this.stopped) report.deletionsFinished = await this.finishDeletions();
    if (!this.stopped) report.tombstonesExpired = await this.expireTombstones();
    if (Object.values(report).some((n) => n > 0))
      this.deps.log.info({ ...report }, 'lifecycle sweep');
    return report;
  }

  /** Ends every run idle past its agent's time-out, a step of `sweepRows` runs at a time. */
  private async endAbandonedRuns(): Promise<number> {
    const { store, config } = this.deps;
    const defaultTimeoutMs = config.runTimeoutMs;
    const idleForMs = await store.shortestRunTimeout(defaultTimeoutMs);
    if (idleForMs === undefined) return 0;
    let after: RunningPosition = WALK_START;
    let ended = 0;
    while (!this.stopped) {
      const walked = await store.walkRunning({
        idleForMs,
        after,
        limit: config.sweepRows,
        defaultTimeoutMs,
      });
      const due = walked.filter((row) => row.due).map((row) => row.id);
      if (due.length > 0) {
        const traces = await store.timeOut(due, defaultTimeoutMs);
        for (const trace of traces) this.announce(trace);
        ended += traces.length;
        if (traces.length > 0) this.deps.onTimedOut?.(traces.length);
      }
      const last = walked.at(-1);
      if (walked.length < config.sweepRows || last === undefined) break;
      after = [last.at, last.id];
      await yieldTurn();
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
      const unfinished = await store.unfinishedDeletions(config.sweepRows, RESURRECTION_WINDOW_MS);
      let progressed = false;
      for (const deletion of unfinished) {
        if (this.stopped) break;
        if (!deletion.rowsDeleted) {
          await store.deleteRunRows(deletion.agentId, deletion.traceId, config.sweepRows);
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
          await store.markLiveCleared(deletion.agentId, deletion.traceId);
          progressed = true;
        }
        finished++;
      }
      // a step that changed nothing (only unreachable buffers left) ends the pass
      if (unfinished.length < config.sweepRows || !progressed) break;
      await yieldTurn();
    }
    return finished;
  }

  private async expireTombstones(): Promise<number> {
    let expired = 0;
    while (!this.stopped) {
      const n = await this.deps.store.expireTombstones(this.deps.config.sweepRows);
      expired += n;
      if (n < this.deps.config.sweepRows) break;
      await yieldTurn();
    }
    return expired;
  }

  /** A run the sweeper changed reaches its agent's live streams like a finalisation does. */
  private announce(trace: Trace): void {
    this.deps.live.publish(trace.agentId, [JSON.stringify({ trace, events: [] })]);
  }
}
