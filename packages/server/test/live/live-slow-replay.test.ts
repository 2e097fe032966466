import net from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeBuses } from '../harness/engines.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';

const MESSAGE_BYTES = 20_000;
const MESSAGES = 200; // a 4 MB replay against a 64 KB queue limit

describeBuses('a replay to a slow reader [%s]', (bus) => {
  let server: TestServer;
  let agent: TestAgent;
  let token: string;
  beforeAll(async () => {
    server = await startTestServer('pglite', { live: { maxQueueBytes: 64 * 1024 } }, { bus });
    agent = await server.createAgent();
    token = await server.userToken('slow-reader', agent.agentId);
    const filler = 'x'.repeat(MESSAGE_BYTES);
    for (let i = 0; i < MESSAGES; i += 50)
      await server.bus.publish(
        agent.agentId,
        Array.from({ length: 50 }, (_, j) => JSON.stringify({ n: i + j, filler })),
      );
  });
  afterAll(() => server.close());

  it('is paced by the connection and arrives whole, instead of the reader being cut off', async () => {
    const { port } = new URL(server.url);
    const socket = net.connect(Number(port), '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(
      `GET /v1/agents/${agent.agentId}/live HTTP/1.1\r\nHost: x\r\n` +
        `Authorization: Bearer ${token}\r\nAccept: text/event-stream\r\n\r\n`,
    );
    // read about 1.3 MB/s: 64 KB every 50 ms, far slower than the server can write
    let received = '';
    let closed = false;
    socket.on('close', () => (closed = true));
    socket.pause();
    const deadline = Date.now() + 20_000;
    while (!closed && Date.now() < deadline && countTraces(received) < MESSAGES) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      let chunk: Buffer | null;
      let budget = 64 * 1024;
      while (budget > 0 && (chunk = socket.read() as Buffer | null) !== null) {
        received += chunk.toString();
        budget -= chunk.length;
      }
    }
    expect(closed).toBe(false);
    expect(countTraces(received)).toBe(MESSAGES);
    socket.destroy();
  }, 30_000);
});

function countTraces(text: string): number {
  return text.split('event: trace\n').length - 1;
}
