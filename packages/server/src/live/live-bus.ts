/**
 * One message of an agent's live stream: the SSE id and the JSON of a BufferBatchItem. The bus
 * buffers batches, and a batch's items are its messages: item 0 of buffer entry `E` has the id
 * `E` (so a single-item batch's id is the entry's id), item k ≥ 1 has `E-k`.
 */
export interface LiveMessage {
  id: string;
  data: string;
  /**
   * `resync`: batches of this agent were lost to the stream before this point (the bus was
   * unreachable for longer than its backlog could hold); `data` says when. Absent: a `trace`.
   */
  event?: 'resync';
}

/** What a `resync` message tells a client: re-read the agent's runs from the read API. */
export interface ResyncNotice {
  message: string;
  /** Batches this instance could not deliver. */
  missedBatches: number;
  /** When the first and last of them were stored (ISO 8601). */
  from: string;
  to: string;
}

export const RESYNC_MESSAGE =
  "live stream missed updates; re-read this agent's traces from the read API";

export interface Replay {
  messages: LiveMessage[];
  /** True when `afterId` was found: `messages` are exactly what came after it. */
  resumed: boolean;
  /**
   * True when no batch follows `messages` in the buffer; false when more may (a page of
   * `maxBatches`): the next page is the replay after the last of `messages`.
   */
  complete: boolean;
}

export type BusStatus = 'connected' | 'interrupted';

export interface LiveListener {
  message(message: LiveMessage): void;
  /**
   * The bus lost (`interrupted`) or regained (`connected`) its connection, or real-time
   * delivery of this listener's agent failed or works again (that agent's listeners only). A
   * listener that subscribes while the bus is interrupted is told so at once. A replay that
   * fails tells no listener: it is the failure of the stream that asked (see live-stream.ts).
   */
  status(status: BusStatus): void;
}

export interface Subscription {
  /** Idempotent. */
  unsubscribe(): void;
}

/**
 * The live bus: the last `LIVE_BUFFER` batches of each agent plus real-time fan-out. Two engines
 * (in-process-bus.ts, redis-bus.ts) behind this interface, chosen once at start-up.
 */
export interface LiveBus {
  readonly engine: 'memory' | 'redis';
  /**
   * Appends one batch (the JSON of its items, in order) to the agent's buffer as one entry;
   * resolves with the ids of its items. Batches are appended in the order of the calls: an
   * engine starts its write before it returns (the in-process bus appends at once, the Redis
   * bus queues its XADD on its one command connection), so callers need not wait for one
   * publish before starting the next (see LivePublisher).
   */
  publish(agentId: string, data: string[]): Promise<string[]>;
  /**
   * Messages of the agent after `afterId` while that id is still buffered (`resumed`);
   * otherwise (no id, or one that has been evicted or never was) every buffered message.
   * Oldest first. With `maxBatches`, the messages of at most that many batches (besides the
   * rest of the batch `afterId` is in), so a long replay can be read and sent page by page.
   */
  replay(agentId: string, afterId?: string, maxBatches?: number): Promise<Replay>;
  /**
   * Real-time messages published from the moment the returned promise resolves (by any
   * instance sharing the bus). Subscribe first, then replay: together they leave no gap.
   */
  subscribe(agentId: string, listener: LiveListener): Promise<Subscription>;
  /**
   * Drops everything buffered for the agent, and what still waits to be published for it (the
   * agent was deleted): no replay shows it again, also to an agent created later under its id.
   */
  forget(agentId: string): Promise<void>;
  /**
   * Drops the agent's messages of these traces (they were deleted) from its buffer, and from
   * what still waits to be published: no replay shows them again. Every other message keeps its
   * id, so a client resuming with `Last-Event-ID` misses nothing else and gets nothing twice; a
   * batch all of whose items go is dropped whole. Throws when the buffer could not be reached.
   * `lastBatchBefore` (ms since the epoch), when the caller knows that no batch of these traces
   * was published since, spares the look through a buffer whose batches are all newer.
   */
  forgetTraces(
    agentId: string,
    traceIds: readonly string[],
    hint?: { lastBatchBefore: number },
  ): Promise<void>;
  /**
   * Batches published but not yet taken by the bus (Redis unreachable), and the bytes they hold.
   * Always empty on the in-process bus.
   */
  backlog(): { batches: number; bytes: number };
  /** Resolves true once the bus can publish, false if it cannot within `timeoutMs`. */
  ready(timeoutMs: number): Promise<boolean>;
  /** Idempotent. */
  close(): Promise<void>;
}

/** How many batches each agent's buffer keeps (the spec's replay depth). */
export const LIVE_BUFFER = 1000;
/**
 * Bytes of batch JSON each agent's buffer keeps by default (LIVE_AGENT_BUFFER_MAX_BYTES): 1000
 * batches of up to 64 KB; with bigger batches an agent's replay holds fewer, its newest always.
 */
export const LIVE_AGENT_BUFFER_MAX_BYTES = 64 * 1024 * 1024;
/** Bytes of batches a bus keeps across all agents by default (LIVE_BUFFER_MAX_BYTES). */
export const LIVE_BUFFER_MAX_BYTES = 256 * 1024 * 1024;
/** About how many bytes one page of a replay holds (at least one batch, whatever its size). */
export const REPLAY_PAGE_BYTES = 1024 * 1024;

/** The id of item `index` of buffer entry `entryId`. */
export function messageId(entryId: string, index: number): string {
  return index === 0 ? entryId : `${entryId}-${index}`;
}

/** The buffer entry and item index of a message id (one that passed isMessageId). */
export function splitMessageId(id: string): { entryId: string; index: number } {
  const [ms = '0', seq = '0', index = '0'] = id.split('-');
  return { entryId: `${ms}-${seq}`, index: Number(index) };
}

/** Compares two decimal strings by value, exactly (ids may pass 2^53). */
function compareDecimal(a: string, b: string): number {
  const x = a.replace(/^0+(?=\d)/, '');
  const y = b.replace(/^0+(?=\d)/, '');
  if (x.length !== y.length) return x.length < y.length ? -1 : 1;
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * Orders message ids `<ms>-<seq>[-<k>]` (Redis entry ids; the memory bus uses the same form)
 * part by part; a missing third part counts as 0, so item 0 of an entry sorts before item 1.
 */
export function compareMessageIds(a: string, b: string): number {
  const x = a.split('-');
  const y = b.split('-');
  for (let i = 0; i < 3; i++) {
    const order = compareDecimal(x[i] ?? '0', y[i] ?? '0');
    if (order !== 0) return order;
  }
  return 0;
}

const MAX_ID_PART = 18_446_744_073_709_551_615n; // Redis stream id parts are 64-bit

export function isMessageId(value: string): boolean {
  const match = /^(\d{1,20})-(\d{1,20})(?:-(\d{1,20}))?$/.exec(value);
  return (
    match !== null &&
    match.slice(1).every((part) => part === undefined || BigInt(part) <= MAX_ID_PART)
  );
}
