import net from 'node:net';

/**
 * A TCP proxy between the service and its database or Redis, so a test can cut the connection
 * (an outage the service cannot tell from a real one) and restore it, or stall it: connections
 * stay open but nothing gets through (a hung server, a network dropping packets) until released.
 */
export class TcpProxy {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  private readonly pairs = new Set<[net.Socket, net.Socket]>();
  private stalled = false;
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  async start(): Promise<void> {
    const server = net.createServer((client) => {
      const upstream = net.connect({ host: this.targetHost, port: this.targetPort });
      const pair: [net.Socket, net.Socket] = [client, upstream];
      this.pairs.add(pair);
      for (const socket of pair) {
        this.sockets.add(socket);
        socket.on('close', () => {
          this.sockets.delete(socket);
          this.pairs.delete(pair);
        });
        socket.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      if (this.stalled) {
        client.pause();
        upstream.pause();
      } else connect(pair);
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as net.AddressInfo).port;
    this.server = server;
  }

  /** Holds every byte in both directions; the connections stay open. */
  stall(): void {
    if (this.stalled) return;
    this.stalled = true;
    // unpiped as well as paused: a pipe resumes its source whenever its destination drains
    for (const [client, upstream] of this.pairs) {
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.pause();
      upstream.pause();
    }
  }

  /**
   * Lets what was held back flow on. Does nothing unless stalled: piping a connection twice
   * would deliver every byte twice (a Redis client then reads a reply it never asked for).
   */
  release(): void {
    if (!this.stalled) return;
    this.stalled = false;
    for (const pair of this.pairs) connect(pair);
  }

  /** Drops every open connection and refuses new ones until restore(). */
  async cut(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const socket of this.sockets) socket.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Listens again on the same port. */
  restore(): Promise<void> {
    return this.start();
  }

  close(): Promise<void> {
    return this.cut();
  }
}

function connect([client, upstream]: [net.Socket, net.Socket]): void {
  client.pipe(upstream);
  upstream.pipe(client);
}
