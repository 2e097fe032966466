import { Redis, type RedisOptions } from 'ioredis';
import {
  LIVE_AGENT_BUFFER_MAX_BYTES,
  LIVE_BUFFER,
  LIVE_BUFFER_MAX_BYTES,
  REPLAY_PAGE_BYTES,
  type LiveBus,
} from './live-bus.js';
import type { ReplayHistory } from './replay-history.js';
import { RealTimeReader } from './redis-real-time-reader.js';
import { RedisPublisher } from './redis-publisher.js';
import { ReplayRebuild } from './redis-replay-rebuild.js';
import { defineLiveScripts, type Entry } from './redis-scripts.js';
import { itemTraceId } from './item-trace-id.js';
import { REPLAY_PAGE, replayFrom } from './redis-entries.js';

export interface RedisBusOptions {
  url: string;
  /** Prefix of the per-agent stream keys. */
  keyPrefix?: string;
  /** How long one blocking read waits for new entries. */
  blockMs?: number;
  /**
   * Longest a command may take; a publish that takes longer waits in the backlog and is
   * retried (the ingest request never waits for it).
   */
  commandTimeoutMs?: number;
  /**
   * Bytes of batches kept while Redis is unreachable, delivered in order once it is back; past
   * it the oldest go first and their agents' streams get a `resync` message. Default 64 MiB.
   */
  backlogMaxBytes?: number;
  /** Where an agent's replay is rebuilt from when Redis lost its stream (restarted empty). */
  history?: ReplayHistory;
  bufferSize?: number;
  /** Bytes of batch JSON kept per agent (its newest batch whatever its size). Default 64 MiB. */
  agentMaxBytes?: number;
  /**
   * Bytes of batches kept across all agents; past it the agent holding the most gives up its
   * oldest first. Default 256 MiB.
   */
  totalMaxBytes?: number;
  /** Seconds an agent's stream lives after its last message (abandoned agents cost nothing). */
  ttlSeconds?: number;
  /** The bus's connections show in CLIENT LIST as `<name>-commands` and `<name>-reader`. */
  connectionName?: string;
  onError?: (error: unknown) => void;
}

/**
 * Redis Streams bus: one stream per agent, one entry per batch, capped at 1000 entries; the
 * entry id is the SSE id of the batch's first item (`<entry id>-<k>` for item k). Replay is a
 * range read. Real-time delivery is one blocking XREAD loop per instance, on a
 * connection of its own, over the agents that have subscribers here. Blocking reads can hang
 * across reconnects in Redis clients, so each read has a watchdog that replaces the connection.
 */
