import type { LiveBus } from './live-bus.js';

/**
 * Publishes stored batches to their agents' live streams after the commit, off the request's
 * critical path: the store is primary and the stream a view, so the request never waits for
 * the bus, and a bus that fails or stalls is reported to `onError` (at the latest after
 * `timeoutMs`) and never fails the write.
 *
 * Order: `publish` hands the batch to the bus at once, before it returns, and both buses append
 * in the order they are called (see LiveBus.publish). Called right after each commit, batches
 * therefore reach an agent's stream in the order their commits finished, as they did when the
 * request waited for the bus.
 */
export class LivePublisher {
  /** Publishes not yet settled (or timed out), for a shutdown that lets them finish. */
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
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        this.onError(new Error(`live publish took longer than ${this.timeoutMs} ms`));
        resolve();
      }, this.timeoutMs);
      timer.unref();
    });
    const settled: Promise<void> = Promise.race([published.then(() => {}), timeout])
      .catch((error: unknown) => this.onError(error))
      .finally(() => {
        clearTimeout(timer);
        this.inFlight.delete(settled);
      });
    this.inFlight.add(settled);
  }

  /** Resolves once every publish begun so far has settled or timed out. */
  async drained(): Promise<void> {
    await Promise.all([...this.inFlight]);
  }
}
