import { context, trace, TraceFlags } from '@opentelemetry/api';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEngines } from '../harness/engines.js';
import { isProblem } from '../harness/http.js';
import { storedEvents, storedTrace, tableCounts } from '../harness/inspect.js';
import {
  childSpan,
  exportSpans,
  otlpExporter,
  postOtlp,
  recordingTracer,
  traceIdOf,
} from '../harness/otel.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';

const PROTOBUF = 'application/x-protobuf';
const MAX_FAILURES = 5;

/** One export of a finished run of `spans` spans, as protobuf bytes. */
function runExport(name: string, spans = 2) {
  const recorder = recordingTracer();
  const root = recorder.tracer.startSpan(name, {
    attributes: { 'flightlog.input_summary': `secret plan of ${name}` },
  });
  for (let i = 1; i < spans; i++) childSpan(recorder.tracer, root, `step ${i}`).end();
  root.end();
  return { root, spans: recorder.finished() };
}

describeEngines('OTLP ingest, security [%s]', (engine) => {
  let server: TestServer;
  let alice: TestAgent;
  let mallory: TestAgent;
  beforeAll(async () => {
    server = await startTestServer(engine, {
      auth: { apiKeyCacheMs: 1_000, apiKeyMaxFailures: MAX_FAILURES, apiKeyFailureWindowMs: 5_000 },
    });
    alice = await server.createAgent({ name: 'alice' });
    mallory = await server.createAgent({ name: 'mallory' });
  });
  afterAll(() => server.close());

  describe("another agent's trace", () => {
    it('refuses spans of a trace id that belongs to another agent, leaving the run untouched', async () => {
      const victim = runExport('alice-run', 3);
      const aliceExporter = otlpExporter(server.url, {
        encoding: 'protobuf',
        apiKey: alice.apiKey,
      });
      expect(await exportSpans(aliceExporter, victim.spans)).toMatchObject({ ok: true });
      const traceId = traceIdOf(victim.root);
      const storedBefore = await storedTrace(server.store, traceId);
      const eventsBefore = await storedEvents(server.store, traceId);
      expect(storedBefore).toMatchObject({ agent_id: alice.agentId, event_count: 3 });

      // mallory's spans under alice's trace id (a trace id travels in traceparent headers), and
      // a run of mallory's own in the same export
      const recorder = recordingTracer('mallory');
      const remoteParent = trace.setSpanContext(context.active(), {
        traceId,
        spanId: randomBytes(8).toString('hex'),
        traceFlags: TraceFlags.SAMPLED,
        isRemote: true,
      });
      const forged = recorder.tracer.startSpan(
        'hijack',
        {
          attributes: {
            'flightlog.input_summary': 'hijacked',
            'flightlog.output_summary': 'pwned',
          },
        },
        remoteParent,
      );
      childSpan(recorder.tracer, forged, 'forged step').end();
      forged.end();
      const own = recorder.tracer.startSpan('mallory-run');
      own.end();
      const body = Buffer.from(ProtobufTraceSerializer.serializeRequest(recorder.finished())!);
      const answer = await fetch(`${server.url}/v1/otlp/v1/traces`, {
        method: 'POST',
        headers: { authorization: `Bearer ${mallory.apiKey}`, 'content-type': PROTOBUF },
        body,
      });
      expect(answer.status).toBe(200);
      const response = ProtobufTraceSerializer.deserializeResponse(
        new Uint8Array(await answer.arrayBuffer()),
      );
      expect(response.partialSuccess).toMatchObject({ rejectedSpans: 2 });
      const message = String(response.partialSuccess?.errorMessage);
      expect(message).toContain('a trace id already used by another trace');
      expect(message).not.toContain(alice.agentId);
      expect(message).not.toContain('secret plan');

      // alice's run as it was; mallory's own run stored
      expect(await storedTrace(server.store, traceId)).toEqual(storedBefore);
      expect(await storedEvents(server.store, traceId)).toEqual(eventsBefore);
      expect(await storedTrace(server.store, traceIdOf(own))).toMatchObject({
        agent_id: mallory.agentId,
        event_count: 1,
      });

      // and by the JSON exporter too: every span refused, still a 200 (nothing to retry)
      const jsonExporter = otlpExporter(server.url, { encoding: 'json', apiKey: mallory.apiKey });
      const forgedOnly = recorder.finished().filter((s) => s.spanContext().traceId === traceId);
      expect(await exportSpans(jsonExporter, forgedOnly)).toMatchObject({ ok: true });
      expect(await storedEvents(server.store, traceId)).toEqual(eventsBefore);
    });
  });
  // last: past its guessing limit, this address is refused everything for a while
  describe('API key', () => {
    it('the real exporter with a wrong key gets 401, and nothing is stored', async () => {
      const { spans } = runExport('wrong key');
      const before = await tableCounts(server.store);
      for (const encoding of ['protobuf', 'json'] as const) {
        const exporter = otlpExporter(server.url, {
          encoding,
          apiKey: `flk_${randomBytes(20).toString('hex')}`,
        });
        expect(await exportSpans(exporter, spans)).toMatchObject({ ok: false, status: 401 });
        await exporter.shutdown();
      }
      expect(await tableCounts(server.store)).toEqual(before);
    });

    it('answers 401 without a key, before reading the body', async () => {
      const res = await postOtlp(server.url, undefined, Buffer.from('not even protobuf'), PROTOBUF);
      expect(isProblem(res, 401)).toBe(true);
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
    });

    it('counts wrong keys against the address like the batch endpoint: 429 with Retry-After', async () => {
      const body = Buffer.from(ProtobufTraceSerializer.serializeRequest(runExport('guess').spans)!);
      // (the tests above spent some of this address's failures already)
      let last = await postOtlp(server.url, 'flk_guess', body, PROTOBUF);
      for (let i = 1; i <= MAX_FAILURES && last.status === 401; i++)
        last = await postOtlp(server.url, `flk_guess${i}`, body, PROTOBUF);
      expect(isProblem(last, 429)).toBe(true);
      expect(Number(last.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    });
  });
});
