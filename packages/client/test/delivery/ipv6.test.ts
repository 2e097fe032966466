import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FlightlogClient } from '../../src/index.js';
import { LoopbackServer } from '../harness/loopback-server.js';
import { RecordingLogger } from '@flightlog/test-support';

/** Whether this machine has an IPv6 loopback to listen on (it should: then the test runs). */
async function ipv6Loopback(): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once('error', () => resolve(false));
    probe.listen(0, '::1', () => probe.close(() => resolve(true)));
  });
}

const available = await ipv6Loopback();

describe.skipIf(!available)('an ingestUrl with an IPv6 literal (a real server on [::1])', () => {
  let server: LoopbackServer;
  beforeAll(async () => {
    server = await new LoopbackServer(() => ({ status: 202, body: {} }), '::1').start();
  });
  afterAll(() => server.close());

  it('http://[::1]:port delivers: the brackets belong to the URL, not to the host name', async () => {
    expect(server.url).toMatch(/^http:\/\/\[::1\]:\d+$/);
    const logger = new RecordingLogger();
    const client = new FlightlogClient({
      apiKey: 'flk_k',
      ingestUrl: `${server.url}/prefix`,
      logger,
      flushOnExit: false,
    });
    client.startSession({ inputSummary: 'over IPv6' }).toolCall({ name: 'a' });
    // Before: every attempt failed with ENOTFOUND [::1].
    expect(await client.close({ timeoutMs: 5_000 })).toEqual({ timedOut: false });
    expect(logger.lines).toEqual([]);
    expect(client.stats()).toMatchObject({ deliveredEvents: 1, sentBatches: 1 });
    expect(server.batches().map((r) => r.path)).toEqual(['/prefix/v1/traces/batch']);
    expect(server.batches()[0]?.headers.host).toBe(server.url.slice('http://'.length));
  });
});
