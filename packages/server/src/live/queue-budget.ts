/** One live stream's share of the budget: the bytes it had waiting at its last write. */
export interface QueueAccount {
  /** Bytes waiting in the stream's connection when it last wrote (an upper bound since). */
  bytes: number;
  /** Released: counts for nothing any more. */
  closed: boolean;
}

/**
 * The bytes that all the live streams of this instance may have waiting for their clients
 * (`LIVE_MAX_TOTAL_QUEUE_BYTES`). `LIVE_MAX_QUEUE_BYTES` bounds one stream, but not how many
 * streams there are: a thousand viewers who stopped reading would each hold their limit, and
 * what arrives in their grace period on top of it, at once (3.6 GB and a 19 s p99 for another
 * agent's batches when 1,000 streams of one agent stopped reading while it posted 1 MB batches).
 *
 * Each stream asks before writing. While the instance has room, every write is admitted (one
 * stream's burst may pass its own limit for a moment, as before). Once the total is over the
 * budget, a write is refused to a stream whose backlog with it would exceed its fair share
 * (the budget divided by the open streams): the route ends that stream at once, as it would
 * after the grace period, and its client resumes with `Last-Event-ID`. Streams that keep up
 * hold little and are never refused by this rule, whatever the others do.
 *
 * The count of a stream is its backlog at its last write, set to 0 when its connection drains:
 * an upper bound of what it holds, kept in O(1) per write.
 */
export class QueueBudget {
  private total = 0;
  private open = 0;

  constructor(private readonly maxBytes: number) {}

  /** A new stream's account; `release` it when the stream ends. */
  account(): QueueAccount {
    this.open++;
    return { bytes: 0, closed: false };
  }

  /** Whether `account` may write `size` more bytes now (see the class comment). */
  admits(account: QueueAccount, size: number): boolean {
    if (account.closed || this.total + size <= this.maxBytes) return true;
    return account.bytes + size <= this.maxBytes / Math.max(this.open, 1);
  }

  /** The stream's backlog is now `bytes` (after a write, or 0 on a drain). */
  update(account: QueueAccount, bytes: number): void {
    if (account.closed) return;
    this.total += bytes - account.bytes;
    account.bytes = bytes;
  }

  /** The stream ended: its bytes are freed with its connection. Idempotent. */
  release(account: QueueAccount): void {
    if (account.closed) return;
    this.total -= account.bytes;
    account.bytes = 0;
    account.closed = true;
    this.open--;
  }

  /** Bytes counted as waiting, over all streams (an upper bound). */
  get bytes(): number {
    return this.total;
  }
}
