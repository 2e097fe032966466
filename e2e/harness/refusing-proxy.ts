import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';

/**
 * An HTTP proxy in front of the service that answers some batch requests itself with
 * `503 Service Unavailable` (`Retry-After: 1`, a problem body, as the service does when its store
 * is down) and forwards the others. `refuse(n)` decides for the n-th request (1-based).
 */
export class RefusingProxy {
  private server: http.Server | undefined;
  /** The status each request got, in order. */
  readonly statuses: number[] = [];
  /** The batchId of each request, in order. */
  readonly batchIds: string[] = [];
  port = 0;

  constructor(
    private readonly target: string,
    private readonly refuse: (n: number) => boolean,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        try {
          const json = req.headers['content-encoding'] === 'gzip' ? gunzipSync(body) : body;
          this.batchIds.push(
            String((JSON.parse(json.toString('utf8')) as { batchId?: unknown }).batchId),
          );
        } catch {
          this.batchIds.push('(unreadable)');
        }
        if (this.refuse(this.statuses.length + 1)) {
          this.statuses.push(503);
          res.writeHead(503, { 'retry-after': '1', 'content-type': 'application/problem+json' });
          res.end(JSON.stringify({ status: 503, detail: 'The trace store is unreachable.' }));
          return;
        }
        const upstream = http.request(
          new URL(req.url ?? '/', this.target),
          { method: req.method, headers: req.headers },
          (answer) => {
            this.statuses.push(answer.statusCode ?? 0);
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            answer.pipe(res);
          },
        );
        upstream.on('error', () => res.destroy());
        upstream.end(body);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    server?.closeAllConnections();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
