import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeWithPostgres, freshLocation } from '../harness/engines.js';
import { storedTrace } from '../harness/inspect.js';
import { exportSpans, otlpExporter, recordingTracer, traceIdOf } from '../harness/otel.js';
import { TcpProxy } from '../harness/tcp-proxy.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { sleep } from '../harness/wait.js';

/*
 * A database outage answers exports 503 with Retry-After, and the real exporters honour it: they
 * send the export again, and it is stored once the database is back. (PostgreSQL only: the
 * outage is a cut connection between the service and its database.)
 */
describeWithPostgres('OTLP ingest while the database is away', () => {
  let proxy: TcpProxy;
  let server: TestServer;
  let agent: TestAgent;
  beforeAll(async () => {
    const location = freshLocation('postgres');
    const target = new URL(location.databaseUrl!);
    proxy = new TcpProxy(target.hostname, Number(target.port || 5432));
    await proxy.start();
    target.hostname = '127.0.0.1';
    target.port = String(proxy.port);
    server = await startTestServer('postgres', {
      store: { ...location, databaseUrl: target.toString() },
    });
    agent = await server.createAgent({ name: 'otel outage' });
  });
  afterAll(async () => {
    await server?.close();
    await proxy?.close();
  });

  it.each(['protobuf', 'json'] as const)(
    'answers 503 with Retry-After, and the %s exporter retries until it is stored',
    async (encoding) => {
      const recorder = recordingTracer();
      const span = recorder.tracer.startSpan(`through the outage (${encoding})`);
      span.end();
      const exporter = otlpExporter(server.url, { encoding, apiKey: agent.apiKey });
      // the key is checked (and cached) before the outage: the outage is the store's alone
      const warm = recordingTracer();
      warm.tracer.startSpan('warm').end();
      expect(await exportSpans(exporter, warm.finished())).toMatchObject({ ok: true });

      await proxy.cut();
      const probe = await fetch(`${server.url}/v1/otlp/v1/traces`, {
        method: 'POST',
        headers: { authorization: `Bearer ${agent.apiKey}`, 'content-type': 'application/json' },
        body: '{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"x","startTimeUnixNano":"1794909600000000000"}]}]}]}',
      });
      expect(probe.status).toBe(503);
      expect(Number(probe.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);

      const started = Date.now();
      const exported = exportSpans(exporter, recorder.finished());
      await sleep(1_200);
      await proxy.restore();
      expect(await exported).toMatchObject({ ok: true });
      // refused while the database was away, stored by a later attempt
      expect(Date.now() - started).toBeGreaterThanOrEqual(1_200);
      expect(await storedTrace(server.store, traceIdOf(span))).toMatchObject({
        status: 'completed',
        event_count: 1,
      });
      await exporter.shutdown();
    },
  );
});
