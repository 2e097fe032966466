import { Redis, type RedisOptions } from 'ioredis';
import {
  LIVE_BUFFER,
  compareMessageIds,
  type BusStatus,
  type LiveBus,
  type LiveListener,
  type LiveMessage,
} from './live-bus.js';

export interface RedisBusOptions {
  url: string;
  /** Prefix of the per-agent stream keys. */
  keyPrefix?: string;
  /** How long one blocking read waits for new entries. */
  blockMs?: number;
  /** Longest a publish may take before it is given up (the ingest request does not wait longer). */
  commandTimeoutMs?: number;
  bufferSize?: number;
  /** Seconds an agent's stream lives after its last message (abandoned agents cost nothing). */
  ttlSeconds?: number;
  onError?: (error: unknown) => void;
}

type Entry = [id: string, fields: string[]];
type XReadReply = [key: string, entries: Entry[]][] | null;

const toMessage = ([id, fields]: Entry): LiveMessage => ({ id, data: fields[1] ?? 'null' });

const sleep = (ms: number) =>
  new Promise<void>((resolve) => {
    setTimeout(resolve, ms).unref();
  });

/**
 * Redis Streams bus: one stream per agent, capped at 1000 entries; the entry id is the SSE id.
 * Replay is a range read. Real-time delivery is one blocking XREAD loop per instance, on a
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

  // Not awaited: a Redis that is down at start-up must not stop the service (the store is
  // primary); the client keeps reconnecting and the streams show a warning meanwhile.
  const commands = new Redis(options.url, {
    ...base,
    commandTimeout: options.commandTimeoutMs ?? 500,
  });
  commands.on('error', onError);

  const listeners = new Map<string, Set<LiveListener>>();
  /** Per watched agent: the id after which the reader delivers. */
  const cursors = new Map<string, string>();
  let status: BusStatus = 'connected';
  let closed = false;
  let reader = newReader();
  let wake: (() => void) | undefined;
  /** Redis client id of the reader connection, to interrupt its blocking read (CLIENT UNBLOCK). */
  let readerId: number | undefined;
  let reading = false;

  function newReader(): Redis {
    // The reader may queue its read while (re)connecting; the watchdog bounds the wait.
    const connection = new Redis(options.url, { ...base, enableOfflineQueue: true });
    connection.on('error', onError);
    connection.on('close', () => (readerId = undefined));
    return connection;
  }

  function setStatus(next: BusStatus): void {
    if (status === next) return;
    status = next;
    for (const set of listeners.values()) for (const listener of set) listener.status(next);
  }
  commands.on('close', () => setStatus('interrupted'));

  async function readOnce(): Promise<void> {
    const agents = [...cursors.keys()];
    const streams = agents.map(key);
    const ids = agents.map((a) => cursors.get(a) as string);
    let timer: NodeJS.Timeout | undefined;
    const watchdog = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('blocking read hung')), blockMs + 3_000);
      timer.unref();
    });
    try {
      readerId ??= (await Promise.race([reader.client('ID'), watchdog])) as number;
      reading = true;
      const reply = (await Promise.race([
        reader.xread('COUNT', 1000, 'BLOCK', blockMs, 'STREAMS', ...streams, ...ids),
        watchdog,
      ])) as XReadReply;
      if (commands.status === 'ready') setStatus('connected');
      for (const [streamKey, entries] of reply ?? []) {
        const agentId = streamKey.slice(prefix.length);
        if (!cursors.has(agentId)) continue;
        for (const [id, fields] of entries) {
          // never backwards: a read started from an older cursor may overlap a newer one
          const cursor = cursors.get(agentId);
          if (cursor === undefined) break;
          if (compareMessageIds(id, cursor) > 0) cursors.set(agentId, id);
          const message = toMessage([id, fields]);
          for (const listener of listeners.get(agentId) ?? []) listener.message(message);
        }
      }
    } catch (error) {
      if (closed) return;
      onError(error);
      setStatus('interrupted');
      if ((error as Error).message === 'blocking read hung') {
        reader.disconnect();
        reader = newReader();
      }
      await sleep(250);
    } finally {
      reading = false;
      clearTimeout(timer);
    }
  }

  const loop = (async () => {
    while (!closed) {
      if (cursors.size === 0) {
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        continue;
      }
      await readOnce();
    }
  })();

  return {
    engine: 'redis',
    async publish(agentId, data) {
      const pipeline = commands.pipeline();
      for (const d of data) pipeline.xadd(key(agentId), 'MAXLEN', String(bufferSize), '*', 'd', d);
      pipeline.expire(key(agentId), options.ttlSeconds ?? 86_400);
      const results = (await pipeline.exec()) ?? [];
      return results.slice(0, data.length).map(([error, id]) => {
        if (error) throw error;
        return id as string;
      });
    },
    async replay(agentId, afterId) {
      if (afterId !== undefined) {
        const found = (await commands.xrange(key(agentId), afterId, afterId)) as Entry[];
        if (found.length > 0) {
          const after = (await commands.xrange(key(agentId), `(${afterId}`, '+')) as Entry[];
          return { messages: after.map(toMessage), resumed: true };
        }
      }
      const all = (await commands.xrange(key(agentId), '-', '+')) as Entry[];
      return { messages: all.map(toMessage), resumed: false };
    },
    async subscribe(agentId, listener) {
      // This subscription starts after the newest entry that exists now (everything up to it
      // is replay's), whatever the shared reader has in flight for the agent.
      let start: string;
      try {
        const newest = (await commands.xrevrange(key(agentId), '+', '-', 'COUNT', 1)) as Entry[];
        start = newest[0]?.[0] ?? '0-0';
      } catch (error) {
        // Redis is down: deliver what is published from now on once it is back.
        onError(error);
        start = `${Date.now()}-0`;
      }
      const own: LiveListener = {
        message: (m) => {
          if (compareMessageIds(m.id, start) > 0) listener.message(m);
        },
        status: (s) => listener.status(s),
      };
      let set = listeners.get(agentId);
      if (!set) {
        set = new Set();
        listeners.set(agentId, set);
      }
      set.add(own);
      if (!cursors.has(agentId)) {
        cursors.set(agentId, start);
        wake?.();
        // A read already blocking does not include this agent: end it now so the next one does.
        if (reading && readerId !== undefined) commands.client('UNBLOCK', readerId).catch(onError);
      }
      if (status === 'interrupted') listener.status('interrupted');
      let active = true;
      return {
        unsubscribe() {
          if (!active) return;
          active = false;
          set.delete(own);
          if (set.size === 0) {
            listeners.delete(agentId);
            cursors.delete(agentId);
          }
        },
      };
    },
    async ready(timeoutMs) {
      if (commands.status === 'ready') return true;
      return new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), timeoutMs);
        timer.unref();
        commands.once('ready', () => {
          clearTimeout(timer);
          resolve(true);
        });
      });
    },
    async close() {
      if (closed) return;
      closed = true;
      wake?.();
      reader.disconnect();
      commands.disconnect();
      await loop;
    },
  };
}
