import type { LiveBus } from './live-bus.js';

/**
 * Publishes stored batches to their agents' live streams after the commit, off the request's
 * critical path: the store is primary and the stream a view, so the request never waits for
 * the bus, and a batch the bus gives up (a Redis backlog over its budget, a command Redis
 * refuses) is reported to `onError` and never fails the write. A bus that cannot publish at
 * once keeps the batch and publishes it when it can (see redis-bus.ts).
 *
 * Order: `publish` hands the batch to the bus at once, before it returns, and both buses append
 * in the order they are called (see LiveBus.publish). Called right after each commit, batches
 * therefore reach an agent's stream in the order their commits finished, as they did when the
 * request waited for the bus.
 */
export class LivePublisher {
  /** Publishes not yet settled, for a shutdown that lets them finish (up to `timeoutMs`). */
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly bus: LiveBus,
    private readonly timeoutMs: number,
    private readonly onError: (error: unknown) => void,
  ) {}

  /** Appends one batch (the JSON of each item) to the agent's stream; never throws or waits. */
  publish(agentId: string, data: string[]): void {
    if (data.length === 0) return;
    let published: Promise<unknown>;
    try {
      published = this.bus.publish(agentId, data);
    } catch (error) {
      this.onError(error);
      return;
    }
    const settled: Promise<void> = published
      .then(
        () => {},
        (error: unknown) => this.onError(error),
      )
      .finally(() => this.inFlight.delete(settled));
    this.inFlight.add(settled);
  }

  /**
   * Resolves once every publish begun so far has settled, or after `timeoutMs` (a bus waiting
   * for Redis to come back does not hold a shutdown up).
   */
  async drained(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.timeoutMs);
      timer.unref();
    });
    await Promise.race([Promise.all([...this.inFlight]), timeout]);
    clearTimeout(timer);
  }
}
