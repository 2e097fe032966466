import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { messageId, RESYNC_MESSAGE, type ResyncNotice } from './live-bus.js';
import { BacklogOverflowError, PublishBacklog, type PendingBatch } from './publish-backlog.js';
import { isReplyError, type LiveScripts } from './redis-scripts.js';

/**
 * Batches at least this big (in the backlog's measure, about twice their JSON) are written on a
 * connection of their own, so that other agents' small writes do not queue behind megabytes.
 */
const BULK_BATCH_BYTES = 512 * 1024;

/** Batches written per round of a backlog flush (sent together, answered in order). */
const FLUSH_CHUNK = 100;
/** How many of the agent's newest tokens a retried write looks through (see redis-scripts.ts). */
const RETRY_LOOK_BACK = 100;
/** A flush that failed is tried again after this, doubling up to the maximum. */
const FLUSH_RETRY_MS = 250;
const FLUSH_RETRY_MAX_MS = 4_000;

/** A connection and its scripts: writes go on the shared one, or on the bulk one when big. */
export interface WriteLane {
  connection: Redis;
  scripts: LiveScripts;
}

const fieldsOf = (batch: PendingBatch) => batch.data.flatMap((d) => ['d', d]);

/**
 * The Redis bus's writing side: each batch to its agent's stream, in publish order per agent,
 * big ones on a lane of their own. While Redis is away (or behind batches still waiting) a batch
 * waits in a bounded backlog, written oldest first once Redis is back; what the backlog gives up
 * is announced to its agent's streams as a `resync`. A write that may have landed is retried
 * once, and then added only if it had not.
 */
