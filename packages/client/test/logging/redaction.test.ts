import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FlightlogClient } from '../../src/index.js';
import { WarningChannel } from '../../src/logger.js';
import { redactUrls } from '../../src/redact.js';
import { LoopbackServer } from '../harness/loopback-server.js';
import { RecordingLogger } from '@flightlog/test-support';

const SECRETS = ['hunter2', 's3cr3t-key', 'tok-123', 'p4ss', 'sig-abc'];
const everything = (logger: RecordingLogger) => JSON.stringify(logger.lines);

describe('no credential of a URL reaches a log line', () => {
  it('a refused ingestUrl is echoed without its password or secret query parameters', () => {
    const logger = new RecordingLogger();
    for (const ingestUrl of [
      'http://admin:hunter2@ingest.example:8080/flightlog',
      'https://ingest.example/?api_key=s3cr3t-key&region=eu',
      'https://ingest.example/path?token=tok-123',
      // long enough that a cut at 40 characters would fall inside the password
      'http://a-rather-long-user-name:p4ss-word-that-goes-on-and-on@ingest.example',
      'ftp://user:hunter2@ingest.example',
      'http://user:hunter2@[::1', // not even a URL
      // no `://` to go by, yet each still carries the secret (the last one `new URL` even reads)
      'admin:hunter2@ingest.example',
      'ingest.example/?api_key=s3cr3t-key',
      'http//u:hunter2@ingest.example',
      'http:/u:hunter2@ingest.example',
    ]) {
      const client = new FlightlogClient({ apiKey: 'flk_k', ingestUrl, logger });
      expect(client.enabled).toBe(false);
    }
    expect(logger.matching('ingestUrl must be an http(s) URL')).toHaveLength(10);
    for (const secret of SECRETS) expect(everything(logger)).not.toContain(secret);
    expect(everything(logger)).toContain('ingest.example'); // still says which address it was
    expect(everything(logger)).toContain('region=eu'); // only secret-looking parameters go
  });

  it('a redirect to an address with credentials is reported without them', async () => {
    const server = await new LoopbackServer(() => ({
      status: 307,
      headers: { location: 'https://user:hunter2@elsewhere.example/v1/traces/batch?sig=sig-abc' },
    })).start();
    try {
      const logger = new RecordingLogger();
      const client = new FlightlogClient({
        apiKey: 'flk_k',
        ingestUrl: server.url,
        logger,
        flushOnExit: false,
      });
      client.startSession({ inputSummary: 'moved' }).toolCall({ name: 'a' });
      await client.close();
      expect(logger.matching('redirected to https://***@elsewhere.example')).toHaveLength(1);
      for (const secret of SECRETS) expect(everything(logger)).not.toContain(secret);
    } finally {
      await server.close();
    }
  });

  it('every line goes through the redaction: message and context', () => {
    const logger = new RecordingLogger();
    const warnings = new WarningChannel(logger);
    warnings.warn('proxy at http://u:hunter2@proxy.example:3128 refused', {
      detail: 'see https://ingest.example/a?x=1&access_token=tok-123#frag',
      status: 502,
    });
    expect(logger.lines).toEqual([
      {
        message: 'proxy at http://***@proxy.example:3128 refused',
        context: { detail: 'see https://ingest.example/a?x=1&access_token=***#frag', status: 502 },
      },
    ]);
    expect(redactUrls('no url here: 42')).toBe('no url here: 42');
    expect(redactUrls('https://h/?password=p4ss&Signature=sig-abc&page=2')).toBe(
      'https://h/?password=***&Signature=***&page=2',
    );
  });
});

describe('through a real request', () => {
  let server: LoopbackServer;
  beforeAll(async () => {
    server = await new LoopbackServer(() => ({
      status: 400,
      headers: { 'content-type': 'application/problem+json' },
      body: { detail: 'Fetch https://x:hunter2@registry.example/?key=s3cr3t-key failed.' },
    })).start();
  });
  afterAll(() => server.close());

  it('a problem detail from the service that holds a URL is redacted too', async () => {
    const logger = new RecordingLogger();
    const client = new FlightlogClient({
      apiKey: 'flk_k',
      ingestUrl: server.url,
      logger,
      flushOnExit: false,
    });
    client.startSession({ inputSummary: 'refused' }).toolCall({ name: 'a' });
    await client.close();
    expect(logger.matching('refused a batch with 400')).toHaveLength(1);
    for (const secret of SECRETS) expect(everything(logger)).not.toContain(secret);
  });
});
