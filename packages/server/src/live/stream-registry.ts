/**
 * The live streams open on this instance: caps them per user and ends them all at shutdown.
 */
export class StreamRegistry {
  private readonly byUser = new Map<string, number>();
  private readonly enders = new Set<() => void>();

  constructor(private readonly maxPerUser: number) {}

  private closed = false;

  /**
   * Registers a stream and returns its (idempotent) release; `at-cap` when the user has the
   * most streams allowed, `closed` once shutdown has begun.
   */
  open(userId: string, end: () => void): (() => void) | 'at-cap' | 'closed' {
    if (this.closed) return 'closed';
    const count = this.byUser.get(userId) ?? 0;
    if (count >= this.maxPerUser) return 'at-cap';
    this.byUser.set(userId, count + 1);
    this.enders.add(end);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.enders.delete(end);
      const left = (this.byUser.get(userId) ?? 1) - 1;
      if (left === 0) this.byUser.delete(userId);
      else this.byUser.set(userId, left);
    };
  }

  get size(): number {
    return this.enders.size;
  }

  /** Ends every open stream and refuses new ones (shutdown). */
  endAll(): void {
    this.closed = true;
    for (const end of [...this.enders]) end();
  }
}
