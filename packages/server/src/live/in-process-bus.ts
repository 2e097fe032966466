import {
  LIVE_AGENT_BUFFER_MAX_BYTES,
  LIVE_BUFFER,
  LIVE_BUFFER_MAX_BYTES,
  REPLAY_PAGE_BYTES,
  messageId,
  splitMessageId,
  type LiveBus,
  type LiveListener,
  type LiveMessage,
} from './live-bus.js';
import { itemTraceId, leadingTraceId } from './item-trace-id.js';

export interface InProcessBusOptions {
  /** Batches kept per agent (the spec's 1000). */
  bufferSize?: number;
  /**
   * Bytes kept across all agents: past it the agent holding the most drops its oldest batches
   * first, so many busy agents cannot grow this process's memory without bound, and one
   * flooding agent costs its own replay, not the others'. Default 256 MiB.
   */
  maxBytes?: number;
  /** Bytes of JSON kept per agent (its newest batch whatever its size). Default 64 MiB. */
  agentMaxBytes?: number;
}

export interface InProcessBus extends LiveBus {
  /** Batches buffered across all agents (what the bookkeeping holds; for tests and metrics). */
  size(): number;
}

/**
 * A message as the buffer keeps it: its JSON as UTF-8 bytes. A Buffer's bytes live outside V8's
 * heap, so the last 1000 batches of a busy agent (20 MB of large batches) are not copied from
 * the young generation to the old one by every scavenge they survive, nor do they make V8 grow
 * its heap to hold them between collections: measured on the ingest benchmark, strings here cost
 * ~10 % of the service's CPU and ~80 MB of its RSS. A replay turns them back into text.
 */
interface BufferedMessage {
  id: string;
  event?: 'resync';
  bytes: Buffer;
  /** Characters of the JSON (what the budgets count, as for a string). */
  chars: number;
  /**
   * Its item's trace id, for forgetTraces: read from the bytes the first time a deletion asks
   * (null: none), not at publish, where it cost a parse of the trace per message.
   */
  traceId?: string | null;
}

function toBuffered(message: LiveMessage): BufferedMessage {
  return {
    id: message.id,
    ...(message.event === undefined ? {} : { event: message.event }),
    bytes: ownBytes(message.data),
    chars: message.data.length,
  };
}

/**
 * The UTF-8 bytes of `text` in an allocation of their own: `Buffer.from` cuts a short text from
 * a shared 8 KiB pool, and a buffered message would keep its whole block (and whatever else
 * lives there) for as long as it is buffered, far past what the budget counts for it.
 */
function ownBytes(text: string): Buffer {
  const bytes = Buffer.allocUnsafeSlow(Buffer.byteLength(text, 'utf8'));
  bytes.write(text, 0, 'utf8');
  return bytes;
}

/** Bytes decoded to find a message's trace id before the whole message is. */
const TRACE_HEAD_BYTES = 16 * 1024;

function traceIdOf(message: BufferedMessage): string | null {
  if (message.traceId === undefined) {
    // The trace comes first: a deletion decodes the head of each buffered message, not the
    // whole of an agent's buffer (64 MB at most, ~100 ms of the event loop).
    const { bytes } = message;
    const head = bytes.toString('utf8', 0, Math.min(bytes.length, TRACE_HEAD_BYTES));
    message.traceId =
      leadingTraceId(head) ??
      (bytes.length > TRACE_HEAD_BYTES ? itemTraceId(bytes.toString('utf8')) : itemTraceId(head)) ??
      null;
  }
  return message.traceId;
}

function liveMessage(message: BufferedMessage): LiveMessage {
  const data = message.bytes.toString('utf8');
  return message.event === undefined
    ? { id: message.id, data }
    : { id: message.id, data, event: message.event };
}

interface Entry {
  agentId: string;
  id: string;
  /** Its items' messages; fewer than `items` once those of deleted traces are gone. */
  messages: BufferedMessage[];
  /** Items the batch was published with: message `<id>-k` exists for k below it, or did. */
  items: number;
  /** When it was published (ms since the epoch). */
  at: number;
  /** Memory held, about: what the total budget counts. */
  bytes: number;
  /** Characters of JSON (its bytes, for ASCII): what the per-agent budget counts, as on Redis. */
  json: number;
}

/**
 * The default bus for one instance: the last 1000 batches per agent, in memory. Entry ids are
 * `<boot ms>-<n>`, so an id from before a restart is never mistaken for a current one.
 */
