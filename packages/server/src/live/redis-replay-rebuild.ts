import type { Redis } from 'ioredis';
import type { LiveScripts } from './redis-scripts.js';
import type { ReplayHistory } from './replay-history.js';

/** What the rebuild needs to know of the bus. */
export interface ReplayRebuildOptions {
  commands: Redis;
  scripts: LiveScripts;
  /** Prefix of the bus's keys. */
  prefix: string;
  /** Where the runs come from (the store); without it nothing is rebuilt. */
  history: ReplayHistory | undefined;
  /** Batches a stream keeps: a full stream lost nothing worth rebuilding. */
  bufferSize: number;
  /** Seconds a stream lives after its last message. */
  ttlSeconds: number;
  onError: (error: unknown) => void;
}

/**
 * Rebuilds an agent's replay from the store when Redis may have lost its batches (it restarted
 * empty). The epoch of Redis's data is when this Redis first held Flightlog's streams: a Redis
 * that restarted empty has none, and whoever notices first sets it to now; an agent's stream
 * whose rebuild marker is of an older epoch may have lost batches stored before it.
 */
export class ReplayRebuild {
  private epoch: Promise<string> | undefined;
  /** Rebuilds in flight on this instance, so concurrent replays of one agent share one. */
  private readonly rebuilding = new Map<string, Promise<void>>();

  constructor(private readonly options: ReplayRebuildOptions) {}

  /** Redis is (back) up: read its epoch now (again at the next replay if this fails). */
  connected(): void {
    this.epoch = this.readEpoch();
    this.epoch.catch(() => {});
  }

  /**
   * Concurrent replays of one agent share one rebuild. A rebuild that fails (the store, or Redis
   * itself) costs the replay only what it would have added: it is tried again at the next one.
   */
  rebuildOnce(agentId: string): Promise<void> {
    let running = this.rebuilding.get(agentId);
    if (!running) {
      running = this.rebuildIfLost(agentId)
        .catch((error: unknown) =>
          this.options.onError(
            new Error(`live replay of ${agentId} not rebuilt from the store`, { cause: error }),
          ),
        )
        .finally(() => this.rebuilding.delete(agentId));
      this.rebuilding.set(agentId, running);
    }
    return running;
  }

  private async readEpoch(): Promise<string> {
    const { commands, prefix } = this.options;
    await commands.set(`${prefix}#epoch`, String(Date.now()), 'NX');
    const value = await commands.get(`${prefix}#epoch`);
    if (value === null) throw new Error('the live bus epoch vanished');
    return value;
  }

  /**
   * Rebuilds the agent's replay when its stream was not rebuilt in this epoch of Redis's data
   * and is not full: at most once per epoch, in front of what the stream holds.
   */
  private async rebuildIfLost(agentId: string): Promise<void> {
    const { commands, scripts, prefix, history, bufferSize, ttlSeconds } = this.options;
    if (history === undefined) return;
    this.epoch ??= this.readEpoch();
    const current = await this.epoch.catch((error: unknown) => {
      this.epoch = undefined;
      throw error;
    });
    const [[, marker] = [], [, length] = []] =
      (await commands
        .pipeline()
        .get(`${prefix}#rebuilt:${agentId}`)
        .xlen(`${prefix}${agentId}`)
        .exec()) ?? [];
    if (marker === current || (length as number) >= bufferSize) return;
    // Runs older than a stream lives would have left Redis with their stream anyway: an agent
    // idle since long before Redis lost its data gets no rebuilt replay, as it would have had none.
    const lostAt = Number(current);
    const runs = await history(agentId, {
      from: new Date(Math.min(lostAt, Date.now()) - ttlSeconds * 1000),
      before: new Date(lostAt),
    });
    await scripts.rebuild(agentId, current, runs);
  }
}
