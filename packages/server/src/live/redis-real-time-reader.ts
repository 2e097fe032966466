import { Redis, type RedisOptions } from 'ioredis';
import {
  compareMessageIds,
  type BusStatus,
  type LiveListener,
  type LiveMessage,
  type Subscription,
} from './live-bus.js';
import { messagesOf, twinBytes } from './redis-entries.js';
import {
  defineLiveScripts,
  isReplyError,
  type BusBounds,
  type Entry,
  type LiveScripts,
} from './redis-scripts.js';

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

/** Where and how the reader connects. */
export interface RealTimeReaderOptions {
  url: string;
  /** Connection options shared with the bus's other connections. */
  base: RedisOptions;
  /** The reader's connections show in CLIENT LIST as `<name>-reader` and `<name>-bulk-reader`. */
  connectionName: string;
  prefix: string;
  bounds: BusBounds;
  /** How long one blocking read waits for new entries. */
  blockMs: number;
  /** The bus's command connection: its state is the bus's, and it interrupts blocking reads. */
  commands: Redis;
  onError: (error: unknown) => void;
}

/**
 * Real-time delivery for the Redis bus: one blocking XREAD loop per instance, on a connection of
 * its own, over the token streams of the agents that have subscribers here. Each round, the
 * agents with news share the round's bytes, the least news first; an agent with megabytes of
 * news is read on a bulk connection beside the rounds. Blocking reads can hang across reconnects
 * in Redis clients, so each read has a watchdog that replaces the connection.
 */
export class RealTimeReader {
  private readonly listeners = new Map<string, Set<Watcher>>();
  /** Agents whose last real-time read failed on its own (their streams were told). */
  private readonly failing = new Set<string>();
  /** Per watched agent: the id after which the reader delivers. */
  private readonly cursors = new Map<string, string>();
  private status: BusStatus = 'connected';
  private closed = false;
  private reader: Redis;
  private readerScripts: LiveScripts;
  /**
   * Reads of agents with much news (megabytes of batches) go on a connection of their own, so
   * that the rounds of the others do not wait for those replies; such an agent is left out of
   * the blocking reads until its read is delivered (one read in flight per agent: in order).
   */
  private readonly bulkReader: Redis;
  private readonly bulkReaderScripts: LiveScripts;
  private readonly bulkReads = new Set<string>();
  private wake: (() => void) | undefined;
  /** Redis client id of the reader connection, to interrupt its blocking read (CLIENT UNBLOCK). */
  private readerId: number | undefined;
  private reading = false;
  private readonly tokensPrefix: string;
  private readonly loop: Promise<void>;

  constructor(private readonly options: RealTimeReaderOptions) {
    this.tokensPrefix = `${options.prefix}#tokens:`;
    this.reader = this.newReader();
    this.readerScripts = defineLiveScripts(this.reader, options.prefix, options.bounds);
    this.bulkReader = new Redis(options.url, {
      ...options.base,
      enableOfflineQueue: true,
      commandTimeout: 5_000,
      connectionName: `${options.connectionName}-bulk-reader`,
    });
    this.bulkReader.on('error', options.onError);
    this.bulkReaderScripts = defineLiveScripts(this.bulkReader, options.prefix, options.bounds);
    this.loop = this.run();
  }

  /** Delivers the agent's entries after `start` to `listener`, until unsubscribed. */
  watch(agentId: string, start: string, listener: LiveListener): Subscription {
    const own: Watcher = { start, listener };
    let set = this.listeners.get(agentId);
    if (!set) {
      set = new Set();
      this.listeners.set(agentId, set);
    }
    const watchers = set;
    watchers.add(own);
    if (!this.cursors.has(agentId)) {
      this.cursors.set(agentId, start);
      this.wake?.();
      // A read already blocking does not include this agent: end it now so the next one does.
      this.interruptRead();
    }
    if (this.status === 'interrupted') listener.status('interrupted');
    let active = true;
    return {
      unsubscribe: () => {
        if (!active) return;
        active = false;
        watchers.delete(own);
        if (watchers.size === 0) {
          this.listeners.delete(agentId);
          this.cursors.delete(agentId);
        }
      },
    };
  }

  /** The bus is interrupted or connected again: every stream is told, once. */
  setStatus(next: BusStatus): void {
    if (this.status === next) return;
    this.status = next;
    this.failing.clear();
    for (const set of this.listeners.values())
      for (const watcher of set) watcher.listener.status(next);
  }

  /** Stops reading and disconnects; resolves when the loop has ended. */
  stop(): Promise<void> {
    this.closed = true;
    this.wake?.();
    this.reader.disconnect();
    this.bulkReader.disconnect();
    return this.loop;
  }

  private async run(): Promise<void> {
    while (!this.closed) {
      if ([...this.cursors.keys()].every((agentId) => this.bulkReads.has(agentId))) {
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
        continue;
      }
      await this.readOnce();
    }
  }

  private newReader(): Redis {
    // The reader may queue its read while (re)connecting; the watchdog bounds the wait.
    const connection = new Redis(this.options.url, {
      ...this.options.base,
      enableOfflineQueue: true,
      connectionName: `${this.options.connectionName}-reader`,
    });
    connection.on('error', this.options.onError);
    connection.on('close', () => (this.readerId = undefined));
    return connection;
  }

  /** One agent's real-time reads failed (`interrupted`) or work again: its streams only. */
  private setAgentStatus(agentId: string, next: BusStatus): void {
    if ((next === 'interrupted') === this.failing.has(agentId)) return;
    if (next === 'interrupted') this.failing.add(agentId);
    else this.failing.delete(agentId);
    for (const watcher of this.listeners.get(agentId) ?? []) watcher.listener.status(next);
  }

