import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';

/** One request a {@link LoopbackServer} received. */
export interface ReceivedRequest {
  /** `performance.now()` when its body was complete. */
  at: number;
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  /** The body, gunzipped when it was gzip, parsed as JSON (undefined when it is not). */
  json: unknown;
  bytes: number;
}

/** What the server answers: status, headers, body (an object is sent as JSON). */
export interface ScriptedAnswer {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
}

/**
 * A real HTTP server on a loopback address that answers what the test scripts: the wrong and
 * hostile servers a client meets (413 to everything, 503 with odd Retry-After values, redirects).
 * Every request is recorded with the time it arrived.
 */
export class LoopbackServer {
  readonly requests: ReceivedRequest[] = [];
  private server: http.Server | undefined;
  private port = 0;

  constructor(
    /** Answers the n-th request (1-based); `undefined` never answers. */
    public answer: (
      request: ReceivedRequest,
      n: number,
    ) => ScriptedAnswer | undefined | Promise<ScriptedAnswer | undefined>,
    private readonly host = '127.0.0.1',
  ) {}

  get url(): string {
    return `http://${this.host.includes(':') ? `[${this.host}]` : this.host}:${this.port}`;
  }

  async start(): Promise<this> {
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        let json: unknown;
        try {
          const text = req.headers['content-encoding'] === 'gzip' ? gunzipSync(body) : body;
          json = JSON.parse(text.toString('utf8'));
        } catch {
          json = undefined;
        }
        const request: ReceivedRequest = {
          at: performance.now(),
          method: req.method ?? '',
          path: req.url ?? '',
          headers: req.headers,
          json,
          bytes: body.byteLength,
        };
        this.requests.push(request);
        void Promise.resolve(this.answer(request, this.requests.length)).then((answer) => {
          if (answer === undefined) return;
          const text =
            answer.body === undefined
              ? ''
              : typeof answer.body === 'string'
                ? answer.body
                : JSON.stringify(answer.body);
          res.writeHead(answer.status, answer.headers ?? {});
          res.end(text);
        });
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, this.host, () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
    return this;
  }

  /** Batch requests received, in order. */
  batches(): ReceivedRequest[] {
    return this.requests.filter((r) => r.path.endsWith('/v1/traces/batch'));
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/**
 * A TCP server that accepts connections, reads whatever comes and never answers: the service
 * that hangs (a stuck proxy, a process stopped in a debugger). Counts connections.
 */
export class SilentServer {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  connections = 0;
  port = 0;

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<this> {
    const server = net.createServer((socket) => {
      this.connections += 1;
      this.sockets.add(socket);
      socket.on('data', () => undefined);
      socket.on('error', () => undefined);
      socket.on('close', () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
    return this;
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const socket of this.sockets) socket.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