export function createInProcessBus(options: InProcessBusOptions = {}): InProcessBus {
  const bufferSize = options.bufferSize ?? LIVE_BUFFER;
  const maxBytes = options.maxBytes ?? LIVE_BUFFER_MAX_BYTES;
  const agentMaxBytes = options.agentMaxBytes ?? LIVE_AGENT_BUFFER_MAX_BYTES;
  const boot = Date.now();
  let next = 0;
  let bytes = 0;
  // Maps iterate in insertion order, which is publish order: the first key is the oldest, and
  // dropping any entry (cap or budget) is O(1) in both maps.
  /** Every buffered entry, oldest first. */
  const entries = new Map<string, Entry>();
  /** Per agent, its buffered entries, oldest first. */
  const buffers = new Map<string, Map<string, Entry>>();
  /** Per agent, the JSON bytes of its buffered entries. */
  const agentBytes = new Map<string, number>();
  const listeners = new Map<string, Set<LiveListener>>();

  /** Memory a message is counted for: as if it were a string (two bytes a character). */
  const sizeOf = (chars: number) => chars * 2 + 64;

  function drop(entry: Entry): void {
    entries.delete(entry.id);
    const buffer = buffers.get(entry.agentId);
    buffer?.delete(entry.id);
    if (buffer?.size === 0) buffers.delete(entry.agentId);
    bytes -= entry.bytes;
    const left = (agentBytes.get(entry.agentId) ?? 0) - entry.json;
    if (left > 0) agentBytes.set(entry.agentId, left);
    else agentBytes.delete(entry.agentId);
  }

  /** The agent holding the most bytes (a look per agent, only when over the total). */
  function biggestAgent(): string | undefined {
    let biggest: string | undefined;
    let most = -1;
    for (const [agentId, held] of agentBytes)
      if (held > most) {
        biggest = agentId;
        most = held;
      }
    return biggest;
  }

  function oldest<T>(map: Map<string, T>): T | undefined {
    return map.values().next().value;
  }

  return {
    engine: 'memory',
    async publish(agentId, data) {
      if (data.length === 0) return [];
      const id = `${boot}-${++next}`;
      const messages = data.map((d, index) => ({ id: messageId(id, index), data: d }));
      const entry: Entry = {
        agentId,
        id,
        messages: messages.map(toBuffered),
        items: messages.length,
        at: Date.now(),
        bytes: data.reduce((sum, d) => sum + sizeOf(d.length), 0),
        json: data.reduce((sum, d) => sum + d.length, 0),
      };
      let buffer = buffers.get(agentId);
      if (!buffer) {
        buffer = new Map();
        buffers.set(agentId, buffer);
      }
      buffer.set(id, entry);
      entries.set(id, entry);
      bytes += entry.bytes;
      agentBytes.set(agentId, (agentBytes.get(agentId) ?? 0) + entry.json);
      while (
        buffer.size > 1 &&
        (buffer.size > bufferSize || (agentBytes.get(agentId) ?? 0) > agentMaxBytes)
      )
        drop(oldest(buffer) as Entry);
      while (bytes > maxBytes && entries.size > 0) {
        const victim = buffers.get(biggestAgent() as string) as Map<string, Entry>;
        drop(oldest(victim) as Entry);
      }
      for (const listener of listeners.get(agentId) ?? [])
        for (const message of messages) listener.message(message);
      return messages.map((m) => m.id);
    },
    async replay(agentId, afterId, maxBatches = Infinity) {
      const buffered = [...(buffers.get(agentId)?.values() ?? [])];
      // pages of at most maxBatches and about REPLAY_PAGE_BYTES (at least one batch), as on Redis
      const page = (from: number) => {
        let end = from;
        let held = 0;
        while (end < buffered.length && end - from < maxBatches) {
          const next = (buffered[end] as Entry).json;
          if (end > from && maxBatches !== Infinity && held + next > REPLAY_PAGE_BYTES) break;
          held += next;
          end++;
        }
        return {
          messages: buffered.slice(from, end).flatMap((e) => e.messages.map(liveMessage)),
          complete: end >= buffered.length,
        };
      };
      const all = () => ({ ...page(0), resumed: false });
      if (afterId === undefined) return all();
      const { entryId, index } = splitMessageId(afterId);
      const at = buffered.findIndex((e) => e.id === entryId);
      const entry = buffered[at];
      if (!entry || index >= entry.items) return all();
      const rest = page(at + 1);
      return {
        // by item index, not position: items of deleted traces may be gone from the entry
        messages: [
          ...entry.messages.filter((m) => splitMessageId(m.id).index > index).map(liveMessage),
          ...rest.messages,
        ],
        complete: rest.complete,
        resumed: true,
      };
    },
    async subscribe(agentId, listener) {
      const set = listeners.get(agentId) ?? new Set();
      listeners.set(agentId, set);
      set.add(listener);
      let active = true;
      return {
        unsubscribe() {
          if (!active) return;
          active = false;
          set.delete(listener);
          if (set.size === 0) listeners.delete(agentId);
        },
      };
    },
    async forget(agentId) {
      for (const entry of [...(buffers.get(agentId)?.values() ?? [])]) drop(entry);
    },
    async forgetTraces(agentId, traceIds, hint) {
      const buffer = buffers.get(agentId);
      // every batch buffered came after the traces' last one: none of theirs is here
      if (!buffer || (hint && (oldest(buffer) as Entry).at > hint.lastBatchBefore)) return;
      const gone = new Set(traceIds);
      for (const entry of [...buffer.values()]) {
        const kept = entry.messages.filter(
          (m) => m.event !== undefined || !gone.has(traceIdOf(m) ?? ''),
        );
        if (kept.length === entry.messages.length) continue;
        if (kept.length === 0) {
          drop(entry);
          continue;
        }
        const removed = entry.messages.filter((m) => !kept.includes(m));
        const json = removed.reduce((sum, m) => sum + m.chars, 0);
        const held = removed.reduce((sum, m) => sum + sizeOf(m.chars), 0);
        entry.messages = kept;
        entry.json -= json;
        entry.bytes -= held;
        bytes -= held;
        agentBytes.set(agentId, (agentBytes.get(agentId) ?? 0) - json);
      }
    },
    backlog() {
      return { batches: 0, bytes: 0 };
    },
    async ready() {
      return true;
    },
    async close() {
      listeners.clear();
    },
    size() {
      return entries.size;
    },
  };
}
