/** One batch waiting for the bus to take it. */
export interface PendingBatch {
  agentId: string;
  /** The JSON of each item, in order. */
  data: string[];
  /**
   * Stored with the entry: a batch whose write may have reached the bus (a timeout, a connection
   * lost after sending) is retried by a write that first looks for this token, so it is never
   * added twice.
   */
  token: string;
  /** Publish order: the backlog keeps it, whatever order failures are reported in. */
  seq: number;
  /** Rough memory held, for the backlog's budget. */
  bytes: number;
  /** When the batch was published (stored), ms since the epoch. */
  publishedAt: number;
  /** A write of this batch may have reached the bus. */
  uncertain: boolean;
  resolve(ids: string[]): void;
  reject(error: Error): void;
}

/** Batches of one agent that were given up: its stream owes the client a `resync`. */
export interface Gap {
  missedBatches: number;
  /** publishedAt of the first and the last of them. */
  from: number;
  to: number;
}

/** The backlog gave a batch up to stay within its budget. */
export class BacklogOverflowError extends Error {
  override name = 'BacklogOverflowError';
}

/**
 * Batches published while the live bus was unreachable, oldest first, bounded in bytes. Past the
 * budget the agent holding the most bytes gives up its oldest batch first, so one agent flooding
 * during an outage costs its own stream, not the others'; each agent that lost one is
 * remembered (up to `maxGapAgents`) so its stream can be told to re-read from the read API. No
 * I/O: the bus decides when to write and what to do with what this gives up.
 */
export class PublishBacklog {
  private queue: PendingBatch[] = [];
  /** Index of the oldest batch in `queue` (shifting a long array is O(n)). */
  private head = 0;
  private heldBytes = 0;
  /** Bytes held per agent, to find the one that gives up first. */
  private readonly agentBytes = new Map<string, number>();
  private readonly gaps = new Map<string, Gap>();
  /** Agents that lost batches but could not be remembered (past `maxGapAgents`). */
  unannounced = 0;

  constructor(
    private readonly maxBytes: number,
    private readonly maxGapAgents = 10_000,
  ) {}

  get size(): number {
    return this.queue.length - this.head;
  }

  get bytes(): number {
    return this.heldBytes;
  }

  get hasGaps(): boolean {
    return this.gaps.size > 0;
  }

  /**
   * Adds a batch in publish order (a failure may be reported after a later batch was queued)
   * and returns the batches given up to stay within the budget, oldest first; the caller
   * rejects them. A batch larger than the whole budget is given up itself.
   */
  push(batch: PendingBatch): PendingBatch[] {
    let at = this.queue.length;
    while (at > this.head && (this.queue[at - 1] as PendingBatch).seq > batch.seq) at--;
    this.queue.splice(at, 0, batch);
    this.hold(batch, 1);
    const dropped: PendingBatch[] = [];
    while (this.heldBytes > this.maxBytes && this.size > 0) {
      const victim = this.biggestAgent();
      const index = this.queue.findIndex((b, i) => i >= this.head && b.agentId === victim);
      const [oldest] = this.queue.splice(index, 1) as [PendingBatch];
      this.hold(oldest, -1);
      this.recordGap(oldest);
      dropped.push(oldest);
    }
    return dropped;
  }

  /** Counts `batch` in (1) or out (-1) of the bytes held, in all and for its agent. */
  private hold(batch: PendingBatch, sign: 1 | -1): void {
    this.heldBytes += sign * batch.bytes;
    const left = (this.agentBytes.get(batch.agentId) ?? 0) + sign * batch.bytes;
    if (left > 0) this.agentBytes.set(batch.agentId, left);
    else this.agentBytes.delete(batch.agentId);
  }

  /** The agent holding the most bytes (a look per agent, only when over budget). */
  private biggestAgent(): string | undefined {
    let biggest: string | undefined;
    let most = -1;
    for (const [agentId, bytes] of this.agentBytes)
      if (bytes > most) {
        biggest = agentId;
        most = bytes;
      }
    return biggest;
  }

