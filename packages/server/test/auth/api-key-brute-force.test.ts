import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateApiKey } from '../../src/auth/secrets.js';
import { runBatch } from '../fixtures/batches.js';
import { describeEngines } from '../harness/engines.js';
import { isProblem, postBatch, send, type HttpResult } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { sleep } from '../harness/wait.js';

const MAX_FAILURES = 5;
/** Short, so the test sees the window end; long enough for the requests inside it. */
const WINDOW_MS = 5_000;

/** A counter as GET /metrics shows it (0 while it has no sample). */
async function counter(url: string, series: string): Promise<number> {
  const res = await send(url, '/metrics');
  const line = res.text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

const UNKNOWN_LOOKUPS = 'flightlog_api_key_lookups_total{result="unknown"}';
const REFUSED = 'flightlog_api_key_guesses_refused_total';

function expectTooManyRequests(res: HttpResult): number {
  expect(isProblem(res, 429)).toBe(true);
  expect(res.body.type).toBe('urn:flightlog:problem:too-many-requests');
  expect(res.headers.get('www-authenticate')).toBeNull();
  const retryAfter = Number(res.headers.get('retry-after'));
  expect(Number.isInteger(retryAfter)).toBe(true);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(WINDOW_MS / 1_000);
  return retryAfter;
}

describeEngines('API key brute force [%s]', (engine) => {
  let server: TestServer;
  let agent: TestAgent;
  beforeAll(async () => {
    server = await startTestServer(engine, {
      auth: { apiKeyMaxFailures: MAX_FAILURES, apiKeyFailureWindowMs: WINDOW_MS },
    });
    agent = await server.createAgent({ name: 'behind the same NAT' });
    // the agent was working before the guessing began
    expect((await postBatch(server.url, agent.apiKey, runBatch().body)).status).toBe(202);
  });
  afterAll(() => server.close());

  it('answers 429 with Retry-After once an address failed too often, without asking the store; valid keys still pass; 401 again after the window', async () => {
    const lookupsBefore = await counter(server.url, UNKNOWN_LOOKUPS);
    for (let i = 0; i < MAX_FAILURES; i++) {
      const res = await postBatch(server.url, generateApiKey(), runBatch().body);
      expect(isProblem(res, 401)).toBe(true);
    }
    expect(await counter(server.url, UNKNOWN_LOOKUPS)).toBe(lookupsBefore + MAX_FAILURES);

    // every further wrong key, fresh or repeated, on either route, is refused unexamined
    expectTooManyRequests(await postBatch(server.url, generateApiKey(), runBatch().body));
    expectTooManyRequests(await postBatch(server.url, 'flk_not-even-a-key', runBatch().body));
    expectTooManyRequests(
      await send(server.url, '/v1/traces/x/complete', undefined, {
        method: 'POST',
        token: generateApiKey(),
      }),
    );
    // a forwarded-for header cannot buy a fresh address: the app trusts no proxy
    const retryAfter = expectTooManyRequests(
      await postBatch(server.url, generateApiKey(), runBatch().body, {
        headers: { 'x-forwarded-for': '198.51.100.23' },
      }),
    );
    expect(await counter(server.url, UNKNOWN_LOOKUPS)).toBe(lookupsBefore + MAX_FAILURES);
    expect(await counter(server.url, REFUSED)).toBe(4);

    // the agent behind the same address keeps ingesting
    const run = runBatch();
    expect((await postBatch(server.url, agent.apiKey, run.body)).status).toBe(202);
    const completed = await send(server.url, `/v1/traces/${run.trace.id}/complete`, undefined, {
      method: 'POST',
      token: agent.apiKey,
    });
    expect(completed.status).toBe(200);
    // a request with no key guesses nothing: still the plain 401
    expect(isProblem(await send(server.url, '/v1/traces/batch', runBatch().body), 401)).toBe(true);

    await sleep(retryAfter * 1_000);
    const res = await postBatch(server.url, generateApiKey(), runBatch().body);
    expect(isProblem(res, 401)).toBe(true);
    expect(await counter(server.url, UNKNOWN_LOOKUPS)).toBe(lookupsBefore + MAX_FAILURES + 1);
  });
});

describeEngines('API key brute force behind a trusted proxy [%s]', (engine) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(engine, {
      auth: { apiKeyMaxFailures: MAX_FAILURES, apiKeyFailureWindowMs: WINDOW_MS },
      http: {
        // the test's own address is the proxy
        trustProxy: ['127.0.0.1', '::1'],
      },
    });
  });
  afterAll(() => server.close());

  const guess = (client: string) =>
    postBatch(server.url, generateApiKey(), runBatch().body, {
      headers: { 'x-forwarded-for': client },
    });

  it('counts each client the proxy forwards for, not the proxy', async () => {
    for (let i = 0; i < MAX_FAILURES; i++)
      expect(isProblem(await guess('198.51.100.1'), 401)).toBe(true);
    expectTooManyRequests(await guess('198.51.100.1'));
    // another client behind the same proxy has its own budget
    expect(isProblem(await guess('198.51.100.2'), 401)).toBe(true);
  });
});

describeEngines('admin token brute force [%s]', (engine) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(engine, {
      auth: { apiKeyMaxFailures: MAX_FAILURES, apiKeyFailureWindowMs: WINDOW_MS },
    });
  });
  afterAll(() => server.close());

  const createAgent = (token: string) =>
    send(server.url, '/admin/v1/agents', { name: 'guessed' }, { method: 'POST', token });
  const agentCount = async () => {
    const [row] = await server.store.sql.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM agents',
    );
    return row?.n;
  };

  it('answers 429 once an address sent wrong admin tokens too often, even to the right token, until the window ends', async () => {
    const agentsBefore = await agentCount();
    for (let i = 0; i < MAX_FAILURES; i++)
      expect(isProblem(await createAgent(`wrong-admin-token-${i}-padding`), 401)).toBe(true);
    // a request without a token guesses nothing
    expect(isProblem(await send(server.url, '/admin/v1/agents', {}), 401)).toBe(true);

    expectTooManyRequests(await createAgent('yet-another-wrong-admin-token'));
    // the right token is not even compared: a different answer would tell the guesser it won
    const retryAfter = expectTooManyRequests(await createAgent(server.adminToken));
    expect(await agentCount()).toBe(agentsBefore);
    expect(await counter(server.url, 'flightlog_admin_token_guesses_refused_total')).toBe(2);
    // wrong API keys from the same address have their own budget
    expect(isProblem(await postBatch(server.url, generateApiKey(), runBatch().body), 401)).toBe(
      true,
    );

    await sleep(retryAfter * 1_000);
    expect((await createAgent(server.adminToken)).status).toBe(201);
    expect(await agentCount()).toBe((agentsBefore ?? 0) + 1);
  });
});
