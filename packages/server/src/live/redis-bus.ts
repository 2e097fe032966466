import { Redis, type RedisOptions } from 'ioredis';
import {
  LIVE_BUFFER,
  compareMessageIds,
  isMessageId,
  messageId,
  splitMessageId,
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
  /** The bus's connections show in CLIENT LIST as `<name>-commands` and `<name>-reader`. */
  connectionName?: string;
  onError?: (error: unknown) => void;
}

type Entry = [id: string, fields: string[]];
type XReadReply = [key: string, entries: Entry[]][] | null;

/** Entries per XRANGE of a replay. */
const REPLAY_PAGE = 100;

/** An entry is one batch, its items stored as repeated `d` fields, in order. */
function messagesOf([id, fields]: Entry): LiveMessage[] {
  const messages: LiveMessage[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2)
    if (fields[i] === 'd')
      messages.push({ id: messageId(id, messages.length), data: fields[i + 1] as string });
  return messages;
}

/** A listener and the entry after which it receives (what came before is replay's). */
interface Watcher {
  start: string;
  listener: LiveListener;
}

const sleep = (ms: number) =>
  new Promise<void>((resolve) => {
    setTimeout(resolve, ms).unref();
  });

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

  const listeners = new Map<string, Set<Watcher>>();
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
    const connection = new Redis(options.url, {
      ...base,
      enableOfflineQueue: true,
      connectionName: `${connectionName}-reader`,
    });
    connection.on('error', onError);
    connection.on('close', () => (readerId = undefined));
    return connection;
  }

  function setStatus(next: BusStatus): void {
    if (status === next) return;
    status = next;
    for (const set of listeners.values()) for (const watcher of set) watcher.listener.status(next);
  }
  commands.on('close', () => setStatus('interrupted'));
  // Also with no stream open (no reads to notice it), so the next stream is not told of an
  // outage that is over.
  commands.on('ready', () => setStatus('connected'));

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
        for (const entry of entries) {
          const id = entry[0];
          // never backwards: a read started from an older cursor may overlap a newer one
          const cursor = cursors.get(agentId);
          if (cursor === undefined) break;
          if (compareMessageIds(id, cursor) > 0) cursors.set(agentId, id);
          let messages: LiveMessage[] | undefined;
          for (const watcher of listeners.get(agentId) ?? []) {
            if (compareMessageIds(id, watcher.start) <= 0) continue;
            messages ??= messagesOf(entry);
            for (const message of messages) watcher.listener.message(message);
          }
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

  /**
   * Up to `max` of the stream's entries from `start` (an entry id, inclusive, or `-`) on, and
   * whether that was all. Read in pages: one XRANGE of a full stream is ~20 MB, which the
   * client parses two to three times slower than the same entries in pages of 100, and which
   * could outlast the command timeout on a busy machine. Entries added while paging are read
   * too (their ids dedupe them against live delivery).
   */
  async function entriesFrom(agentId: string, start: string, max: number) {
    const entries: Entry[] = [];
    let from = start;
    while (entries.length < max) {
      const count = Math.min(REPLAY_PAGE, max - entries.length);
      const page = (await commands.xrange(key(agentId), from, '+', 'COUNT', count)) as Entry[];
      entries.push(...page);
      const last = page.at(-1);
      if (page.length < count || last === undefined) return { entries, complete: true };
      from = `(${last[0]}`;
    }
    return { entries, complete: false };
  }

  /** Everything after `afterId` when its entry is still in the stream, else everything. */
  async function replayFrom(agentId: string, afterId: string | undefined, maxBatches: number) {
    if (afterId !== undefined && isMessageId(afterId)) {
      const { entryId, index } = splitMessageId(afterId);
      // one read from that entry on: if its first entry is that one, the client resumes
      const from = await entriesFrom(agentId, entryId, maxBatches + 1);
      const first = from.entries[0];
      if (first?.[0] === entryId) {
        const items = messagesOf(first);
        if (index < items.length)
          return {
            messages: [...items.slice(index + 1), ...from.entries.slice(1).flatMap(messagesOf)],
            resumed: true,
            complete: from.complete,
          };
      }
    }
    const all = await entriesFrom(agentId, '-', maxBatches);
    return { messages: all.entries.flatMap(messagesOf), resumed: false, complete: all.complete };
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
      if (data.length === 0) return [];
      const fields = data.flatMap((d) => ['d', d]);
      const results =
        (await commands
          .pipeline()
          .xadd(key(agentId), 'MAXLEN', String(bufferSize), '*', ...fields)
          .expire(key(agentId), options.ttlSeconds ?? 86_400)
          .exec()) ?? [];
      const [error, id] = results[0] ?? [new Error('XADD had no reply'), null];
      if (error) throw error;
      return data.map((_, index) => messageId(id as string, index));
    },
    async replay(agentId, afterId, maxBatches) {
      try {
        if (maxBatches === undefined)
          // all of it: what is added meanwhile reaches subscribers live
          return { ...(await replayFrom(agentId, afterId, bufferSize)), complete: true };
        return await replayFrom(agentId, afterId, Math.min(maxBatches, bufferSize));
      } catch (error) {
        // Streams that could not get their replay ask again on `connected`, which the next
        // successful read (or reconnection) reports.
        setStatus('interrupted');
        throw error;
      }
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
      const own: Watcher = { start, listener };
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
      wake?.();
      reader.disconnect();
      commands.disconnect();
      await loop;
    },
  };
}
