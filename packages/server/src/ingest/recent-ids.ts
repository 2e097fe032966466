/**
 * Ids seen lately in this process, at most `capacity` of them, the oldest forgotten first. Only
 * a hint: forgetting an id, or never having seen it, costs time and never correctness.
 */
export class RecentIds {
  /** Insertion order is age order: a Set's first id is its oldest. */
  private readonly ids = new Set<string>();

  constructor(private readonly capacity: number) {}

  /** Whether any of `ids` was added lately. */
  hasAny(ids: readonly string[]): boolean {
    return ids.some((id) => this.ids.has(id));
  }

  add(ids: readonly string[]): void {
    for (const id of ids) {
      // seen again: now the newest
      this.ids.delete(id);
      this.ids.add(id);
    }
    for (const oldest of this.ids) {
      if (this.ids.size <= this.capacity) break;
      this.ids.delete(oldest);
    }
  }

  get size(): number {
    return this.ids.size;
  }
}
