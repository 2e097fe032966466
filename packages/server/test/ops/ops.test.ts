import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { changeConfig, loadConfig } from '../../src/config.js';
import { openStore } from '../../src/store/open-store.js';
import { Redis } from 'ioredis';
import { createRedisBus } from '../../src/live/redis-bus.js';
import {
  describeEngines,
  describeWithPostgres,
  describeWithRedis,
  disposeLocation,
  freshLocation,
  postgresUrl,
  redisUrl,
} from '../harness/engines.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import { TcpProxy } from '../harness/tcp-proxy.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { runBatch } from '../fixtures/batches.js';
import { waitFor } from '../harness/wait.js';

describeEngines('operations endpoints [%s]', (engine) => {
  let server: TestServer;
  let agent: TestAgent;
  beforeAll(async () => {
    server = await startTestServer(engine);
    agent = await server.createAgent();
  });
  afterAll(() => server.close());

  it('GET /healthz answers 200 while the process is up', async () => {
    const res = await send(server.url, '/healthz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok' });
  });

  it('GET /readyz answers 200 and names the engine when the store answers', async () => {
    const res = await send(server.url, '/readyz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ready', store: engine });
  });

  it('GET /metrics counts requests, batches, events and rejections by reason', async () => {
    await postBatch(server.url, agent.apiKey, runBatch({ events: 3 }).body);
    await postBatch(server.url, agent.apiKey, { items: [] });
    await postBatch(server.url, 'flk_nope', runBatch().body);
    const res = await send(server.url, '/metrics');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const metrics = res.text;
    expect(metrics).toMatch(/flightlog_batches_total\{outcome="accepted"\} [1-9]/);
    expect(metrics).toMatch(/flightlog_events_total [3-9]/);
    expect(metrics).toMatch(/flightlog_rejections_total\{reason="validation-failed"\} [1-9]/);
    expect(metrics).toMatch(/flightlog_rejections_total\{reason="unauthorized"\} [1-9]/);
    expect(metrics).toMatch(
      /flightlog_http_requests_total\{method="POST",route="\/v1\/traces\/batch",status="202"\} [1-9]/,
    );
    expect(metrics).toContain('flightlog_http_request_duration_seconds_bucket');
    expect(metrics).toContain('process_resident_memory_bytes');
  });

  it('GET /openapi.json is OpenAPI 3.1 generated from the validating schemas', async () => {
    const res = await send(server.url, '/openapi.json');
    expect(res.status).toBe(200);
    expect(res.body.openapi).toBe('3.1.0');
    const batch = res.body.paths['/v1/traces/batch'].post;
    const schema = batch.requestBody.content['application/json'].schema;
    expect(schema.required).toEqual(expect.arrayContaining(['batchId', 'items']));
    expect(schema.properties.items.minItems).toBe(1);
    expect(Object.keys(batch.responses)).toEqual(
      expect.arrayContaining(['202', '400', '401', '413', '415']),
    );
    expect(res.body.paths['/v1/traces/{id}/complete']).toBeDefined();
    expect(res.body.paths['/v1/agents/{id}/traces']).toBeDefined();
  });

  it('echoes a sane X-Request-Id and makes one up otherwise', async () => {
    const given = await send(server.url, '/healthz', undefined, {
      headers: { 'x-request-id': 'abc-123' },
    });
    expect(given.headers.get('x-request-id')).toBe('abc-123');
    const made = await send(server.url, '/healthz', undefined, {
      headers: { 'x-request-id': 'bad id\twith tab' },
    });
    expect(made.headers.get('x-request-id')).toMatch(/^[0-9A-Z]{26}$/);
  });

  it('answers unknown routes with a 404 problem', async () => {
    const res = await send(server.url, '/v2/nothing');
    expect(isProblem(res, 404)).toBe(true);
  });
});