  /** The oldest `count` batches, still held. */
  peek(count: number): PendingBatch[] {
    return this.queue.slice(this.head, this.head + count);
  }

  /** Removes and returns the oldest batch. */
  shift(): PendingBatch | undefined {
    if (this.size === 0) return undefined;
    const batch = this.queue[this.head] as PendingBatch;
    this.head++;
    this.hold(batch, -1);
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    return batch;
  }

  /**
   * Takes out `batch` once it was written or given up: the oldest, unless the batches were
   * taken out from under a write in flight (removeAgent). False when it is no longer here.
   */
  remove(batch: PendingBatch): boolean {
    if (this.queue[this.head] === batch) return this.shift() === batch;
    const at = this.queue.indexOf(batch, this.head);
    if (at < 0) return false;
    this.queue.splice(at, 1);
    this.hold(batch, -1);
    return true;
  }

  /**
   * Keeps only the items of the agent's waiting batches that pass `keep` (their traces were
   * deleted); returns the batches left with none, taken out (the caller settles them).
   */
  shrink(agentId: string, keep: (data: string) => boolean): PendingBatch[] {
    const emptied: PendingBatch[] = [];
    for (const batch of this.queue.slice(this.head)) {
      if (batch.agentId !== agentId) continue;
      const data = batch.data.filter(keep);
      if (data.length === batch.data.length) continue;
      if (data.length === 0) {
        if (this.remove(batch)) emptied.push(batch);
        continue;
      }
      this.hold(batch, -1);
      batch.data = data;
      batch.bytes = data.reduce((sum, d) => sum + d.length * 2 + 64, 0);
      this.hold(batch, 1);
    }
    return emptied;
  }

  /** Records that `batch` will never reach its agent's stream. */
  recordGap(batch: Pick<PendingBatch, 'agentId' | 'publishedAt'>): void {
    const gap = this.gaps.get(batch.agentId);
    if (gap) {
      gap.missedBatches++;
      gap.from = Math.min(gap.from, batch.publishedAt);
      gap.to = Math.max(gap.to, batch.publishedAt);
    } else if (this.gaps.size < this.maxGapAgents)
      this.gaps.set(batch.agentId, {
        missedBatches: 1,
        from: batch.publishedAt,
        to: batch.publishedAt,
      });
    else this.unannounced++;
  }

  /** The agents owed a `resync`, handed over (and forgotten here). */
  takeGaps(): Map<string, Gap> {
    const taken = new Map(this.gaps);
    this.gaps.clear();
    return taken;
  }

  /** Gives back a gap whose announcement failed, merged with any recorded since. */
  restoreGap(agentId: string, gap: Gap): void {
    const now = this.gaps.get(agentId);
    if (now) {
      now.missedBatches += gap.missedBatches;
      now.from = Math.min(now.from, gap.from);
      now.to = Math.max(now.to, gap.to);
    } else this.gaps.set(agentId, { ...gap });
  }

  /** Takes out every batch of the agent (deleted) and its gap; returns the batches taken. */
  removeAgent(agentId: string): PendingBatch[] {
    const kept: PendingBatch[] = [];
    const removed: PendingBatch[] = [];
    for (const batch of this.queue.slice(this.head))
      (batch.agentId === agentId ? removed : kept).push(batch);
    this.queue = kept;
    this.head = 0;
    for (const batch of removed) this.hold(batch, -1);
    this.gaps.delete(agentId);
    return removed;
  }

  /** Empties the backlog (shutdown) and returns what it held, oldest first. */
  clear(): PendingBatch[] {
    const all = this.queue.slice(this.head);
    this.queue = [];
    this.head = 0;
    this.heldBytes = 0;
    this.agentBytes.clear();
    this.gaps.clear();
    return all;
  }
}
