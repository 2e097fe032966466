import type { AccessPair, AgentStore } from '../store/agent-store.js';
import type { LiveBus, Subscription } from './live-bus.js';
import type { StreamRegistry } from './stream-registry.js';

/**
 * How a stream came to be ended for lost access (the label of the metric): this instance's
 * admin API, another's (told through the shared bus), or the periodic check.
 */
export type RevokedVia = 'admin-api' | 'broadcast' | 'access-check';

/**
 * The bus channel on which instances tell each other of removed access: an agent id no agent
 * can have (`#` is not allowed in ids), so no user has a role on it and no stream can read it.
 */
export const ACCESS_CHANNEL = '#access-revoked';

/** One message of ACCESS_CHANNEL: a member removed (with `userId`) or an agent deleted. */
export interface AccessRevocation {
  agentId: string;
  userId?: string;
}

function parseRevocation(data: string): AccessRevocation | undefined {
  try {
    const value = JSON.parse(data) as unknown;
    if (typeof value !== 'object' || value === null) return undefined;
    const { agentId, userId } = value as Record<string, unknown>;
    if (typeof agentId !== 'string') return undefined;
    if (userId !== undefined && typeof userId !== 'string') return undefined;
    return userId === undefined ? { agentId } : { agentId, userId };
  } catch {
    return undefined;
  }
}

/** Tells every instance on `bus` (their guards listen) that access was removed. */
export async function announceRevocation(
  bus: Pick<LiveBus, 'publish'>,
  revocation: AccessRevocation,
): Promise<void> {
  await bus.publish(ACCESS_CHANNEL, [JSON.stringify(revocation)]);
}

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
  /**
   * The live bus: removals made through this instance's admin API are announced on it, and
   * those announced by other instances (or the CLI) end this instance's streams at once. With
   * the in-process bus only this instance hears them; the periodic check is what bounds the
   * rest.
   */
  bus?: Pick<LiveBus, 'publish' | 'subscribe'>;
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
  private listening: Promise<Subscription | undefined> | undefined;
  private failures = 0;

  constructor(
    private readonly streams: StreamRegistry,
    private readonly agents: Pick<AgentStore, 'withRole'>,
    private readonly options: StreamAccessGuardOptions,
  ) {}

  start(): void {
    if (this.stopped || this.timer) return;
    this.schedule();
    const bus = this.options.bus;
    if (bus)
      this.listening = bus
        .subscribe(ACCESS_CHANNEL, {
          message: (message) => {
            const revocation = parseRevocation(message.data);
            if (revocation)
              this.report(this.streams.revoke(revocation.agentId, revocation.userId), 'broadcast');
          },
          // an outage only delays announcements: the periodic check does not depend on the bus
          status: () => {},
        })
        .catch((error: unknown) => {
          this.options.logger.warn({ err: error }, 'access announcements not received');
          return undefined;
        });
  }

  /** Stops checking; resolves once a check in flight is done. Idempotent. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    (await this.listening)?.unsubscribe();
    await this.round;
  }

  /** A member was removed here: their streams end now, here and (through the bus) elsewhere. */
  memberRemoved(agentId: string, userId: string): void {
    this.report(this.streams.revoke(agentId, userId), 'admin-api');
    this.announce({ agentId, userId });
  }

  /** An agent was deleted here: every stream of it ends now, here and elsewhere. */
  agentDeleted(agentId: string): void {
    this.report(this.streams.revoke(agentId, undefined), 'admin-api');
    this.announce({ agentId });
  }

  private announce(revocation: AccessRevocation): void {
    const bus = this.options.bus;
    if (!bus) return;
    announceRevocation(bus, revocation).catch((error: unknown) =>
      this.options.logger.warn(
        { err: error },
        'access removal not announced; other instances end those streams at their next check',
      ),
    );
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
