import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request the fake provider received. */
export interface UpstreamRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: unknown;
}

/** One Server-Sent Event: `data` is sent as JSON unless it is a string. */
export interface SseEvent {
  event?: string;
  data: unknown;
}

/** What the fake provider answers one request with. */
export interface UpstreamReply {
  status?: number;
  headers?: Record<string, string>;
  /** A JSON body. */
  json?: unknown;
  /** A `text/event-stream` body, event by event. */
  sse?: SseEvent[];
  /** Milliseconds between two events. */
  gapMs?: number;
  /** Keep the connection open after the events (the caller aborts it). */
  hang?: boolean;
}

/**
 * A model provider's HTTP API on a loopback port, answering what the test scripts: OpenAI's and
 * Anthropic's JSON and SSE bodies (see provider-replies.ts). The real SDKs point their baseURL
 * here; nothing goes over the network. Every request is kept, body parsed.
 */
export class FakeUpstream {
  readonly requests: UpstreamRequest[] = [];
  /** Connections the caller closed before the reply ended (an abort reached the server). */
  closedEarly = 0;
  private readonly server: http.Server;
  private port = 0;

  constructor(public reply: (request: UpstreamRequest) => UpstreamReply) {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown;
        try {
          body = text === '' ? undefined : JSON.parse(text);
        } catch {
          body = text;
        }
        const request = {
          method: req.method ?? '',
          path: req.url ?? '',
          headers: req.headers,
          body,
        };
        this.requests.push(request);
        void this.answer(this.reply(request), res);
      });
    });
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async answer(reply: UpstreamReply, res: http.ServerResponse): Promise<void> {
    const status = reply.status ?? 200;
    let ended = false;
    res.on('close', () => {
      if (!ended) this.closedEarly += 1;
    });
    if (reply.sse === undefined) {
      const body = JSON.stringify(reply.json ?? {});
      res.writeHead(status, {
        'content-type': 'application/json',
        'x-request-id': `req_${this.requests.length}`,
        ...reply.headers,
      });
      ended = true;
      res.end(body);
      return;
    }
    res.writeHead(status, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      ...reply.headers,
    });
    for (const event of reply.sse) {
      if (res.destroyed) return;
      const data = typeof event.data === 'string' ? event.data : JSON.stringify(event.data);
      res.write(`${event.event === undefined ? '' : `event: ${event.event}\n`}data: ${data}\n\n`);
      if (reply.gapMs !== undefined) await new Promise((r) => setTimeout(r, reply.gapMs));
    }
    if (reply.hang === true) return;
    ended = true;
    res.end();
  }
}
