import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpTransport } from '../../src/http-transport.js';

/**
 * The HTTP transport against a scripted loopback server (the real service is exercised by the
 * end-to-end tests; these are the answers it gives rarely: 429, 503, redirects, silence).
 */
describe('HTTP transport: how answers are classified', () => {
  let server: http.Server;
  let url = '';
  const seen: { path: string; headers: http.IncomingHttpHeaders }[] = [];
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      seen.push({ path: req.url ?? '', headers: req.headers });
      req.resume();
      req.on('end', () => {
        const mode = req.headers['x-test-mode'] ?? new URL(req.url ?? '/', 'http://x').pathname;
        const status = /\/status-(\d{3})/.exec(String(mode))?.[1];
        if (status !== undefined) {
          res.writeHead(Number(status));
          res.end();
        } else if (String(mode).includes('busy')) {
          res.writeHead(429, { 'retry-after': '3', 'content-type': 'application/problem+json' });
          res.end(JSON.stringify({ detail: 'Too many live streams.' }));
        } else if (String(mode).includes('down')) {
          res.writeHead(503, { 'retry-after': '1' });
          res.end(JSON.stringify({ detail: 'The database is unreachable.' }));
        } else if (String(mode).includes('moved')) {
          res.writeHead(301, { location: 'https://elsewhere.example/v1/traces/batch' });
          res.end();
        } else if (String(mode).includes('silent')) {
          // never answers
        } else if (String(mode).includes('bad')) {
          res.writeHead(400, { 'content-type': 'application/problem+json' });
          res.end(
            JSON.stringify({
              detail: 'The request does not match the schema.',
              errors: [
                { pointer: '/items/0/trace/status', detail: 'must be one of: running' },
                {
                  pointer: '/items/2/events/1/payload',
                  detail: 'must not nest deeper than 64 levels',
                },
              ],
            }),
          );
        } else {
          res.writeHead(202, { 'idempotent-replayed': 'true', 'flightlog-verify': 'verified' });
          res.end('{"traceId":"t"}');
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const transport = (prefix = '', timeoutMs = 2_000) =>
    new HttpTransport({ ingestUrl: url + prefix, apiKey: 'flk_k', timeoutMs, userAgent: 'test' });
  const signal = () => new AbortController().signal;

  it('posts the gzip body with the key, and reads 202, Idempotent-Replayed and Flightlog-Verify', async () => {
    const outcome = await transport('/ok').sendBatch(Buffer.from('x'), signal());
    expect(outcome).toEqual({ kind: 'ok', status: 202, replayed: true, verify: 'verified' });
    const request = seen.at(-1);
    expect(request?.path).toBe('/ok/v1/traces/batch');
    expect(request?.headers).toMatchObject({
      authorization: 'Bearer flk_k',
      'content-type': 'application/json',
      'content-encoding': 'gzip',
    });
  });

  it('429 and 5xx are retryable, with Retry-After in milliseconds', async () => {
    expect(await transport('/busy').sendBatch(Buffer.from('x'), signal())).toEqual({
      kind: 'retryable',
      reason: 'HTTP 429: Too many live streams.',
      retryAfterMs: 3_000,
    });
    expect(await transport('/down').sendBatch(Buffer.from('x'), signal())).toMatchObject({
      kind: 'retryable',
      retryAfterMs: 1_000,
    });
  });

  it('408, 429 and every 5xx are retryable; 4xx others and 3xx are not', async () => {
    for (const status of [408, 429, 500, 502, 503, 504, 599])
      expect(await transport(`/status-${status}`).sendBatch(Buffer.from('x'), signal())).toEqual({
        kind: 'retryable',
        reason: `HTTP ${status}: HTTP ${status}`,
      });
    for (const status of [400, 401, 403, 404, 409, 413, 422, 304])
      expect(
        await transport(`/status-${status}`).sendBatch(Buffer.from('x'), signal()),
      ).toMatchObject({ kind: 'failed', status });
  });

  it('other 4xx fail with the problem detail, the first field error and every pointer; redirects are not followed', async () => {
    expect(await transport('/bad').sendBatch(Buffer.from('x'), signal())).toEqual({
      kind: 'failed',
      status: 400,
      detail:
        'The request does not match the schema. (/items/0/trace/status: must be one of: running)',
      fieldErrors: [
        { pointer: '/items/0/trace/status', detail: 'must be one of: running' },
        { pointer: '/items/2/events/1/payload', detail: 'must not nest deeper than 64 levels' },
      ],
    });
    expect(await transport('/moved').sendBatch(Buffer.from('x'), signal())).toMatchObject({
      kind: 'failed',
      status: 301,
      detail: expect.stringContaining('https://elsewhere.example'),
    });
  });

  it('a silent service times out, an abort ends the request, a closed port is a network error: all retryable', async () => {
    expect(await transport('/silent', 150).sendBatch(Buffer.from('x'), signal())).toEqual({
      kind: 'retryable',
      reason: 'no answer within 150 ms',
    });
    const controller = new AbortController();
    const pending = transport('/silent').sendBatch(Buffer.from('x'), controller.signal);
    setTimeout(() => controller.abort(), 50);
    expect(await pending).toEqual({ kind: 'retryable', reason: 'aborted' });
    const closed = new HttpTransport({
      ingestUrl: 'http://127.0.0.1:9',
      apiKey: 'k',
      timeoutMs: 2_000,
      userAgent: 't',
    });
    expect(await closed.sendBatch(Buffer.from('x'), signal())).toMatchObject({
      kind: 'retryable',
      reason: expect.stringContaining('ECONNREFUSED'),
    });
  });
});
