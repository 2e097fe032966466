import type { AccessPair } from '../store/agent-store.js';

/** One open live stream, as its route registers it. */
export interface RegisteredStream {
  readonly userId: string;
  readonly agentId: string;
  /** Writes raw SSE text to the client, if the stream is still open. */
  send(chunk: string): void;
  /** Ends the stream and releases its registration; idempotent. */
  end(): void;
}

/**
 * Sent once before a stream is ended because its user lost access to the agent (membership
 * removed, agent deleted), so a dashboard can tell that from a network drop. No `id:`, so it
 * never moves a client's Last-Event-ID.
 */
export const ACCESS_REVOKED_EVENT = `event: access-revoked\ndata: ${JSON.stringify({
  message: 'Your access to this agent was removed.',
})}\n\n`;

/**
 * The live streams open on this instance: caps them per user, ends them all at shutdown, and
 * ends those of a user (or of every user of an agent) who lost access. Streams are indexed by
 * agent, then user, so the distinct (agent, user) pairs are known without walking every stream.
 */
export class StreamRegistry {
  private readonly perUser = new Map<string, number>();
  /** agent → user → stream → its registration number (see `mark`). */
  private readonly byAgent = new Map<string, Map<string, Map<RegisteredStream, number>>>();
  private count = 0;
  private registrations = 0;
  private closed = false;

  constructor(private readonly maxPerUser: number) {}

  /**
   * Registers a stream and returns its (idempotent) release; `at-cap` when the user has the
   * most streams allowed, `closed` once shutdown has begun.
   */
  open(stream: RegisteredStream): (() => void) | 'at-cap' | 'closed' {
    if (this.closed) return 'closed';
    const { userId, agentId } = stream;
    const perUser = this.perUser.get(userId) ?? 0;
    if (perUser >= this.maxPerUser) return 'at-cap';
    this.perUser.set(userId, perUser + 1);
    let users = this.byAgent.get(agentId);
    if (!users) this.byAgent.set(agentId, (users = new Map()));
    let streams = users.get(userId);
    if (!streams) users.set(userId, (streams = new Map()));
    streams.set(stream, ++this.registrations);
    this.count++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.count--;
      streams.delete(stream);
      if (streams.size === 0) users.delete(userId);
      if (users.size === 0) this.byAgent.delete(agentId);
      const left = (this.perUser.get(userId) ?? 1) - 1;
      if (left === 0) this.perUser.delete(userId);
      else this.perUser.set(userId, left);
    };
  }

  get size(): number {
    return this.count;
  }

  /**
   * The registration number so far: `revoke(…, mark)` spares streams registered after it
   * (whose access was checked after whatever the caller looked at).
   */
  mark(): number {
    return this.registrations;
  }

  /** The distinct (agent, user) pairs of the open streams: one per pair, however many streams. */
  pairs(): AccessPair[] {
    const pairs: AccessPair[] = [];
    for (const [agentId, users] of this.byAgent)
      for (const userId of users.keys()) pairs.push({ agentId, userId });
    return pairs;
  }

  /**
   * Tells the streams of `userId` on `agentId` (of every user of the agent when `userId` is
   * undefined) that access was removed, and ends them; only those registered up to `mark`
   * when it is given. Returns how many were ended.
   */
  revoke(agentId: string, userId: string | undefined, mark = Number.POSITIVE_INFINITY): number {
    const users = this.byAgent.get(agentId);
    if (!users) return 0;
    const lists = userId === undefined ? [...users.values()] : [users.get(userId)];
    const ending: RegisteredStream[] = [];
    for (const streams of lists)
      for (const [stream, registration] of streams ?? [])
        if (registration <= mark) ending.push(stream);
    for (const stream of ending) {
      stream.send(ACCESS_REVOKED_EVENT);
      stream.end();
    }
    return ending.length;
  }

  /** Ends every open stream and refuses new ones (shutdown). */
  endAll(): void {
    this.closed = true;
    const all: RegisteredStream[] = [];
    for (const users of this.byAgent.values())
      for (const streams of users.values()) all.push(...streams.keys());
    for (const stream of all) stream.end();
  }
}
