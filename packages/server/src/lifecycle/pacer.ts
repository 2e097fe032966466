/**
 * Keeps the sweeper to a share of the store's time: after a statement that took `d` ms it waits
 * `d × (100 / dutyPercent − 1)` ms before the next, so at 10 % it works 1 ms in 10. On PGlite
 * every statement, ingest's included, runs one at a time on the event loop: a sweeper that sent
 * its next statement as soon as the last one ended would take about half the engine (it did: the
 * ingest rate fell to 56 % during a sweep of 200,000 events); paced, ingest keeps the rest.
 * PostgreSQL runs statements side by side, and a larger share costs ingest little there.
 * A wait ends at once when the sweeper stops.
 */
export class Pacer {
  private readonly stopped = new AbortController();
  /** Time spent in the statements paced so far (ms): the sweeper's work, its pauses left out. */
  workMs = 0;

  constructor(private readonly dutyPercent: number) {}

  /** Waits the time that keeps the last statement (`statementMs`) within the share. */
  async between(statementMs: number): Promise<void> {
    this.workMs += statementMs;
    const waitMs = statementMs * (100 / this.dutyPercent - 1);
    if (this.stopped.signal.aborted) return;
    await new Promise<void>((resolve) => {
      if (waitMs < 1) {
        // always a turn of the event loop, so that requests waiting for it run
        setImmediate(resolve);
        return;
      }
      const timer = setTimeout(done, Math.min(waitMs, 10_000));
      timer.unref();
      const signal = this.stopped.signal;
      function done() {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done);
    });
  }

  /** Runs `work` (one statement), then waits its share. */
  async step<T>(work: () => Promise<T>): Promise<T> {
    const started = performance.now();
    const result = await work();
    await this.between(performance.now() - started);
    return result;
  }

  /** Ends the wait in progress and every later one. */
  stop(): void {
    this.stopped.abort();
  }
}
