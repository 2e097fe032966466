/**
 * Ends of instrumented SDK calls waiting to be recorded. An SDK call's result reaches the host
 * right after a socket wait, when this machine's caches are cold and every line run costs two to
 * four times what it costs hot: so the call's end only takes its times and its outcome there
 * (read into the instrumentation's own record, or, for a payload holding the host's objects, a
 * copy of it), and the event is built, checked and buffered on the next turn of the event loop,
 * while the host waits for its next I/O. Whatever reads what
 * was recorded (`flush`, `close`, `stats`, the flush timer, a session's `end`, `fail` and
 * `snapshot`) records what waits first, so nothing the host can observe changes: an event
 * recorded right before `session.end()` is in the trace, counted and sent as before.
 */

/** An ended step, recorded when the queue is settled. */
export interface PendingStep {
  /** Builds and buffers the event; never throws (it reports its own failures). */
  record(): void;
}

/**
 * Steps held at most: past this many (a burst of calls ending in one turn), the queue is
 * recorded at once instead of growing.
 */
export const MAX_PENDING_STEPS = 1_000;

/** The queue of one client. */
export class PendingSteps {
  private steps: PendingStep[] = [];
  private scheduled = false;
  private settling = false;
  private readonly onTurn = (): void => {
    this.scheduled = false;
    this.settle();
  };

  /** Queues `step`, to be recorded on the next turn of the event loop at the latest. */
  add(step: PendingStep): void {
    if (this.steps.length >= MAX_PENDING_STEPS) this.settle();
    this.steps.push(step);
    if (this.scheduled) return;
    this.scheduled = true;
    // Ref'd: it runs in this very turn of the loop (an unref'd one would wait for other I/O).
    setImmediate(this.onTurn);
  }

  /**
   * Records every queued step, in the order they ended. Re-entered from inside (a step filling
   * the buffer triggers a flush, which settles): the outer loop goes on with what is left.
   */
  settle(): void {
    if (this.settling || this.steps.length === 0) return;
    this.settling = true;
    try {
      // Steps queued while settling are recorded by this loop too.
      for (let i = 0; i < this.steps.length; i++) (this.steps[i] as PendingStep).record();
    } finally {
      this.steps = [];
      this.settling = false;
    }
  }

  /** Steps waiting. */
  get size(): number {
    return this.steps.length;
  }
}
