/**
 * Work that takes turns per key within this process: `run(keys, work)` starts `work` once every
 * earlier holder of any of its keys is done. Keys are taken one at a time in sorted order, so two
 * holders of overlapping key sets cannot wait for each other.
 *
 * OTLP exports of one trace take turns here before they take a database connection: the store's
 * per-trace lock (TraceStore.withTraceLocks) orders them across instances, but each export
 * waiting for it would hold a pooled connection meanwhile, and twenty concurrent exports of one
 * trace could hold the whole pool while every other agent's request waited for a connection.
 * Here, at most one export per trace and instance is in the database at a time.
 */
export class KeyedTurns {
  /** Per key: the end of the line (resolves when its last holder is done). */
  private readonly tails = new Map<string, Promise<void>>();

  async run<T>(keys: readonly string[], work: () => Promise<T>): Promise<T> {
    const releases: (() => void)[] = [];
    try {
      for (const key of [...new Set(keys)].sort()) {
        const before = this.tails.get(key);
        let release!: () => void;
        const mine = new Promise<void>((resolve) => (release = resolve));
        const tail = before ? before.then(() => mine) : mine;
        this.tails.set(key, tail);
        releases.push(() => {
          release();
          // the last holder in line clears its key, so the map holds only keys in use
          if (this.tails.get(key) === tail) this.tails.delete(key);
        });
        if (before) await before;
      }
      return await work();
    } finally {
      for (const release of releases) release();
    }
  }

  /** Keys with a holder or a line (for tests: nothing is left behind). */
  get size(): number {
    return this.tails.size;
  }
}
