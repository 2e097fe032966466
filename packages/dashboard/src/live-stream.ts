import type { Event, Trace } from '@flightlog/protocol';
import { createParser } from 'eventsource-parser';
import { currentToken } from './session.js';

/** One `trace` message of an agent's live stream: a trace snapshot and the events it added. */
export interface LiveItem {
  trace: Trace;
  events: Event[];
}

/**
 * Whether `incoming` is an older snapshot of the run than `current` (fewer events, or running
 * after it finished): the stream replays the agent's recent batches first, and such a snapshot
 * must not undo what is shown, as the server does not let it overwrite the stored one.
 */
export const isOlderSnapshot = (incoming: Trace, current: Trace): boolean =>
  incoming.eventCount < current.eventCount ||
  (incoming.status === 'running' && current.status !== 'running');

export interface LiveHandlers {
  onItem(item: LiveItem): void;
  /** `interrupted` after a `warning` event or a lost connection; `live` once delivery resumes. */
  onState(state: 'connecting' | 'live' | 'interrupted' | 'ended', detail?: string): void;
  /** The stream missed updates (`resync`): what it shows must be read again from the read API. */
  onResync?(): void;
}

const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 10_000;

/**
 * Holds an agent's live stream (`GET /v1/agents/:id/live`) open, as `EventSource` would, but
 * with the identity token in the `Authorization` header (EventSource cannot send one, and a
 * token in a query string would land in logs). On a lost connection it reconnects with the last
 * event id it received in `Last-Event-ID`, so the server replays exactly what was missed: no
 * gap, no duplicate. A `401`/`403`/`404` ends it (the role was removed, the token expired).
 * Returns the function that closes it.
 */
export function openLiveStream(agentId: string, handlers: LiveHandlers): () => void {
  const abort = new AbortController();
  let lastEventId: string | undefined;
  let retryMs = RETRY_MIN_MS;

  const connect = async (): Promise<void> => {
    while (!abort.signal.aborted) {
      handlers.onState('connecting');
      let delivering = false;
      try {
        const token = currentToken();
        const response = await fetch(`/v1/agents/${encodeURIComponent(agentId)}/live`, {
          headers: {
            accept: 'text/event-stream',
            ...(token ? { authorization: `Bearer ${token}` } : {}),
            ...(lastEventId ? { 'last-event-id': lastEventId } : {}),
          },
          signal: abort.signal,
          cache: 'no-store',
        });
        if (response.status === 401 || response.status === 403 || response.status === 404) {
          handlers.onState('ended', response.status === 401 ? 'signed-out' : 'no-access');
          return;
        }
        if (!response.ok || !response.body)
          throw new Error(`live stream answered ${response.status}`);
        handlers.onState('live');
        delivering = true;
        retryMs = RETRY_MIN_MS;
        const parser = createParser({
          onEvent(message) {
            if (message.id) lastEventId = message.id;
            if (message.event === 'warning') {
              handlers.onState('interrupted', 'warning');
              return;
            }
            if (message.event === 'resync') {
              handlers.onResync?.();
              return;
            }
            if (message.event !== 'trace') return;
            let item: LiveItem;
            try {
              item = JSON.parse(message.data) as LiveItem;
            } catch {
              return; // not a batch item: nothing to show
            }
            // a trace after a warning means delivery has resumed
            handlers.onState('live');
            handlers.onItem(item);
          },
        });
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          parser.feed(value);
        }
      } catch {
        if (abort.signal.aborted) return;
      }
      if (abort.signal.aborted) return;
      handlers.onState('interrupted', delivering ? 'disconnected' : 'unreachable');
      await new Promise((resolve) => setTimeout(resolve, retryMs));
      retryMs = Math.min(RETRY_MAX_MS, retryMs * 2);
    }
  };
  void connect();
  return () => abort.abort();
}