export class RedisPublisher {
  /**
   * Per agent, the lane its writes in flight use and how many: an agent's next write takes the
   * same lane, so its batches reach its stream in publish order whichever lane they take.
   */
  private readonly inFlight = new Map<string, { bulk: boolean; writes: number }>();
  private readonly backlog: PublishBacklog;
  private publishSeq = 0;
  private flushing = false;
  private flushRetryMs = FLUSH_RETRY_MS;
  private flushTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly shared: WriteLane,
    private readonly bulk: WriteLane,
    backlogMaxBytes: number,
    private readonly onError: (error: unknown) => void,
  ) {
    this.backlog = new PublishBacklog(backlogMaxBytes);
  }

  /** Publishes one batch; resolves with its items' message ids once it is in Redis. */
  publish(agentId: string, data: string[]): Promise<string[]> {
    if (data.length === 0) return Promise.resolve([]);
    return new Promise<string[]>((resolve, reject) => {
      const batch: PendingBatch = {
        agentId,
        data,
        token: randomBytes(12).toString('base64url'),
        seq: ++this.publishSeq,
        bytes: data.reduce((sum, d) => sum + d.length * 2 + 64, 0),
        publishedAt: Date.now(),
        uncertain: false,
        resolve,
        reject,
      };
      // Behind batches still waiting, or while Redis is away: wait, in order.
      if (
        this.closed ||
        this.backlog.size > 0 ||
        this.flushing ||
        this.shared.connection.status !== 'ready'
      ) {
        this.hold(batch);
        return;
      }
      this.write(batch).then(resolve, (error: unknown) => {
        if (isReplyError(error)) return reject(error as Error);
        this.onError(error);
        batch.uncertain = true;
        this.hold(batch);
      });
    });
  }

  /** What waits for Redis now. */
  waiting(): { batches: number; bytes: number } {
    return { batches: this.backlog.size, bytes: this.backlog.bytes };
  }

  /** The agent's batches still waiting were meant for streams that no longer exist: not a loss. */
  forget(agentId: string): void {
    for (const batch of this.backlog.removeAgent(agentId)) batch.resolve([]);
  }

  /** Batches still waiting lose the items `keep` refuses before they are written. */
  shrink(agentId: string, keep: (data: string) => boolean): void {
    for (const batch of this.backlog.shrink(agentId, keep)) batch.resolve([]);
  }

  /** Shutdown: what still waits for Redis is lost to the streams (the store has it). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.flushTimer);
    for (const batch of this.backlog.clear()) batch.reject(new Error('the live bus is closed'));
  }

  /**
   * Writes what waited for Redis, oldest first: first the `resync` notices of agents that lost
   * batches, then the batches, a chunk at a time (sent together, so one round trip per chunk).
   * Stops at the first lost connection or timeout and tries again when Redis is ready (or after
   * a backoff, for a connection that stays open but does not answer).
   */
  flushBacklog(): void {
    const backlog = this.backlog;
    const commands = this.shared.connection;
    if (this.flushing || this.closed || commands.status !== 'ready') return;
    if (backlog.size === 0 && !backlog.hasGaps) return;
    this.flushing = true;
    (async () => {
      while (!this.closed && commands.status === 'ready' && (backlog.size > 0 || backlog.hasGaps)) {
        for (const [agentId, gap] of backlog.takeGaps())
          try {
            await this.announceGap(agentId, gap);
          } catch (error) {
            backlog.restoreGap(agentId, gap);
            throw error;
          }
        const chunk = backlog.peek(FLUSH_CHUNK);
        const written = await Promise.allSettled(chunk.map((batch) => this.write(batch)));
        for (const [i, outcome] of written.entries()) {
          const batch = chunk[i] as PendingBatch;
          if (outcome.status === 'rejected' && !isReplyError(outcome.reason)) {
            // This one and the rest of the chunk may have been written: retry them once.
            for (const rest of chunk.slice(i)) rest.uncertain = true;
            throw outcome.reason;
          }
          // false when its agent was forgotten while it was being written (already settled)
          const owed = backlog.remove(batch);
          if (outcome.status === 'fulfilled') batch.resolve(outcome.value);
          else if (owed) {
            // Redis refused it (out of memory, a key of the wrong type): it will not go later.
            backlog.recordGap(batch);
            batch.reject(outcome.reason as Error);
          }
        }
      }
      this.flushRetryMs = FLUSH_RETRY_MS;
    })()
      .catch((error: unknown) => {
        this.onError(error);
        this.retryFlushLater();
      })
      .finally(() => {
        this.flushing = false;
        // published while the last chunk was in flight; after a failure, the retry timer's
        // (a write that fails at once would otherwise spin here)
        if (this.flushTimer === undefined && (backlog.size > 0 || backlog.hasGaps))
          this.flushBacklog();
      });
  }

  /** One batch to its agent's stream; a retry of a write that may have landed adds it once. */
  private async write(batch: PendingBatch): Promise<string[]> {
    let lane = this.inFlight.get(batch.agentId);
    if (!lane) {
      // a bulk connection still connecting would refuse it: the shared one takes it then
      lane = {
        bulk: batch.bytes >= BULK_BATCH_BYTES && this.bulk.connection.status === 'ready',
        writes: 0,
      };
      this.inFlight.set(batch.agentId, lane);
    }
    lane.writes++;
    try {
      const id = await (lane.bulk ? this.bulk : this.shared).scripts.write(
        batch.agentId,
        batch.uncertain ? RETRY_LOOK_BACK : 0,
        batch.token,
        fieldsOf(batch),
      );
      return batch.data.map((_, index) => messageId(id, index));
    } finally {
      if (--lane.writes === 0) this.inFlight.delete(batch.agentId);
    }
  }

  /** Keeps a batch for when Redis is back; what the budget gives up is lost to the streams. */
  private hold(batch: PendingBatch): void {
    if (this.closed) {
      batch.reject(new Error('the live bus is closed'));
      return;
    }
    for (const dropped of this.backlog.push(batch))
      dropped.reject(
        new BacklogOverflowError(
          `live backlog over ${this.backlog.bytes} bytes while Redis is unreachable: batch dropped`,
        ),
      );
    this.flushBacklog();
  }

  private retryFlushLater(): void {
    if (this.flushTimer !== undefined || this.closed) return;
    this.flushTimer = setTimeout(() => {
      this.flushTimer = undefined;
      this.flushBacklog();
    }, this.flushRetryMs);
    this.flushTimer.unref();
    this.flushRetryMs = Math.min(this.flushRetryMs * 2, FLUSH_RETRY_MAX_MS);
  }

  /** A `resync` entry for an agent whose stream lost batches. */
  private async announceGap(
    agentId: string,
    gap: { missedBatches: number; from: number; to: number },
  ): Promise<void> {
    const notice: ResyncNotice = {
      message: RESYNC_MESSAGE,
      missedBatches: gap.missedBatches,
      from: new Date(gap.from).toISOString(),
      to: new Date(gap.to).toISOString(),
    };
    // an entry like a batch's (with its twin), so it is counted, trimmed and delivered alike
    await this.shared.scripts.write(agentId, 0, randomBytes(12).toString('base64url'), [
      'r',
      JSON.stringify(notice),
    ]);
  }
}
