import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { TcpProxy } from './tcp-proxy.js';

/** An echo server: what the proxy delivers, byte for byte, comes back. */
async function startEcho(): Promise<net.Server> {
  const server = net.createServer((socket) => socket.pipe(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

function collect(socket: net.Socket): { text: () => string } {
  let text = '';
  socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
  return { text: () => text };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 100));

describe('TcpProxy (the fault tests rest on it)', () => {
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  it('holds bytes while stalled and delivers each once however often it is released', async () => {
    const echo = await startEcho();
    closers.push(() => new Promise((resolve) => echo.close(() => resolve())));
    const proxy = new TcpProxy('127.0.0.1', (echo.address() as net.AddressInfo).port);
    await proxy.start();
    closers.push(() => proxy.close());
    const socket = net.connect(proxy.port, '127.0.0.1');
    closers.push(async () => void socket.destroy());
    const received = collect(socket);
    await new Promise((resolve) => socket.once('connect', resolve));

    socket.write('a');
    await settle();
    expect(received.text()).toBe('a');

    proxy.stall();
    proxy.stall();
    socket.write('b');
    await settle();
    expect(received.text()).toBe('a');

    proxy.release();
    proxy.release(); // a second release once piped every byte twice: replies nobody asked for
    await settle();
    socket.write('c');
    await settle();
    expect(received.text()).toBe('abc');
  });
});
