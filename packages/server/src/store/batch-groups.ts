/** How batches are gathered into groups (see BatchGroups). */
export interface GroupLimits {
  /** The most batches in one group's statement; 1 writes every batch alone. */
  maxBatches: number;
  /** The most bytes of JSON in one group's statement (a batch larger than this goes alone). */
  maxBytes: number;
  /** Groups written at once; batches arriving meanwhile wait and form the next groups. */
  concurrency: number;
  /**
   * Writers start after the event loop's current turn, so the batches whose requests were read in
   * that turn form one group even when the store is idle. For an engine that runs its statement
   * on the event loop (PGlite): one statement runs to its end before the next request is read, so
   * no batch would ever wait to be grouped, and each would pay a commit (an fsync) of its own.
   */
  gatherTurn?: boolean;
}

/** A batch waiting for its group: what grouping needs to know of it. */
export interface GroupMember {
  /** Trace ids it writes: a group holds each at most once (one statement upserts a row once). */
  readonly traceIds: readonly string[];
  /** Agent and batch id: a group holds each at most once (a batch sent twice at once). */
  readonly batchKey: string;
  readonly bytes: number;
}

/**
 * Group commit without a timer: a batch that arrives while fewer than `concurrency` groups are
 * being written is written at once, alone (no batch ever waits for a window to fill); batches
 * that arrive while the writers are busy wait, and each writer that finishes takes the waiting
 * ones as its next group, up to the limits. Under load, then, many batches share one statement
 * and one commit; at low load nothing changes. A waiting batch whose trace or batch id is in the
 * group already is left for a later group, keeping its place in line.
 */
export class BatchGroups<Member extends GroupMember> {
  private readonly waiting: Member[] = [];
  private writing = 0;
  private pumpScheduled = false;

  constructor(
    private readonly limits: GroupLimits,
    /** Writes one group; settles every member's own outcome itself, and never rejects. */
    private readonly write: (group: Member[]) => Promise<void>,
  ) {}

  /** Batches waiting for a writer (not counting those being written). */
  get waitingCount(): number {
    return this.waiting.length;
  }

  add(member: Member): void {
    this.waiting.push(member);
    if (!this.limits.gatherTurn) return this.pump();
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    setImmediate(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  private pump(): void {
    while (this.writing < this.limits.concurrency && this.waiting.length > 0) {
      const group = this.takeGroup();
      this.writing += 1;
      const done = () => {
        this.writing -= 1;
        this.pump();
      };
      this.write(group).then(done, done);
    }
  }

  private takeGroup(): Member[] {
    const group: Member[] = [];
    const traces = new Set<string>();
    const batches = new Set<string>();
    let bytes = 0;
    let index = 0;
    while (index < this.waiting.length && group.length < this.limits.maxBatches) {
      const member = this.waiting[index] as Member;
      const fits =
        group.length === 0 ||
        (bytes + member.bytes <= this.limits.maxBytes &&
          !batches.has(member.batchKey) &&
          member.traceIds.every((id) => !traces.has(id)));
      if (!fits) {
        // past the byte limit nothing more is taken; a collision only skips this one
        if (bytes + member.bytes > this.limits.maxBytes) break;
        index += 1;
        continue;
      }
      this.waiting.splice(index, 1);
      group.push(member);
      bytes += member.bytes;
      batches.add(member.batchKey);
      for (const id of member.traceIds) traces.add(id);
    }
    return group;
  }
}