  /** Hands a page of an agent's entries to its watchers and moves its cursor past them. */
  private deliver(agentId: string, entries: Entry[]): void {
    for (const entry of entries) {
      const id = entry[0];
      // never backwards: a read started from an older cursor may overlap a newer one
      const cursor = this.cursors.get(agentId);
      if (cursor === undefined) return;
      if (compareMessageIds(id, cursor) > 0) this.cursors.set(agentId, id);
      let messages: LiveMessage[] | undefined;
      for (const watcher of this.listeners.get(agentId) ?? []) {
        if (compareMessageIds(id, watcher.start) <= 0) continue;
        messages ??= messagesOf(entry);
        for (const message of messages) watcher.listener.message(message);
      }
    }
  }

  /**
   * Ends the blocking read in progress, so that the next one includes a newly watched agent. The
   * read may not have reached Redis yet when this does (nothing to unblock): then again, briefly.
   */
  private interruptRead(attempt = 0): void {
    if (!this.reading || this.readerId === undefined || attempt > 5) return;
    this.options.commands
      .client('UNBLOCK', this.readerId)
      .then((unblocked) => {
        if (unblocked === 0) setTimeout(() => this.interruptRead(attempt + 1), 5).unref();
      })
      .catch(this.options.onError);
  }

  /** A read of an agent's news is in: to its watchers, and its cursor past it. */
  private delivered(
    agentId: string,
    read: { entries: Entry[]; complete: boolean },
    lastTwin: string | undefined,
  ): void {
    this.setAgentStatus(agentId, 'connected');
    this.deliver(agentId, read.entries);
    // twins of batches that are gone (trimmed meanwhile) are not read again
    const cursor = this.cursors.get(agentId);
    if (read.complete && lastTwin !== undefined && cursor !== undefined)
      if (compareMessageIds(lastTwin, cursor) > 0) this.cursors.set(agentId, lastTwin);
  }

  /** Reads an agent's megabytes of news beside the rounds; a failure is its streams' alone. */
  private readInBulk(agentId: string, lastTwin: string | undefined): void {
    const cursor = this.cursors.get(agentId);
    if (cursor === undefined) return;
    this.bulkReads.add(agentId);
    this.bulkReaderScripts
      .read(agentId, `(${cursor}`, TWINS_PER_READ, ROUND_BYTES)
      .then(
        (read) => this.delivered(agentId, read, lastTwin),
        (error: unknown) => {
          if (this.closed) return;
          this.options.onError(error);
          this.setAgentStatus(agentId, 'interrupted');
        },
      )
      .finally(() => {
        this.bulkReads.delete(agentId);
        // back into the blocking reads
        this.wake?.();
        this.interruptRead();
      });
  }

  /**
   * One round of real-time delivery: a blocking read of the watched agents' token streams says
   * who has news and how many bytes of it; then each of them gets its share of the round's
   * bytes, the agents with the least news first, read and delivered in that order. What is left
   * of an agent's news is read in the next round, which starts at once.
   */
  private async readOnce(): Promise<void> {
    const { blockMs, onError, commands } = this.options;
    const cursors = this.cursors;
    let timer: NodeJS.Timeout | undefined;
    const watchdog = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('blocking read hung')), blockMs + 3_000);
      timer.unref();
    });
    try {
      this.readerId ??= (await Promise.race([this.reader.client('ID'), watchdog])) as number;
      // the agents watched now: one subscribing from here on interrupts this read
      const agents = [...cursors.keys()].filter((a) => !this.bulkReads.has(a));
      if (agents.length === 0) return;
      const ids = agents.map((a) => cursors.get(a) as string);
      this.reading = true;
      const reply = (await Promise.race([
        this.reader.xread(
          'COUNT',
          TWINS_PER_READ,
          'BLOCK',
          blockMs,
          'STREAMS',
          ...agents.map((agentId) => `${this.tokensPrefix}${agentId}`),
          ...ids,
        ),
        watchdog,
      ])) as XReadReply;
      this.reading = false;
      if (commands.status === 'ready') this.setStatus('connected');
      const news = (reply ?? [])
        .map(([streamKey, twins]) => ({
          agentId: streamKey.slice(this.tokensPrefix.length),
          bytes: twins.reduce((sum, [, fields]) => sum + twinBytes(fields), 0),
          lastTwin: twins.at(-1)?.[0],
        }))
        .filter(({ agentId }) => cursors.has(agentId))
        .sort((a, b) => a.bytes - b.bytes);
      const share = Math.max(MIN_AGENT_SHARE, Math.floor(ROUND_BYTES / Math.max(1, news.length)));
      const inRound = news.filter(({ agentId, bytes, lastTwin }) => {
        if (bytes <= MIN_AGENT_SHARE || this.bulkReads.size >= MAX_BULK_READS) return true;
        this.readInBulk(agentId, lastTwin);
        return false;
      });
      // sent together (one round trip), answered in order: the smallest news is delivered first
      const reads = inRound.map(({ agentId, lastTwin }) => {
        const page = this.readerScripts.read(
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
          this.setAgentStatus(agentId, 'interrupted');
          continue;
        }
        this.delivered(agentId, read, lastTwin);
      }
    } catch (error) {
      if (this.closed) return;
      onError(error);
      this.setStatus('interrupted');
      if ((error as Error).message === 'blocking read hung') {
        this.reader.disconnect();
        this.reader = this.newReader();
        this.readerScripts = defineLiveScripts(
          this.reader,
          this.options.prefix,
          this.options.bounds,
        );
      }
      await sleep(250);
    } finally {
      this.reading = false;
      clearTimeout(timer);
    }
  }
}