export function createRedisBus(options: RedisBusOptions): LiveBus {
  const prefix = options.keyPrefix ?? 'flightlog:live:';
  const blockMs = options.blockMs ?? 1_000;
  const bufferSize = options.bufferSize ?? LIVE_BUFFER;
  const onError = options.onError ?? (() => {});
  const base: RedisOptions = {
    // Commands fail fast while disconnected instead of queueing behind a dead connection.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2_000,
    retryStrategy: (attempt) => Math.min(100 * attempt, 1_000),
  };
  const key = (agentId: string) => `${prefix}${agentId}`;
  const connectionName = options.connectionName ?? 'flightlog-live';

  // Not awaited: a Redis that is down at start-up must not stop the service (the store is
  // primary); the client keeps reconnecting and the streams show a warning meanwhile.
  const commands = new Redis(options.url, {
    ...base,
    commandTimeout: options.commandTimeoutMs ?? 500,
    connectionName: `${connectionName}-commands`,
  });
  commands.on('error', onError);
  const bulk = new Redis(options.url, {
    ...base,
    // megabytes take longer to send than one small write
    commandTimeout: (options.commandTimeoutMs ?? 500) * 4,
    connectionName: `${connectionName}-bulk`,
  });
  bulk.on('error', onError);
  const ttlSeconds = options.ttlSeconds ?? 86_400;
  const bounds = {
    maxBatches: bufferSize,
    agentMaxBytes: options.agentMaxBytes ?? LIVE_AGENT_BUFFER_MAX_BYTES,
    totalMaxBytes: options.totalMaxBytes ?? LIVE_BUFFER_MAX_BYTES,
    ttlSeconds,
  };
  const scripts = defineLiveScripts(commands, prefix, bounds);
  const publisher = new RedisPublisher(
    { connection: commands, scripts },
    { connection: bulk, scripts: defineLiveScripts(bulk, prefix, bounds) },
    options.backlogMaxBytes ?? 64 * 1024 * 1024,
    onError,
  );
  /** The tokens of an agent's newest writes (see redis-scripts.ts WRITE). */
  const tokensKey = (agentId: string) => `${prefix}#tokens:${agentId}`;
  const rebuild = new ReplayRebuild({
    commands,
    scripts,
    prefix,
    history: options.history,
    bufferSize,
    ttlSeconds,
    onError,
  });

  const reader = new RealTimeReader({
    url: options.url,
    base,
    connectionName,
    prefix,
    bounds,
    blockMs,
    commands,
    onError,
  });
  let closed = false;

  commands.on('close', () => reader.setStatus('interrupted'));
  // Also with no stream open (no reads to notice it), so the next stream is not told of an
  // outage that is over.
  commands.on('ready', () => {
    reader.setStatus('connected');
    rebuild.connected();
    publisher.flushBacklog();
  });

  return {
    engine: 'redis',
    publish: (agentId, data) => publisher.publish(agentId, data),
    // A replay that fails is its stream's failure, not the bus's: the stream warns its client
    // and asks again; other agents' streams are not told.
    async replay(agentId, afterId, maxBatches) {
      await rebuild.rebuildOnce(agentId);
      if (maxBatches === undefined)
        // all of it: what is added meanwhile reaches subscribers live
        return {
          ...(await replayFrom(scripts, agentId, afterId, bufferSize, false)),
          complete: true,
        };
      return await replayFrom(scripts, agentId, afterId, Math.min(maxBatches, bufferSize), true);
    },
    async subscribe(agentId, listener) {
      // This subscription starts after the newest entry that exists now (everything up to it
      // is replay's), whatever the shared reader has in flight for the agent.
      let start: string;
      try {
        // from the token stream: its newest entry has the id of the newest batch, without it
        const newest = (await commands.xrevrange(
          tokensKey(agentId),
          '+',
          '-',
          'COUNT',
          1,
        )) as Entry[];
        start = newest[0]?.[0] ?? '0-0';
      } catch (error) {
        // Redis is down: deliver what is published from now on once it is back.
        onError(error);
        start = `${Date.now()}-0`;
      }
      return reader.watch(agentId, start, listener);
    },
    async forget(agentId) {
      publisher.forget(agentId);
      await scripts.forget(agentId);
    },
    async forgetTraces(agentId, traceIds, hint) {
      const gone = new Set(traceIds);
      const deleted = (data: string) => gone.has(itemTraceId(data) ?? '');
      // batches still waiting for Redis lose those items before they are written
      publisher.shrink(agentId, (data) => !deleted(data));
      if (hint) {
        // an entry's id is the time it was written: every entry newer than the traces' last
        // batch means none of theirs is left (rebuilt entries have older ids: they are looked at)
        const [first] = (await commands.xrange(key(agentId), '-', '+', 'COUNT', 1)) as Entry[];
        if (!first || Number(first[0].split('-')[0]) > hint.lastBatchBefore) return;
      }
      // then the stream: read page by page (the items' trace ids are read here, not in Lua),
      // and rewritten once, atomically, only when it holds any of them
      const drops: string[] = [];
      let from = '-';
      for (;;) {
        const page = await scripts.read(agentId, from, REPLAY_PAGE, REPLAY_PAGE_BYTES);
        for (const [id, fields] of page.entries) {
          const items: number[] = [];
          let item = 0;
          for (let i = 0; i + 1 < fields.length; i += 2) {
            const field = fields[i];
            if (field === 'd' && deleted(fields[i + 1] as string)) items.push(item);
            if (field === 'd' || field === 'r' || field === 'x') item++;
          }
          if (items.length > 0) drops.push(id, `,${items.join(',')},`);
        }
        const last = page.entries.at(-1);
        if (page.complete || last === undefined) break;
        from = `(${last[0]}`;
      }
      if (drops.length > 0) await scripts.forgetItems(agentId, drops);
    },
    backlog() {
      return publisher.waiting();
    },
    async ready(timeoutMs) {
      if (commands.status === 'ready') return true;
      return new Promise<boolean>((resolve) => {
        const onReady = () => {
          clearTimeout(timer);
          resolve(true);
        };
        const timer = setTimeout(() => {
          commands.off('ready', onReady);
          resolve(false);
        }, timeoutMs);
        timer.unref();
        commands.once('ready', onReady);
      });
    },
    async close() {
      if (closed) return;
      closed = true;
      publisher.close();
      const stopped = reader.stop();
      commands.disconnect();
      bulk.disconnect();
      await stopped;
    },
  };
}
