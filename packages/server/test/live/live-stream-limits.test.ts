import net from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeBuses, type BusName } from '../harness/engines.js';
import { send } from '../harness/http.js';
import { startTestServer, type TestServer } from '../harness/test-server.js';
import { runBatch } from '../fixtures/batches.js';
import {
  largeBatch,
  liveDriver,
  liveUrl,
  newUser,
  traceCount,
  traceIds,
  hasTrace,
  until,
  within,
} from './live-helpers.js';

/**
 * GET /v1/agents/:id/live at its limits, on each live bus: a client that stops reading is cut
 * off without costing the others anything, and shutdown ends every stream.
 */
describeBuses('GET /v1/agents/:id/live, slow clients and shutdown [%s]', (bus: BusName) => {
  /** Streams are cut off once 4 KB waits for the client (LIVE_MAX_QUEUE_BYTES). */
  let server: TestServer;
  const { watch, post, closeAll } = liveDriver(() => server);

  beforeAll(async () => {
    server = await startTestServer('pglite', { live: { maxQueueBytes: 4096 } }, { bus });
  });
  // Streams are not aborted between tests: fetch opens a spare connection after an aborted
  // stream, which the shutdown test would wait for. The shutdown test ends them all.
  afterAll(async () => {
    closeAll();
    await server?.close();
  });

  it('disconnects a client that does not read, while one that reads gets every batch', async () => {
    const agent = await server.createAgent();
    const slowToken = await server.userToken(newUser(), agent.agentId);
    // a raw socket that sends the request, reads the response head, then stops reading
    const socket = net.connect(Number(new URL(server.url).port), '127.0.0.1');
    let received = '';
    let closed = false;
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('error', () => {});
    const socketClosed = new Promise<void>((resolve) =>
      socket.on('close', () => {
        closed = true;
        resolve();
      }),
    );
    socket.write(
      `GET /v1/agents/${agent.agentId}/live HTTP/1.1\r\n` +
        `Host: 127.0.0.1\r\nAuthorization: Bearer ${slowToken}\r\n` +
        'Accept: text/event-stream\r\n\r\n',
    );
    try {
      await until(() => received.includes(': connected'), 'the stream to open');
      expect(received.startsWith('HTTP/1.1 200')).toBe(true);
      socket.pause();

      const reader = await watch(agent.agentId);
      expect(reader.status).toBe(200);

      // 64 KB batches until the server has given up on the socket (the kernel buffers a few MB
      // first), then a few more
      const posted: string[] = [];
      const postLarge = async () => {
        const batch = largeBatch(64 * 1024);
        await post(agent, batch.body);
        posted.push(batch.trace.id);
      };
      while (server.streams.size > 1 && posted.length < 300) {
        await Promise.all([postLarge(), postLarge()]);
      }
      for (let i = 0; i < 3; i++) await postLarge();
      const lastPosted = posted.at(-1) as string;

      await reader.waitFor((c) => traceCount(c) >= posted.length, 15_000, 'every batch');
      expect(new Set(traceIds(reader))).toEqual(new Set(posted));
      expect(reader.traces()).toHaveLength(posted.length);
      expect(reader.isEnded).toBe(false);

      // reading again, the slow socket finds the server closed it, without the later batches
      socket.resume();
      await within(socketClosed, 5_000, 'the server closing the slow connection');
      expect(closed).toBe(true);
      expect(received).not.toContain(lastPosted);

      // the server is fine: health, ingest and new streams
      expect((await send(server.url, '/healthz')).status).toBe(200);
      const next = runBatch();
      await post(agent, next.body);
      await reader.waitFor((c) => hasTrace(c, next.trace.id), 5_000, 'a later batch');
      const another = await watch(agent.agentId, {
        headers: { 'last-event-id': reader.traces().at(-1)!.id as string },
      });
      expect(another.status).toBe(200);
      await another.waitFor((c) => c.comments.includes('connected'), 5_000, 'a new stream');
    } finally {
      socket.destroy();
    }
  });

  // last: it closes the server
  it('shutdown ends open streams promptly, well before the shutdown deadline', async () => {
    const agent = await server.createAgent();
    const batch = runBatch();
    await post(agent, batch.body);
    const streams = [await watch(agent.agentId), await watch(agent.agentId)];
    for (const sse of streams) await sse.waitFor((c) => traceCount(c) === 1, 5_000, 'the replay');

    const started = Date.now();
    const closing = server.close();
    await within(Promise.all(streams.map((s) => s.ended)), 2_000, 'ending the streams');
    await within(closing, 3_000, 'closing the server');
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(server.config.process.shutdownTimeoutMs).toBeGreaterThanOrEqual(10_000);
    // and it is gone
    await expect(fetch(liveUrl(server, agent.agentId))).rejects.toThrow();
  });
});
