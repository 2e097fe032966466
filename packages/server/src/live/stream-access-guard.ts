import type { AccessPair, AgentStore } from '../store/agent-store.js';
import type { StreamRegistry } from './stream-registry.js';

/** How a stream came to be ended for lost access (the label of the metric). */
export type RevokedVia = 'admin-api' | 'access-check';

/** What the guard logs through (pino's and Fastify's loggers fit). */
export interface GuardLogger {
  info(details: object, message: string): void;
  warn(details: object, message: string): void;
}

export interface StreamAccessGuardOptions {
  /** Time between two checks (from the end of one to the start of the next). */
  intervalMs: number;
  logger: GuardLogger;
  /** Told how many streams were ended for lost access, and how. */
  onRevoked?: (count: number, via: RevokedVia) => void;
  /** Told of each check the store could not answer (it ended nothing). */
  onCheckFailed?: () => void;
}

/**
 * Pairs per statement: one statement for any realistic instance, while a huge one still sends
 * statements of bounded size (two arrays of at most this many ids).
 */
export const MAX_PAIRS_PER_CHECK = 10_000;

/**
 * Ends the live streams of users who lost access to their agent. Access is granted and removed
 * in the database, by any instance or by the CLI, so every instance checks it there: every
 * `intervalMs` it asks, in one statement for all its streams, which of the distinct
 * (agent, user) pairs of its open streams still have a role, and ends the streams of the pairs
 * that lost it. What this instance's own admin API removes is ended at once.
 *
 * A check the store cannot answer ends nothing: an outage is not a revocation, and ending every
 * stream would send all their clients back at a store that cannot let them in. While the store
 * is down, ingest cannot store (and so publish) anything, so the streams left open receive
 * nothing new; the next check that gets through ends what was revoked meanwhile.
 */
export class StreamAccessGuard {
  private timer: NodeJS.Timeout | undefined;
  private round: Promise<void> | undefined;
  private stopped = false;
  private failures = 0;

  constructor(
    private readonly streams: StreamRegistry,
    private readonly agents: Pick<AgentStore, 'withRole'>,
    private readonly options: StreamAccessGuardOptions,
  ) {}

  start(): void {
    if (this.stopped || this.timer) return;
    this.schedule();
  }

  /** Stops checking; resolves once a check in flight is done. Idempotent. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.round;
  }

  /** A member was removed here: their streams on this instance end now. */
  memberRemoved(agentId: string, userId: string): void {
    this.report(this.streams.revoke(agentId, userId), 'admin-api');
  }

  /** An agent was deleted here: every stream of it on this instance ends now. */
  agentDeleted(agentId: string): void {
    this.report(this.streams.revoke(agentId, undefined), 'admin-api');
  }

  /** One check of every open stream; never rejects (a failure is logged and ends nothing). */
  async check(): Promise<void> {
    // Streams registered from here on had their role checked after this snapshot was taken.
    const mark = this.streams.mark();
    const pairs = this.streams.pairs();
    if (pairs.length === 0) return;
    let kept: AccessPair[];
    try {
      kept = [];
      for (let i = 0; i < pairs.length; i += MAX_PAIRS_PER_CHECK)
        kept.push(...(await this.agents.withRole(pairs.slice(i, i + MAX_PAIRS_PER_CHECK))));
    } catch (error) {
      this.failures++;
      this.options.onCheckFailed?.();
      if (this.failures === 1 || this.failures % 30 === 0)
        this.options.logger.warn(
          { err: error, failures: this.failures },
          'live stream access check failed; streams stay open until a check gets through',
        );
      return;
    }
    if (this.failures > 0) {
      this.options.logger.info({ failures: this.failures }, 'live stream access check recovered');
      this.failures = 0;
    }
    const still = new Set(kept.map(pairKey));
    let ended = 0;
    for (const pair of pairs)
      if (!still.has(pairKey(pair))) ended += this.streams.revoke(pair.agentId, pair.userId, mark);
    this.report(ended, 'access-check');
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.round = this.check().finally(() => {
        this.round = undefined;
        if (!this.stopped) this.schedule();
      });
    }, this.options.intervalMs);
    this.timer.unref();
  }

  private report(count: number, via: RevokedVia): void {
    if (count > 0) this.options.onRevoked?.(count, via);
  }
}

const pairKey = (pair: AccessPair) => JSON.stringify([pair.agentId, pair.userId]);
