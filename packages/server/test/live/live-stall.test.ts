import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { describeBuses } from '../harness/engines.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { liveDriver, until, within } from './live-helpers.js';

/** LIVE_STALL_TIMEOUT_MS of these servers. */
const STALL_MS = 1_000;
/** A replay far larger than what the kernel buffers for a socket that does not read. */
const BATCHES = 400;
const BATCH_BYTES = 30_000;

describeBuses('a client that stops reading during the replay [%s]', (bus) => {
  let server: TestServer;
  let agent: TestAgent;
  let token: string;
  const { watch, closeAll } = liveDriver(() => server);

  beforeAll(async () => {
    // one stream per user, so a slot that is not released shows as a 429
    server = await startTestServer(
      'pglite',
      { live: { stallTimeoutMs: STALL_MS, maxQueueBytes: 64 * 1024, maxStreamsPerUser: 1 } },
      { bus },
    );
    agent = await server.createAgent();
    token = await server.userToken('stalling-reader', agent.agentId);
    const filler = 'x'.repeat(BATCH_BYTES);
    for (let i = 0; i < BATCHES; i++)
      await server.bus.publish(agent.agentId, [JSON.stringify({ n: i, filler })]);
  });
  afterAll(async () => {
    closeAll();
    server?.app.server.closeAllConnections();
    await server?.close();
  });

  it('is disconnected about LIVE_STALL_TIMEOUT_MS after it stopped, and its slot is released', async () => {
    expect(server.config.live.stallTimeoutMs).toBe(STALL_MS);
    const socket = net.connect(Number(new URL(server.url).port), '127.0.0.1');
    socket.on('error', () => {});
    let received = '';
    let stoppedAt = 0;
    // stop reading for good as soon as the stream is open: the replay then waits for a drain
    // that never comes
    const onData = (chunk: Buffer) => {
      received += chunk.toString('latin1');
      if (!received.includes(': connected')) return;
      socket.off('data', onData);
      socket.pause();
      stoppedAt = Date.now();
    };
    socket.on('data', onData);
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write(
      `GET /v1/agents/${agent.agentId}/live HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
        `Authorization: Bearer ${token}\r\nAccept: text/event-stream\r\n\r\n`,
    );
    try {
      await until(() => stoppedAt > 0, 'the stream to open');
      expect(received.startsWith('HTTP/1.1 200')).toBe(true);
      expect(server.streams.size).toBe(1);
      await until(
        () => server.streams.size === 0,
        'the server to drop the stream',
        3 * STALL_MS + 3_000,
      );
      const tookMs = Date.now() - stoppedAt;
      // not at once; the server's clock starts when its writes stop draining, which on a busy
      // machine can be a few hundred ms before this client got round to pausing
      expect(tookMs).toBeGreaterThanOrEqual(STALL_MS / 2);
      expect(tookMs).toBeLessThan(STALL_MS + 3_000);
      // the socket finds it closed once it reads again
      socket.resume();
      await within(closed, 5_000, 'the connection to close');

      // the user's one slot is free again
      const next = await watch(agent.agentId, { token });
      expect(next.status, next.body).toBe(200);
      await next.waitFor((c) => c.comments.includes('connected'), 5_000, 'a new stream');
    } finally {
      socket.destroy();
    }
  }, 30_000);
});

describe('LIVE_STALL_TIMEOUT_MS', () => {
  it('defaults to 10 s, is read from the environment, and a wrong value names the variable', () => {
    expect(loadConfig({}).live.stallTimeoutMs).toBe(10_000);
    expect(loadConfig({ LIVE_STALL_TIMEOUT_MS: '2500' }).live.stallTimeoutMs).toBe(2_500);
    for (const wrong of ['soon', '1.5', '-1', '99', '600001']) {
      expect(() => loadConfig({ LIVE_STALL_TIMEOUT_MS: wrong }), wrong).toThrow(ConfigError);
      expect(() => loadConfig({ LIVE_STALL_TIMEOUT_MS: wrong }), wrong).toThrow(
        /LIVE_STALL_TIMEOUT_MS/,
      );
    }
  });
});
