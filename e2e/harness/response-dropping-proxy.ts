import net from 'node:net';

/**
 * A TCP proxy in front of the service that can lose answers: in `drop-responses` mode it
 * forwards each request to the service in full, then cuts the client's connection as soon as
 * the service starts answering. The client sees a broken connection although the service
 * stored its batch: the case that retries with the same batchId exist for.
 */
export class ResponseDroppingProxy {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  /** How many more answers to drop; 0 forwards everything. */
  dropNext = 0;
  /** Answers dropped so far. */
  dropped = 0;
  port = 0;

  constructor(private readonly targetPort: number) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    const server = net.createServer((client) => {
      const upstream = net.connect({ host: '127.0.0.1', port: this.targetPort });
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        socket.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream);
      upstream.on('data', (chunk: Buffer) => {
        if (this.dropNext > 0) {
          this.dropNext -= 1;
          this.dropped += 1;
          client.destroy();
          upstream.destroy();
          return;
        }
        client.write(chunk);
      });
      upstream.on('end', () => client.end());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.port = (server.address() as net.AddressInfo).port;
    this.server = server;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
