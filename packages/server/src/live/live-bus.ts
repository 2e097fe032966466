/** One message of an agent's live stream: the SSE id and the JSON of a BufferBatchItem. */
export interface LiveMessage {
  id: string;
  data: string;
}

export interface Replay {
  messages: LiveMessage[];
  /** True when `afterId` was found: `messages` are exactly what came after it. */
  resumed: boolean;
}

export type BusStatus = 'connected' | 'interrupted';

export interface LiveListener {
  message(message: LiveMessage): void;
  /** The bus lost (`interrupted`) or regained (`connected`) its connection. */
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
  /** Appends messages (JSON data) to the agent's stream, in order; resolves with their ids. */
  publish(agentId: string, data: string[]): Promise<string[]>;
  /**
   * Messages of the agent after `afterId` while that id is still buffered (`resumed`);
   * otherwise (no id, or one that has been evicted) every buffered message. Oldest first.
   */
  replay(agentId: string, afterId?: string): Promise<Replay>;
  /**
   * Real-time messages published from the moment the returned promise resolves (by any
   * instance sharing the bus). Subscribe first, then replay: together they leave no gap.
   */
  subscribe(agentId: string, listener: LiveListener): Promise<Subscription>;
  /** Resolves true once the bus can publish, false if it cannot within `timeoutMs`. */
  ready(timeoutMs: number): Promise<boolean>;
  /** Idempotent. */
  close(): Promise<void>;
}

/** How many batches each agent's buffer keeps (the spec's replay depth). */
export const LIVE_BUFFER = 1000;

/** Orders stream ids of the form `<ms>-<seq>` (Redis entry ids; the memory bus uses the same). */
export function compareMessageIds(a: string, b: string): number {
  const [aMs = 0, aSeq = 0] = a.split('-').map(Number);
  const [bMs = 0, bSeq = 0] = b.split('-').map(Number);
  return aMs !== bMs ? aMs - bMs : aSeq - bSeq;
}

const MAX_ID_PART = 18_446_744_073_709_551_615n; // Redis stream id parts are 64-bit

export function isMessageId(value: string): boolean {
  const match = /^(\d{1,20})-(\d{1,20})$/.exec(value);
  return (
    match !== null &&
    BigInt(match[1] as string) <= MAX_ID_PART &&
    BigInt(match[2] as string) <= MAX_ID_PART
  );
}
