import { Redis, type RedisOptions } from 'ioredis';
import {
  LIVE_AGENT_BUFFER_MAX_BYTES,
  LIVE_BUFFER,
  LIVE_BUFFER_MAX_BYTES,
  REPLAY_PAGE_BYTES,
  compareMessageIds,
  type BusStatus,
  type LiveBus,
  type LiveListener,
  type LiveMessage,
} from './live-bus.js';
import type { ReplayHistory } from './replay-history.js';
import { RedisPublisher } from './redis-publisher.js';
import { ReplayRebuild } from './redis-replay-rebuild.js';
import { defineLiveScripts, isReplyError, type Entry } from './redis-scripts.js';
import { itemTraceId } from './item-trace-id.js';
import { REPLAY_PAGE, messagesOf, replayFrom, twinBytes } from './redis-entries.js';

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

type XReadReply = [key: string, entries: Entry[]][] | null;

/** Token-stream entries per agent per blocking read (small: an id, a token and a size each). */
const TWINS_PER_READ = 100;
/**
 * Bytes of batches one round of real-time delivery reads, shared among the agents that have
 * news, the agents with the least first: an agent posting megabytes cannot make the others
 * wait behind its backlog.
 */
const ROUND_BYTES = 8 * 1024 * 1024;
/** Each agent with news gets at least this much of a round (and always one batch). */
const MIN_AGENT_SHARE = 256 * 1024;
/**
 * At most this many agents with more news than MIN_AGENT_SHARE are read at once on the bulk
 * reader (ROUND_BYTES each), beside the rounds of the others; past it they share the rounds.
 */
