import { LIVE_BUFFER, type LiveBus, type LiveListener, type LiveMessage } from './live-bus.js';

export interface InProcessBusOptions {
  /** Messages kept per agent (the spec's 1000). */
  bufferSize?: number;
  /**
   * Bytes kept across all agents: past it the oldest messages (of any agent) are dropped first,
   * so many busy agents cannot grow this process's memory without bound.
   */
  maxBytes?: number;
}

/**
 * The default bus for one instance: the last 1000 messages per agent, in memory. Ids are
 * `<boot ms>-<n>`, so an id from before a restart is never mistaken for a current one.
 */
export function createInProcessBus(options: InProcessBusOptions = {}): LiveBus {
  const bufferSize = options.bufferSize ?? LIVE_BUFFER;
  const maxBytes = options.maxBytes ?? 256 * 1024 * 1024;
  const boot = Date.now();
  let next = 0;
  let bytes = 0;
  const buffers = new Map<string, LiveMessage[]>();
  /** Every buffered message in publish order, for the global byte budget. */
  const oldestFirst: { agentId: string; id: string; size: number }[] = [];
  let oldestAt = 0;
  const listeners = new Map<string, Set<LiveListener>>();

  const size = (m: LiveMessage) => m.data.length * 2 + 64;

  function dropOldestOf(agentId: string): void {
    const buffer = buffers.get(agentId);
    const dropped = buffer?.shift();
    if (dropped) bytes -= size(dropped);
    if (buffer && buffer.length === 0) buffers.delete(agentId);
  }

  function enforceBudget(): void {
    while (bytes > maxBytes && oldestAt < oldestFirst.length) {
      const entry = oldestFirst[oldestAt++] as (typeof oldestFirst)[number];
      // Still buffered only if the per-agent cap has not dropped it already.
      if (buffers.get(entry.agentId)?.[0]?.id === entry.id) dropOldestOf(entry.agentId);
    }
    if (oldestAt > 1024 && oldestAt * 2 > oldestFirst.length) {
      oldestFirst.splice(0, oldestAt);
      oldestAt = 0;
    }
  }

  return {
    engine: 'memory',
    async publish(agentId, data) {
      const buffer = buffers.get(agentId) ?? [];
      buffers.set(agentId, buffer);
      const messages = data.map((d) => ({ id: `${boot}-${++next}`, data: d }));
      for (const message of messages) {
        buffer.push(message);
        bytes += size(message);
        oldestFirst.push({ agentId, id: message.id, size: size(message) });
        if (buffer.length > bufferSize) dropOldestOf(agentId);
      }
      enforceBudget();
      for (const listener of listeners.get(agentId) ?? [])
        for (const message of messages) listener.message(message);
      return messages.map((m) => m.id);
    },
    async replay(agentId, afterId) {
      const buffer = buffers.get(agentId) ?? [];
      if (afterId === undefined) return { messages: [...buffer], resumed: false };
      const at = buffer.findIndex((m) => m.id === afterId);
      if (at >= 0) return { messages: buffer.slice(at + 1), resumed: true };
      return { messages: [...buffer], resumed: false };
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
    async ready() {
      return true;
    },
    async close() {
      listeners.clear();
    },
  };
}