describeEngines('structured logs [%s]', (engine) => {
  it('carry request ids and never keys, tokens or payloads', async () => {
    const lines: string[] = [];
    const location = freshLocation(engine);
    const store = await openStore(location);
    const config = changeConfig(loadConfig({}), {
      auth: { adminToken: 'admin-token-for-log-test', jwtSecret: 'x'.repeat(32) },
    });
    const { app } = await buildApp({
      config,
      store,
      logger: { destination: { write: (l) => void lines.push(l) } },
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    try {
      const created = await send(url, '/admin/v1/agents', {}, { token: config.auth.adminToken });
      const { apiKey, verifyToken } = created.body;
      const batch = runBatch({ batch: { verifyToken, agentId: created.body.agentId } });
      batch.body.items[0]!.events[0]!.payload = { secret: 'private-payload-marker' };
      batch.body.items[0]!.events[0]!.type = 'custom';
      await postBatch(url, apiKey, batch.body, { headers: { 'x-request-id': 'log-test-1' } });
      await postBatch(url, apiKey, { nonsense: 'private-payload-marker' });
      const log = lines.join('');
      expect(log).toContain('"reqId":"log-test-1"');
      for (const secret of [apiKey, verifyToken, config.auth.adminToken, 'private-payload-marker'])
        expect(log).not.toContain(secret);
    } finally {
      await app.close();
      await disposeLocation(location);
    }
  });
});

describeWithRedis('structured logs when the Redis bus fails [redis]', () => {
  it('report the failure without the batch it was publishing', async () => {
    const lines: string[] = [];
    const prefix = `flightlog-test:logs-${Date.now()}:`;
    const agentId = 'log-test-agent';
    const redis = new Redis(redisUrl());
    // the agent's stream key holds a string, so every XADD to it fails with WRONGTYPE
    await redis.set(`${prefix}${agentId}`, 'not a stream');
    const store = await openStore({});
    const config = changeConfig(loadConfig({}), {
      auth: { adminToken: 'admin-token-for-log-test' },
    });
    const bus = createRedisBus({ url: redisUrl(), keyPrefix: prefix });
    await bus.ready(5_000);
    const { app, metrics } = await buildApp({
      config,
      store,
      bus,
      logger: { destination: { write: (l) => void lines.push(l) } },
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    try {
      const created = await send(
        url,
        '/admin/v1/agents',
        { id: agentId },
        {
          token: config.auth.adminToken,
        },
      );
      const batch = runBatch();
      batch.body.items[0]!.events[0]!.payload = { secret: 'private-payload-marker' };
      batch.body.items[0]!.events[0]!.type = 'custom';
      expect((await postBatch(url, created.body.apiKey, batch.body)).status).toBe(202);
      // published after the 202, so the failure is counted shortly after it
      await waitFor(
        async () => ((await metrics.livePublishFailures.get()).values[0]?.value ? true : undefined),
        'the publish failure to be counted',
      );
      expect(await metrics.livePublishFailures.get()).toMatchObject({
        values: [{ value: 1 }],
      });
      const log = lines.join('');
      expect(log).toContain('WRONGTYPE');
      expect(log).not.toContain('private-payload-marker');
    } finally {
      await app.close();
      await redis.del(`${prefix}${agentId}`);
      redis.disconnect();
    }
  });
});

describeWithPostgres('PostgreSQL outage [postgres]', () => {
  let proxy: TcpProxy;
  let server: TestServer;
  let agent: TestAgent;
  beforeAll(async () => {
    const target = new URL(postgresUrl());
    proxy = new TcpProxy(target.hostname, Number(target.port || 5432));
    await proxy.start();
    target.port = String(proxy.port);
    server = await startTestServer('postgres', { store: { databaseUrl: target.toString() } });
    agent = await server.createAgent();
  });
  afterAll(async () => {
    await server.close();
    await proxy.close();
  });

  it('answers 503 with Retry-After while the database is unreachable, then recovers by itself', async () => {
    expect((await postBatch(server.url, agent.apiKey, runBatch().body)).status).toBe(202);
    await proxy.cut();
    const { body, trace } = runBatch({ events: 2 });
    const started = Date.now();
    const during = await postBatch(server.url, agent.apiKey, body);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(isProblem(during, 503)).toBe(true);
    expect(during.headers.get('retry-after')).toBe('1');
    const ready = await send(server.url, '/readyz');
    expect(isProblem(ready, 503)).toBe(true);
    expect((await send(server.url, '/healthz')).status).toBe(200);

    await proxy.restore();
    const after = await postBatch(server.url, agent.apiKey, body);
    expect(after.status).toBe(202);
    expect(after.body).toEqual({ traceId: trace.id });
    expect((await send(server.url, '/readyz')).status).toBe(200);
    const [row] = await server.store.sql.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM events WHERE trace_id = $1',
      [trace.id],
    );
    expect(row?.n).toBe(2);
  });
});
