import {
  compareMessageIds,
  isMessageId,
  splitMessageId,
  type LiveBus,
  type LiveMessage,
  type Replay,
  type Subscription,
} from './live-bus.js';

/** Batches per page of a replay. */
const REPLAY_PAGE_BATCHES = 100;
/** A failed replay is asked again after this, doubling up to REPLAY_RETRY_MAX_MS. */
const REPLAY_RETRY_MS = 500;
const REPLAY_RETRY_MAX_MS = 8_000;

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
  /**
   * The client left or was cut off: a replay in progress stops reading the bus for it (the
   * stream learns this before its opener can unsubscribe).
   */
  ended(): boolean;
}

/**
 * Opens an agent's live stream for one client: subscribes first, then replays what is buffered
 * (after `lastEventId` when the client is resuming), then delivers in real time. Messages that
 * arrive during the replay are held and deduplicated by id, so the hand-off neither skips nor
 * repeats. The replay is paced by the client's connection (it may be 20 MB), and at most
 * `maxHeld` real-time batches wait behind it. A bus that is down at open time makes a warning,
 * not an error: the stream holds real-time messages and replays once the bus reports
 * `connected`. One warning per outage. A replay that fails while the bus stays up (this
 * agent's batches could not be read) is this stream's alone: it warns and asks again on a
 * backoff of its own, as well as on the next `connected`.
 */
export async function openLiveStream(
  bus: LiveBus,
  agentId: string,
  lastEventId: string | undefined,
  sink: LiveSink,
  options: { maxHeld: number; onError?: (error: unknown) => void; retryMs?: number },
): Promise<Subscription> {
  const resumeFrom =
    lastEventId !== undefined && isMessageId(lastEventId) ? lastEventId : undefined;
  /** Real-time messages wait here while the replay is running or still owed. */
  let holding = true;
  const held: LiveMessage[] = [];
  /** Batches in `held`: a batch's items arrive together, so its first item counts it. */
  let heldBatches = 0;
  let overflowed = false;
  /** A replay is owed: at open, and again on `connected` after one failed. */
  let replayDue = true;
  let replaying = false;
  /** A warning went out for the current outage. */
  let warned = false;
  let closed = false;
  let lastSent: string | undefined;
  const firstRetryMs = options.retryMs ?? REPLAY_RETRY_MS;
  let retryMs = firstRetryMs;
  let retryTimer: NodeJS.Timeout | undefined;

  function retryLater(): void {
    if (retryTimer !== undefined || closed) return;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      if (closed || !holding) return;
      replayDue = true;
      catchUp().catch((error: unknown) => options.onError?.(error));
    }, retryMs);
    retryTimer.unref();
    retryMs = Math.min(retryMs * 2, REPLAY_RETRY_MAX_MS);
  }

  const isFirstItem = (m: LiveMessage) => splitMessageId(m.id).index === 0;
  const deliver = (message: LiveMessage): boolean => {
    if (lastSent !== undefined && compareMessageIds(message.id, lastSent) <= 0) return true;
    lastSent = message.id;
    return sink.message(message);
  };
  const warn = () => {
    if (warned) return;
    warned = true;
    sink.warning();
  };

  const readPage = (afterId: string | undefined): Promise<Replay> => {
    const page = bus.replay(agentId, afterId, REPLAY_PAGE_BATCHES);
    // a page read ahead may be abandoned (the client left): its failure is nobody's
    page.catch(() => {});
    return page;
  };

  async function catchUp(): Promise<void> {
    if (replaying) return;
    replaying = true;
    try {
      // Again at once only if `connected` came while a failing attempt was in flight.
      while (replayDue && !closed) {
        replayDue = false;
        // Page by page, reading the next page from the bus while this one is sent, so at most
        // two pages are in memory; each page resumes after the last message of the one before.
        let afterId = lastSent ?? resumeFrom;
        let next = readPage(afterId);
        let complete = false;
        while (!complete) {
          let replay: Replay;
          try {
            replay = await next;
          } catch (error) {
            if (closed) return;
            options.onError?.(error);
            warn();
            break;
          }
          if (replay.resumed) lastSent ??= afterId;
          complete = replay.complete;
          afterId = replay.messages.at(-1)?.id ?? afterId;
          if (sink.ended()) return;
          if (!complete) next = readPage(afterId);
          for (const message of replay.messages) {
            if (overflowed || closed || sink.ended()) return;
            if (!deliver(message)) await sink.drained();
          }
        }
        // A page failed: the replay is due again (on `connected`, or on this stream's own
        // backoff), from the last message sent.
        if (!complete) {
          retryLater();
          continue;
        }
        retryMs = firstRetryMs;
        clearTimeout(retryTimer);
        retryTimer = undefined;
        while (held.length > 0 && !overflowed && !closed) {
          const message = held.shift() as LiveMessage;
          if (isFirstItem(message)) heldBatches--;
          if (!deliver(message)) await sink.drained();
        }
        holding = false;
        return;
      }
    } finally {
      replaying = false;
    }
  }

  const subscription = await bus.subscribe(agentId, {
    message: (m) => {
      if (closed) return;
      if (!holding) {
        deliver(m);
        return;
      }
      if (overflowed) return;
      held.push(m);
      if (isFirstItem(m)) heldBatches++;
      if (heldBatches > options.maxHeld) {
        overflowed = true;
        sink.overflow();
      }
    },
    status: (status) => {
      if (closed) return;
      if (status === 'interrupted') {
        warn();
        return;
      }
      warned = false;
      if (!holding) return;
      replayDue = true;
      catchUp().catch((error: unknown) => options.onError?.(error));
    },
  });
  await catchUp();
  return {
    unsubscribe() {
      if (closed) return;
      closed = true;
      clearTimeout(retryTimer);
      held.length = 0;
      subscription.unsubscribe();
    },
  };
}
