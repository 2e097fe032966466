/** One Server-Sent Event as a browser's EventSource would see it. */
export interface SseEvent {
  event: string;
  data: string;
  id: string | undefined;
}

/**
 * A Server-Sent Events client over a real socket (fetch + a streaming parser). It records
 * comments, `retry:` hints and events, and lets a test wait for what it expects.
 */
export class SseClient {
  readonly events: SseEvent[] = [];
  readonly comments: string[] = [];
  retry: number | undefined;
  status = 0;
  headers: Headers | undefined;
  /** Resolves when the server ends the stream (or the connection breaks). */
  readonly ended: Promise<void>;
  private readonly abort = new AbortController();
  private waiters: (() => void)[] = [];
  private endedFlag = false;
  private resolveEnded: () => void = () => {};

  private constructor() {
    this.ended = new Promise((resolve) => (this.resolveEnded = resolve));
  }

  /** Opens the stream; resolves once the response headers are in. */
  static async open(
    url: string,
    token: string | undefined,
    headers: Record<string, string> = {},
  ): Promise<SseClient> {
    const client = new SseClient();
    const response = await fetch(url, {
      headers: {
        accept: 'text/event-stream',
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...headers,
      },
      signal: client.abort.signal,
    });
    client.status = response.status;
    client.headers = response.headers;
    if (response.status !== 200 || !response.body) {
      client.body = await response.text().catch(() => '');
      client.finish();
      return client;
    }
    void client.consume(response.body);
    return client;
  }

  /** The body of a non-200 answer. */
  body = '';

  get isEnded(): boolean {
    return this.endedFlag;
  }

  /** Events named `trace`, with their data parsed. */
  traces(): { id: string | undefined; item: any }[] {
    return this.events
      .filter((e) => e.event === 'trace')
      .map((e) => ({ id: e.id, item: JSON.parse(e.data) }));
  }

  /** Waits until `predicate` holds (checked on every event), or fails after `timeoutMs`. */
  async waitFor(
    predicate: (client: SseClient) => boolean,
    timeoutMs = 5_000,
    what = 'condition',
  ): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this)) {
      const left = deadline - Date.now();
      if (left <= 0 || (this.endedFlag && !predicate(this)))
        throw new Error(`SSE: timed out waiting for ${what}; got ${this.events.length} events`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 100));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.abort.abort();
  }

  private finish(): void {
    this.endedFlag = true;
    this.resolveEnded();
    this.notify();
  }

  private notify(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }

  private async consume(body: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = '';
    let event = { event: '', data: [] as string[], id: undefined as string | undefined };
    try {
      for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let newline: number;
        while ((newline = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, newline).replace(/\r$/, '');
          buffer = buffer.slice(newline + 1);
          if (line === '') {
            if (event.data.length > 0 || event.event)
              this.events.push({
                event: event.event || 'message',
                data: event.data.join('\n'),
                id: event.id,
              });
            event = { event: '', data: [], id: undefined };
            this.notify();
            continue;
          }
          if (line.startsWith(':')) {
            this.comments.push(line.slice(1).trim());
            this.notify();
            continue;
          }
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (field === 'event') event.event = value;
          else if (field === 'data') event.data.push(value);
          else if (field === 'id') event.id = value;
          else if (field === 'retry') this.retry = Number(value);
        }
      }
    } catch {
      // aborted by close(), or the connection broke: both end the stream
    }
    this.finish();
  }
}