const MAX_BULK_READS = 4;

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

  const tokensPrefix = `${prefix}#tokens:`;
  const listeners = new Map<string, Set<Watcher>>();
  /** Agents whose last real-time read failed on its own (their streams were told). */
  const failing = new Set<string>();
  /** Per watched agent: the id after which the reader delivers. */
  const cursors = new Map<string, string>();
  let status: BusStatus = 'connected';
  let closed = false;
  let reader = newReader();
  let readerScripts = defineLiveScripts(reader, prefix, bounds);
  /**
   * Reads of agents with much news (megabytes of batches) go on a connection of their own, so
   * that the rounds of the others do not wait for those replies; such an agent is left out of
   * the blocking reads until its read is delivered (one read in flight per agent: in order).
   */
  const bulkReader = new Redis(options.url, {
    ...base,
    enableOfflineQueue: true,
    commandTimeout: 5_000,
    connectionName: `${connectionName}-bulk-reader`,
  });
  bulkReader.on('error', onError);
  const bulkReaderScripts = defineLiveScripts(bulkReader, prefix, bounds);
  const bulkReads = new Set<string>();
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
    failing.clear();
    for (const set of listeners.values()) for (const watcher of set) watcher.listener.status(next);
  }

  /** One agent's real-time reads failed (`interrupted`) or work again: its streams only. */
  function setAgentStatus(agentId: string, next: BusStatus): void {
    if ((next === 'interrupted') === failing.has(agentId)) return;
    if (next === 'interrupted') failing.add(agentId);
    else failing.delete(agentId);
    for (const watcher of listeners.get(agentId) ?? []) watcher.listener.status(next);
  }

  /** Hands a page of an agent's entries to its watchers and moves its cursor past them. */
  function deliver(agentId: string, entries: Entry[]): void {
    for (const entry of entries) {
      const id = entry[0];
      // never backwards: a read started from an older cursor may overlap a newer one
      const cursor = cursors.get(agentId);
      if (cursor === undefined) return;
      if (compareMessageIds(id, cursor) > 0) cursors.set(agentId, id);
      let messages: LiveMessage[] | undefined;
      for (const watcher of listeners.get(agentId) ?? []) {
        if (compareMessageIds(id, watcher.start) <= 0) continue;
        messages ??= messagesOf(entry);
        for (const message of messages) watcher.listener.message(message);
      }
    }
  }
  commands.on('close', () => setStatus('interrupted'));
  // Also with no stream open (no reads to notice it), so the next stream is not told of an
  // outage that is over.
  commands.on('ready', () => {
    setStatus('connected');
    rebuild.connected();
    publisher.flushBacklog();
  });

  /**
   * One round of real-time delivery: a blocking read of the watched agents' token streams says
   * who has news and how many bytes of it; then each of them gets its share of the round's
   * bytes, the agents with the least news first, read and delivered in that order. What is left
   * of an agent's news is read in the next round, which starts at once.
   */
  /**
   * Ends the blocking read in progress, so that the next one includes a newly watched agent. The
   * read may not have reached Redis yet when this does (nothing to unblock): then again, briefly.
   */
  function interruptRead(attempt = 0): void {
    if (!reading || readerId === undefined || attempt > 5) return;
    commands
      .client('UNBLOCK', readerId)
      .then((unblocked) => {
        if (unblocked === 0) setTimeout(() => interruptRead(attempt + 1), 5).unref();
      })
      .catch(onError);
  }

  /** A read of an agent's news is in: to its watchers, and its cursor past it. */
  function delivered(
    agentId: string,
    read: { entries: Entry[]; complete: boolean },
    lastTwin: string | undefined,
  ): void {
    setAgentStatus(agentId, 'connected');
    deliver(agentId, read.entries);
    // twins of batches that are gone (trimmed meanwhile) are not read again
    const cursor = cursors.get(agentId);
    if (read.complete && lastTwin !== undefined && cursor !== undefined)
      if (compareMessageIds(lastTwin, cursor) > 0) cursors.set(agentId, lastTwin);
  }

  /** Reads an agent's megabytes of news beside the rounds; a failure is its streams' alone. */
  function readInBulk(agentId: string, lastTwin: string | undefined): void {
    const cursor = cursors.get(agentId);
    if (cursor === undefined) return;
    bulkReads.add(agentId);
    bulkReaderScripts
      .read(agentId, `(${cursor}`, TWINS_PER_READ, ROUND_BYTES)
      .then(
        (read) => delivered(agentId, read, lastTwin),
        (error: unknown) => {
          if (closed) return;
          onError(error);
          setAgentStatus(agentId, 'interrupted');
        },
      )
      .finally(() => {
        bulkReads.delete(agentId);
        // back into the blocking reads
        wake?.();
        interruptRead();
      });
  }

  async function readOnce(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const watchdog = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('blocking read hung')), blockMs + 3_000);
      timer.unref();
    });
    try {
      readerId ??= (await Promise.race([reader.client('ID'), watchdog])) as number;
      // the agents watched now: one subscribing from here on interrupts this read
      const agents = [...cursors.keys()].filter((a) => !bulkReads.has(a));
      if (agents.length === 0) return;
      const ids = agents.map((a) => cursors.get(a) as string);
      reading = true;
      const reply = (await Promise.race([
        reader.xread(
          'COUNT',
          TWINS_PER_READ,
          'BLOCK',
          blockMs,
          'STREAMS',
          ...agents.map(tokensKey),
          ...ids,
        ),
        watchdog,
      ])) as XReadReply;
      reading = false;
      if (commands.status === 'ready') setStatus('connected');
      const news = (reply ?? [])
        .map(([streamKey, twins]) => ({
          agentId: streamKey.slice(tokensPrefix.length),
          bytes: twins.reduce((sum, [, fields]) => sum + twinBytes(fields), 0),
          lastTwin: twins.at(-1)?.[0],
        }))
        .filter(({ agentId }) => cursors.has(agentId))
        .sort((a, b) => a.bytes - b.bytes);
      const share = Math.max(MIN_AGENT_SHARE, Math.floor(ROUND_BYTES / Math.max(1, news.length)));
      const inRound = news.filter(({ agentId, bytes, lastTwin }) => {
        if (bytes <= MIN_AGENT_SHARE || bulkReads.size >= MAX_BULK_READS) return true;
        readInBulk(agentId, lastTwin);
        return false;
      });
      // sent together (one round trip), answered in order: the smallest news is delivered first
      const reads = inRound.map(({ agentId, lastTwin }) => {
        const page = readerScripts.read(
          agentId,
          `(${cursors.get(agentId) as string}`,
          TWINS_PER_READ,
          share,
        );
        page.catch(() => {}); // awaited below, unless an earlier one failed the round
        return { agentId, lastTwin, page };
      });
      for (const { agentId, lastTwin, page } of reads) {
        let read: Awaited<typeof page>;
        try {
          read = await Promise.race([page, watchdog]);
        } catch (error) {
          // Redis refused this agent's read (a key of the wrong type): its streams, not the bus
          if (!isReplyError(error)) throw error;
          onError(error);
          setAgentStatus(agentId, 'interrupted');
          continue;
        }
        delivered(agentId, read, lastTwin);
      }
    } catch (error) {
      if (closed) return;
      onError(error);
      setStatus('interrupted');
      if ((error as Error).message === 'blocking read hung') {
        reader.disconnect();
        reader = newReader();
        readerScripts = defineLiveScripts(reader, prefix, bounds);
      }
      await sleep(250);
    } finally {
      reading = false;
      clearTimeout(timer);
    }
  }

  const loop = (async () => {
    while (!closed) {
      if ([...cursors.keys()].every((agentId) => bulkReads.has(agentId))) {
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        continue;
      }
      await readOnce();
    }
  })();

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
        interruptRead();
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
      wake?.();
      reader.disconnect();
      bulkReader.disconnect();
      commands.disconnect();
      bulk.disconnect();
      await loop;
    },
  };
}
