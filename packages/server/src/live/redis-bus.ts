import { randomBytes } from 'node:crypto';
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
  type ResyncNotice,
  RESYNC_MESSAGE,
} from './live-bus.js';
import { BacklogOverflowError, PublishBacklog, type PendingBatch } from './publish-backlog.js';
import type { ReplayHistory } from './replay-history.js';
import { defineLiveScripts } from './redis-scripts.js';

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

/**
 * An entry is one batch, its items stored as repeated `d` fields, in order (its publish's token
 * is in the agent's token stream, under the same id); or one `r` field, a resync notice.
 */
function messagesOf([id, fields]: Entry): LiveMessage[] {
  const messages: LiveMessage[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2)
    if (fields[i] === 'd')
      messages.push({ id: messageId(id, messages.length), data: fields[i + 1] as string });
    else if (fields[i] === 'r')
      messages.push({
        id: messageId(id, messages.length),
        data: fields[i + 1] as string,
        event: 'resync',
      });
  return messages;
}

/** Batches written per round of a backlog flush (sent together, answered in order). */
const FLUSH_CHUNK = 100;
/** How many of the agent's newest tokens a retried write looks through (see redis-scripts.ts). */
const RETRY_LOOK_BACK = 100;
/** A flush that failed is tried again after this, doubling up to the maximum. */
const FLUSH_RETRY_MS = 250;
const FLUSH_RETRY_MAX_MS = 4_000;

