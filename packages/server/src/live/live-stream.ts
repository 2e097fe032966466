import {
  compareMessageIds,
  isMessageId,
  type LiveBus,
  type LiveMessage,
  type Subscription,
} from './live-bus.js';

/** Where a live stream's messages go (the HTTP layer writes them as SSE). */
export interface LiveSink {
  /** Sends one message; false when the client's connection wants a pause (backpressure). */
  message(message: LiveMessage): boolean;
  /** Resolves when the connection can take more (or has closed). */
  drained(): Promise<void>;
  /** The bus is interrupted: tell the client, keep the connection. */
  warning(): void;
  /** Real-time messages piled up during a replay the client reads too slowly: give up on it. */
  overflow(): void;
}

/**
 * Opens an agent's live stream for one client: subscribes first, then replays what is buffered
 * (after `lastEventId` when the client is resuming), then delivers in real time. Messages that
 * arrive during the replay are held and deduplicated by id, so the hand-off neither skips nor
 * repeats. The replay is paced by the client's connection (it may be 20 MB), and at most
 * `maxHeld` real-time messages wait behind it. A bus that is down at open time makes a warning,
 * not an error.
 */
export async function openLiveStream(
  bus: LiveBus,
  agentId: string,
  lastEventId: string | undefined,
  sink: LiveSink,
  options: { maxHeld: number; onError?: (error: unknown) => void },
): Promise<Subscription> {
  let replaying = true;
  let overflowed = false;
  const held: LiveMessage[] = [];
  let lastSent: string | undefined;
  const deliver = (message: LiveMessage): boolean => {
    if (lastSent !== undefined && compareMessageIds(message.id, lastSent) <= 0) return true;
    lastSent = message.id;
    return sink.message(message);
  };

  const subscription = await bus.subscribe(agentId, {
    message: (m) => {
      if (!replaying) {
        deliver(m);
        return;
      }
      if (overflowed) return;
      held.push(m);
      if (held.length > options.maxHeld) {
        overflowed = true;
        sink.overflow();
      }
    },
    status: (status) => {
      if (status === 'interrupted') sink.warning();
    },
  });
  const resumeFrom =
    lastEventId !== undefined && isMessageId(lastEventId) ? lastEventId : undefined;
  try {
    const replay = await bus.replay(agentId, resumeFrom);
    if (replay.resumed) lastSent = resumeFrom;
    for (const message of replay.messages) {
      if (overflowed) break;
      if (!deliver(message)) await sink.drained();
    }
  } catch (error) {
    options.onError?.(error);
    sink.warning();
  }
  while (held.length > 0 && !overflowed) {
    const message = held.shift() as LiveMessage;
    if (!deliver(message)) await sink.drained();
  }
  replaying = false;
  return subscription;
}
