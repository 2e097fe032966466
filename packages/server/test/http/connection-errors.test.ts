import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawExchange, type RawExchange } from '../harness/raw-http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';

function expectProblem(exchange: RawExchange, status: number, type: string): void {
  expect(exchange.status).toBe(status);
  expect(exchange.headers['content-type']).toBe('application/problem+json');
  const problem = JSON.parse(exchange.body) as { status: number; type: string };
  expect(problem.status).toBe(status);
  expect(problem.type).toBe(`urn:flightlog:problem:${type}`);
}

// The HTTP layer only: no storage is touched, so one engine is enough.
describe('connection-level errors are problem+json, and slow senders are cut off', () => {
  let server: TestServer;
  let agent: TestAgent;
  beforeAll(async () => {
    server = await startTestServer('pglite', { http: { requestTimeoutMs: 1_500 } });
    agent = await server.createAgent();
  });
  afterAll(() => server.close());

  it('answers 408 to headers trickled slower than the timeout', async () => {
    const trickle = 'POST /v1/traces/batch HTTP/1.1\r\nHost: x\r\nX-Slow: abcdefghijklmnop'.split(
      '',
    );
    const exchange = await rawExchange(server.url, trickle, 100);
    expectProblem(exchange, 408, 'request-timeout');
    // the timeout plus Node's once-a-second check, not the headers' full 6 s of trickling
    expect(exchange.closedAfterMs).toBeLessThan(4_000);
  });

  it('answers 408 to a body trickled slower than the timeout, and stores nothing', async () => {
    const before = await server.store.sql.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM accepted_batches',
    );
    const head =
      `POST /v1/traces/batch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${agent.apiKey}\r\n` +
      'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n';
    const exchange = await rawExchange(server.url, [head, ...'{"batchId":"01'.split('')], 300);
    expectProblem(exchange, 408, 'request-timeout');
    expect(exchange.closedAfterMs).toBeLessThan(4_000);
    expect(
      await server.store.sql.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM accepted_batches',
      ),
    ).toEqual(before);
  });

  it('answers 431 to headers over the size limit', async () => {
    const exchange = await rawExchange(server.url, [
      `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
    ]);
    expectProblem(exchange, 431, 'headers-too-large');
  });

  it('answers 400 to bytes that are not HTTP', async () => {
    const exchange = await rawExchange(server.url, ['HELLO THERE\r\n\r\n']);
    expectProblem(exchange, 400, 'malformed-request');
  });

  it('answers problems, not the router’s own JSON, to a path segment longer than any id or not UTF-8', async () => {
    const long = await fetch(`${server.url}/v1/traces/${'a'.repeat(5_000)}`);
    expect(long.status).toBe(414);
    expect(long.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const problem = (await long.json()) as { type: string; detail: string };
    expect(problem.type).toBe('urn:flightlog:problem:uri-too-long');
    expect(problem.detail).not.toContain('aaaa');

    const broken = await fetch(`${server.url}/v1/traces/%E0%A4%A`);
    expect(broken.status).toBe(400);
    expect(broken.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(((await broken.json()) as { type: string }).type).toBe(
      'urn:flightlog:problem:malformed-request',
    );
  });
});
