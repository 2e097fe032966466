import type { ServerResponse } from 'node:http';
import type { LiveMessage } from './live-bus.js';
import type { LiveSink } from './live-stream.js';
import type { QueueAccount, QueueBudget } from './queue-budget.js';

/** How one Server-Sent Events stream is paced and bounded. */
export interface SseStreamOptions {
  /** Comment line sent this often, so that proxies keep an idle stream open. */
  heartbeatMs: number;
  /** The reconnection delay the client is told (`retry:`). */
  retryMs: number;
  /** The most a client may leave unread before it is cut (after a grace period). */
  maxQueueBytes: number;
  /** What all the streams of this instance may leave unread, together. */
  queueBudget: QueueBudget;
  /** Longest wait for a drain before the client is given up. */
  stallTimeoutMs: number;
  /** Where a stream says why it cut its client (with the details of the stream it serves). */
  warn(details: object, message: string): void;
}

const WARNING = `event: warning\ndata: ${JSON.stringify({ message: 'live stream interrupted' })}\n\n`;
/** How long a stream's backlog may stay over maxQueueBytes before the client is cut. */
const SLOW_CLIENT_GRACE_MS = 500;
/** setTimeout's largest delay; a token expiring later is re-checked then. */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * One client's Server-Sent Events connection, as a live stream's sink: messages written as SSE,
 * paced by the connection (backpressure, a stall deadline), bounded (per client and, across the
 * instance, by the queue budget), kept open by heartbeats and ended when the client's sign-in
 * expires. Ending is idempotent and frees everything: timers, its share of the budget, and what
 * the owner registered with `onEnd`.
 */
export class SseStream implements LiveSink {
  private isEnded = false;
  private account: QueueAccount | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private expiry: NodeJS.Timeout | undefined;
  private grace: NodeJS.Timeout | undefined;
  private readonly cleanups: (() => void)[] = [];

  constructor(
    private readonly res: ServerResponse,
    private readonly options: SseStreamOptions,
  ) {}

  /** Runs `cleanup` when the stream ends (at once when it has). */
  onEnd(cleanup: () => void): void {
    if (this.isEnded) cleanup();
    else this.cleanups.push(cleanup);
  }

  /**
   * Sends the headers, the retry hint and then heartbeats; ends at `expiresAt` (epoch ms). False,
   * with the stream ended, when the client is gone already or the stream was ended before.
   */
  start(headers: Record<string, string>, expiresAt: number | undefined, clientGone: boolean) {
    if (this.isEnded) return false;
    const res = this.res;
    this.account = this.options.queueBudget.account();
    res.on('close', () => this.end());
    // A client gone while its access was checked has had its 'close' already: it would never
    // end this stream, which would then hold its place until the sign-in expires.
    if (res.destroyed || clientGone) {
      this.end();
      return false;
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      ...headers,
    });
    res.on('drain', () => {
      clearTimeout(this.grace);
      this.grace = undefined;
      if (this.account) this.options.queueBudget.update(this.account, 0);
    });
    this.write(`: connected\nretry: ${this.options.retryMs}\n\n`);
    this.heartbeat = setInterval(() => this.write(': heartbeat\n\n'), this.options.heartbeatMs);
    this.heartbeat.unref();
    const until = expiresAt ?? Date.now() + MAX_TIMER_MS;
    this.expiry = setTimeout(
      () => this.end(),
      Math.min(Math.max(until - Date.now(), 0), MAX_TIMER_MS),
    );
    this.expiry.unref();
    return true;
  }

  /** Ends the stream (idempotent): the connection closes, the client may reconnect. */
  end(): void {
    if (this.isEnded) return;
    this.isEnded = true;
    if (this.account) this.options.queueBudget.release(this.account);
    clearInterval(this.heartbeat);
    clearTimeout(this.expiry);
    clearTimeout(this.grace);
    for (const cleanup of this.cleanups.splice(0)) cleanup();
    if (!this.res.writableEnded) this.res.end();
  }

  /** A chunk from outside the stream (the registry's access-revoked notice), once it started. */
  send(chunk: string): void {
    if (!this.isEnded && this.res.headersSent) this.res.write(chunk);
  }

  message(m: LiveMessage): boolean {
    return (
      this.isEnded || this.write(`id: ${m.id}\nevent: ${m.event ?? 'trace'}\ndata: ${m.data}\n\n`)
    );
  }

  warning(): void {
    this.write(WARNING);
  }

  overflow(): void {
    this.cut('live stream client too slow for its replay; disconnecting');
  }

  ended(): boolean {
    return this.isEnded;
  }

  /**
   * Resolves when the connection takes more, or closes. The replay waits for it, so a client
   * that stops reading never passes maxQueueBytes: it is cut when no drain comes in time (it may
   * resume with Last-Event-ID).
   */
  drained(): Promise<void> {
    return new Promise<void>((resolve) => {
      if (this.isEnded) return resolve();
      const res = this.res;
      const done = () => {
        clearTimeout(stall);
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      const stall = setTimeout(() => {
        done();
        if (!this.isEnded) this.cut('live stream client stalled; disconnecting');
      }, this.options.stallTimeoutMs);
      stall.unref();
      res.on('drain', done);
      res.on('close', done);
    });
  }

  /**
   * Writes a chunk; false when the connection wants a pause. A client that cannot keep up with
   * real-time messages is cut (it may resume) rather than letting its unsent messages grow this
   * process's memory; a burst may pass the limit for a moment, so only a backlog still over it
   * after the grace period is cut.
   */
  private write(chunk: string): boolean {
    if (this.isEnded || this.account === undefined) return true;
    const budget = this.options.queueBudget;
    // Over the instance's budget, a client holding more than its share is cut at once, not
    // after the grace period: what it would buffer meanwhile is what the budget bounds.
    // (String length: bytes for the ASCII of most JSON, and no pass over the chunk.)
    if (!budget.admits(this.account, chunk.length)) {
      this.cut('live streams over LIVE_MAX_TOTAL_QUEUE_BYTES; disconnecting a slow client', {
        waitingBytes: this.res.writableLength,
      });
      return true;
    }
    const more = this.res.write(chunk);
    budget.update(this.account, this.res.writableLength);
    if (this.res.writableLength > this.options.maxQueueBytes && this.grace === undefined) {
      this.grace = setTimeout(() => this.cutIfStillBehind(), SLOW_CLIENT_GRACE_MS);
      this.grace.unref();
    }
    return more;
  }

  private cutIfStillBehind(): void {
    this.grace = undefined;
    if (this.isEnded || this.res.writableLength <= this.options.maxQueueBytes) return;
    this.cut('live stream client too slow; disconnecting');
  }

  private cut(message: string, details: object = {}): void {
    this.options.warn(details, message);
    this.end();
    this.res.destroy();
  }
}
