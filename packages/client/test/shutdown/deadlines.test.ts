import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FlightlogClient } from '../../src/index.js';
import { SilentServer } from '../harness/loopback-server.js';
import { RecordingLogger } from '@flightlog/test-support';

describe('flush() and close() without timeoutMs wait flushTimeoutMs (a service that never answers)', () => {
  let silent: SilentServer;
  beforeAll(async () => {
    silent = await new SilentServer().start();
  });
  afterAll(() => silent.close());

  it('flush() gives up waiting after flushTimeoutMs, close() too, then drops and counts what is left', async () => {
    const logger = new RecordingLogger();
    const client = new FlightlogClient({
      apiKey: 'flk_k',
      ingestUrl: silent.url,
      logger,
      flushOnExit: false,
      flushTimeoutMs: 300,
    });
    client.startSession({ inputSummary: 'hung' }).toolCall({ name: 'a' });
    let started = performance.now();
    expect(await client.flush()).toEqual({ timedOut: true });
    const flushMs = performance.now() - started;
    started = performance.now();
    expect(await client.close()).toEqual({ timedOut: true });
    const closeMs = performance.now() - started;
    for (const ms of [flushMs, closeMs]) {
      expect(ms).toBeGreaterThanOrEqual(295);
      expect(ms).toBeLessThan(1_300);
    }
    expect(
      logger.matching('close(): not everything was delivered within 300 ms; 1 events dropped'),
    ).toHaveLength(1);
    expect(client.stats()).toMatchObject({ droppedEvents: 1, deliveredEvents: 0 });
  });
});