/** An answer of Redis itself (the command ran and failed), not a lost connection or timeout. */
const isReplyError = (error: unknown) => error instanceof Error && error.name === 'ReplyError';

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
  const scripts = defineLiveScripts(commands);
  const ttlSeconds = options.ttlSeconds ?? 86_400;

  const backlog = new PublishBacklog(options.backlogMaxBytes ?? 64 * 1024 * 1024);
  let publishSeq = 0;
  let flushing = false;
  let flushRetryMs = FLUSH_RETRY_MS;
  let flushTimer: NodeJS.Timeout | undefined;

  /**
   * The epoch of Redis's data: when this Redis first held Flightlog's streams. A Redis that
   * restarted empty has none, and whoever notices first sets it to now; an agent's stream whose
   * rebuild marker is of an older epoch may have lost batches stored before it.
   */
  let epoch: Promise<string> | undefined;
  const epochKey = `${prefix}#epoch`;
  const rebuildMarker = (agentId: string) => `${prefix}#rebuilt:${agentId}`;
  /** The tokens of an agent's newest writes (see redis-scripts.ts WRITE). */
  const tokensKey = (agentId: string) => `${prefix}#tokens:${agentId}`;
  /** Rebuilds in flight on this instance, so concurrent replays of one agent share one. */
  const rebuilding = new Map<string, Promise<void>>();

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
  commands.on('ready', () => {
    setStatus('connected');
    epoch = readEpoch();
    epoch.catch(() => {}); // read again at the next replay
    flushBacklog();
  });

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

  const fieldsOf = (batch: PendingBatch) => batch.data.flatMap((d) => ['d', d]);

  /** One batch to its agent's stream; a retry of a write that may have landed adds it once. */
  async function write(batch: PendingBatch): Promise<string[]> {
    const id = await scripts.write(
      key(batch.agentId),
      tokensKey(batch.agentId),
      bufferSize,
      ttlSeconds,
      batch.uncertain ? RETRY_LOOK_BACK : 0,
      batch.token,
      fieldsOf(batch),
    );
    return batch.data.map((_, index) => messageId(id, index));
  }

  /** Keeps a batch for when Redis is back; what the budget gives up is lost to the streams. */
  function hold(batch: PendingBatch): void {
    if (closed) {
      batch.reject(new Error('the live bus is closed'));
      return;
    }
    for (const dropped of backlog.push(batch))
      dropped.reject(
        new BacklogOverflowError(
          `live backlog over ${backlog.bytes} bytes while Redis is unreachable: batch dropped`,
        ),
      );
    flushBacklog();
  }

  function retryFlushLater(): void {
    if (flushTimer !== undefined || closed) return;
    flushTimer = setTimeout(() => {
      flushTimer = undefined;
      flushBacklog();
    }, flushRetryMs);
    flushTimer.unref();
    flushRetryMs = Math.min(flushRetryMs * 2, FLUSH_RETRY_MAX_MS);
  }

  /** A `resync` entry for an agent whose stream lost batches. */
  async function announceGap(
    agentId: string,
    gap: { missedBatches: number; from: number; to: number },
  ) {
    const notice: ResyncNotice = {
      message: RESYNC_MESSAGE,
      missedBatches: gap.missedBatches,
      from: new Date(gap.from).toISOString(),
      to: new Date(gap.to).toISOString(),
    };
    await commands
      .pipeline()
      .xadd(key(agentId), 'MAXLEN', String(bufferSize), '*', 'r', JSON.stringify(notice))
      .expire(key(agentId), ttlSeconds)
      .exec()
      .then((results) => {
        const failed = results?.find(([error]) => error)?.[0];
        if (failed) throw failed;
      });
  }

  /**
   * Writes what waited for Redis, oldest first: first the `resync` notices of agents that lost
   * batches, then the batches, a chunk at a time (sent together, so one round trip per chunk).
   * Stops at the first lost connection or timeout and tries again when Redis is ready (or after
   * a backoff, for a connection that stays open but does not answer).
   */
  function flushBacklog(): void {
    if (flushing || closed || commands.status !== 'ready') return;
    if (backlog.size === 0 && !backlog.hasGaps) return;
    flushing = true;
    (async () => {
      while (!closed && commands.status === 'ready' && (backlog.size > 0 || backlog.hasGaps)) {
        for (const [agentId, gap] of backlog.takeGaps())
          try {
            await announceGap(agentId, gap);
          } catch (error) {
            backlog.restoreGap(agentId, gap);
            throw error;
          }
        const chunk = backlog.peek(FLUSH_CHUNK);
        const written = await Promise.allSettled(chunk.map(write));
        for (const [i, outcome] of written.entries()) {
          const batch = chunk[i] as PendingBatch;
          if (outcome.status === 'rejected' && !isReplyError(outcome.reason)) {
            // This one and the rest of the chunk may have been written: retry them once.
            for (const rest of chunk.slice(i)) rest.uncertain = true;
            throw outcome.reason;
          }
          // false when its agent was forgotten while it was being written (already settled)
          const owed = backlog.remove(batch);
          if (outcome.status === 'fulfilled') batch.resolve(outcome.value);
          else if (owed) {
            // Redis refused it (out of memory, a key of the wrong type): it will not go later.
            backlog.recordGap(batch);
            batch.reject(outcome.reason as Error);
          }
        }
      }
      flushRetryMs = FLUSH_RETRY_MS;
    })()
      .catch((error: unknown) => {
        onError(error);
        retryFlushLater();
      })
      .finally(() => {
        flushing = false;
        // published while the last chunk was in flight
        if (backlog.size > 0 || backlog.hasGaps) flushBacklog();
      });
  }

  async function readEpoch(): Promise<string> {
    await commands.set(epochKey, String(Date.now()), 'NX');
    const value = await commands.get(epochKey);
    if (value === null) throw new Error('the live bus epoch vanished');
    return value;
  }

  /**
   * Rebuilds the agent's replay from the store when Redis may have lost its batches (its stream
   * was not rebuilt in this epoch of Redis's data, and is not full): at most once per epoch, in
   * front of what the stream holds.
   */
  async function rebuildIfLost(agentId: string): Promise<void> {
    const history = options.history;
    if (history === undefined) return;
    epoch ??= readEpoch();
    const current = await epoch.catch((error: unknown) => {
      epoch = undefined;
      throw error;
    });
    const [[, marker] = [], [, length] = []] =
      (await commands.pipeline().get(rebuildMarker(agentId)).xlen(key(agentId)).exec()) ?? [];
    if (marker === current || (length as number) >= bufferSize) return;
    // Runs older than a stream lives would have left Redis with their stream anyway: an agent
    // idle since long before Redis lost its data gets no rebuilt replay, as it would have had none.
    const lostAt = Number(current);
    const runs = await history(agentId, {
      from: new Date(Math.min(lostAt, Date.now()) - ttlSeconds * 1000),
      before: new Date(lostAt),
    });
    await scripts.rebuild(
      key(agentId),
      rebuildMarker(agentId),
      current,
      bufferSize,
      ttlSeconds,
      runs,
    );
  }

  /**
   * Concurrent replays of one agent share one rebuild. A rebuild that fails (the store, or Redis
   * itself) costs the replay only what it would have added: it is tried again at the next one.
   */
  function rebuildOnce(agentId: string): Promise<void> {
    let running = rebuilding.get(agentId);
    if (!running) {
      running = rebuildIfLost(agentId)
        .catch((error: unknown) =>
          onError(
            new Error(`live replay of ${agentId} not rebuilt from the store`, { cause: error }),
          ),
        )
        .finally(() => rebuilding.delete(agentId));
      rebuilding.set(agentId, running);
    }
    return running;
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
    publish(agentId, data) {
      if (data.length === 0) return Promise.resolve([]);
      return new Promise<string[]>((resolve, reject) => {
        const batch: PendingBatch = {
          agentId,
          data,
          token: randomBytes(12).toString('base64url'),
          seq: ++publishSeq,
          bytes: data.reduce((sum, d) => sum + d.length * 2 + 64, 0),
          publishedAt: Date.now(),
          uncertain: false,
          resolve,
          reject,
        };
        // Behind batches still waiting, or while Redis is away: wait, in order.
        if (closed || backlog.size > 0 || flushing || commands.status !== 'ready') {
          hold(batch);
          return;
        }
        write(batch).then(resolve, (error: unknown) => {
          if (isReplyError(error)) return reject(error as Error);
          onError(error);
          batch.uncertain = true;
          hold(batch);
        });
      });
    },
    async replay(agentId, afterId, maxBatches) {
      try {
        await rebuildOnce(agentId);
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
    async forget(agentId) {
      // Its batches still waiting were meant for streams that no longer exist: not a loss.
      for (const batch of backlog.removeAgent(agentId)) batch.resolve([]);
      await commands.del(key(agentId), rebuildMarker(agentId), tokensKey(agentId));
    },
    backlog() {
      return { batches: backlog.size, bytes: backlog.bytes };
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
      clearTimeout(flushTimer);
      // Shutdown: what still waits for Redis is lost to the streams (the store has it).
      for (const batch of backlog.clear()) batch.reject(new Error('the live bus is closed'));
      wake?.();
      reader.disconnect();
      commands.disconnect();
      await loop;
    },
  };
}
