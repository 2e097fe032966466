import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEngines } from '../harness/engines.js';
import { isProblem } from '../harness/http.js';
import { storedTrace, tableCounts } from '../harness/inspect.js';
import {
  exportSpans,
  otlpExporter,
  postOtlp,
  recordingTracer,
  traceIdOf,
} from '../harness/otel.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';

const PROTOBUF = 'application/x-protobuf';
const JSON_TYPE = 'application/json';

/** A one-span export in OTLP/JSON (what docs/api.md shows). */
function jsonExport(spans: Record<string, unknown>[]): string {
  return JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans }] }] });
}

const validSpan = (traceId: string, spanId: string) => ({
  traceId,
  spanId,
  name: 'agent.run',
  startTimeUnixNano: '1794909600000000000',
  endTimeUnixNano: '1794909601500000000',
});

const hex = (digits: number) =>
  Array.from({ length: digits }, () => Math.floor(Math.random() * 16).toString(16)).join('');

describeEngines('OTLP ingest, refusals [%s]', (engine) => {
  let server: TestServer;
  let agent: TestAgent;
  beforeAll(async () => {
    server = await startTestServer(engine, {
      maxBodyBytes: 64 * 1024,
      // bodies from 2 KiB up are decoded by the worker pool: both paths are exercised
      largeBodyBytes: 2 * 1024,
    });
    agent = await server.createAgent({ name: 'otel errors' });
  });
  afterAll(() => server.close());

  describe('an undecodable body: 400, nothing stored', () => {
    it.each([
      ['garbage protobuf', Buffer.from('this is not a protobuf message at all'), PROTOBUF],
      ['a truncated protobuf', Buffer.from([0x0a, 0xff, 0x01, 0x0a]), PROTOBUF],
      ['garbage protobuf decoded by the worker pool', Buffer.alloc(4096, 0xff), PROTOBUF],
      ['JSON that does not parse', '{"resourceSpans": [', JSON_TYPE],
      ['JSON of the wrong types', '{"resourceSpans": "all of them"}', JSON_TYPE],
      ['JSON with a span field of the wrong type', jsonExport([{ name: 7 }]), JSON_TYPE],
    ])('%s', async (_what, body, type) => {
      const before = await tableCounts(server.store);
      const res = await postOtlp(server.url, agent.apiKey, body, type);
      expect(isProblem(res, 400)).toBe(true);
      expect(await tableCounts(server.store)).toEqual(before);
    });

    it('garbage gzip', async () => {
      const res = await postOtlp(server.url, agent.apiKey, Buffer.from('not gzip'), PROTOBUF, {
        headers: { 'content-encoding': 'gzip' },
      });
      expect(isProblem(res, 400)).toBe(true);
    });
  });

  it('refuses other content types and encodings with 415', async () => {
    const text = await postOtlp(server.url, agent.apiKey, 'spans', 'text/plain');
    expect(isProblem(text, 415)).toBe(true);
    expect(text.body.detail).toMatch(/application\/x-protobuf or application\/json/);
    const brotli = await postOtlp(server.url, agent.apiKey, Buffer.from('x'), PROTOBUF, {
      headers: { 'content-encoding': 'br' },
    });
    expect(isProblem(brotli, 415)).toBe(true);
  });

  describe('bodies past MAX_BODY_BYTES: 413', () => {
    it('from the real exporter, which reports the failure', async () => {
      const recorder = recordingTracer();
      const span = recorder.tracer.startSpan('huge', { attributes: { blob: 'x'.repeat(80_000) } });
      span.end();
      const before = await tableCounts(server.store);
      for (const encoding of ['protobuf', 'json'] as const) {
        const exporter = otlpExporter(server.url, { encoding, apiKey: agent.apiKey });
        const result = await exportSpans(exporter, recorder.finished());
        expect(result).toMatchObject({ ok: false, status: 413 });
        await exporter.shutdown();
      }
      expect(await tableCounts(server.store)).toEqual(before);
    });

    it('a gzip body that inflates past the limit', async () => {
      const recorder = recordingTracer();
      recorder.tracer.startSpan('bomb', { attributes: { blob: 'a'.repeat(200_000) } }).end();
      const bytes = Buffer.from(ProtobufTraceSerializer.serializeRequest(recorder.finished())!);
      const compressed = gzipSync(bytes);
      expect(compressed.length).toBeLessThan(64 * 1024);
      const res = await postOtlp(server.url, agent.apiKey, compressed, PROTOBUF, {
        headers: { 'content-encoding': 'gzip' },
      });
      expect(isProblem(res, 413)).toBe(true);
    });
  });

  it('stores a large export decoded by the worker pool', async () => {
    const recorder = recordingTracer();
    const root = recorder.tracer.startSpan('large', { attributes: { note: 'y'.repeat(10_000) } });
    root.end();
    for (const gzip of [false, true]) {
      const exporter = otlpExporter(server.url, {
        encoding: 'protobuf',
        apiKey: agent.apiKey,
        gzip,
      });
      expect(await exportSpans(exporter, recorder.finished())).toMatchObject({ ok: true });
    }
    expect(await storedTrace(server.store, traceIdOf(root))).toMatchObject({
      status: 'completed',
      event_count: 1,
    });
  });

  it('answers an empty export (an empty protobuf message is no bytes) with success', async () => {
    const before = await tableCounts(server.store);
    const res = await postOtlp(server.url, agent.apiKey, Buffer.alloc(0), PROTOBUF);
    expect(res.status).toBe(200);
    expect(await tableCounts(server.store)).toEqual(before);
  });

  it('takes the OTLP/JSON example of docs/api.md', async () => {
    const traceId = hex(32);
    const res = await postOtlp(
      server.url,
      agent.apiKey,
      jsonExport([validSpan(traceId, hex(16))]),
      JSON_TYPE,
    );
    expect(res.status).toBe(200);
    expect(res.body).toEqual({});
    expect(await storedTrace(server.store, traceId)).toMatchObject({
      status: 'completed',
      input_summary: 'agent.run',
      duration_ms: 1500,
      event_count: 1,
    });
  });

  it('refuses spans with ids or times that make no sense one by one (partial success)', async () => {
    const traceId = hex(32).toUpperCase(); // hex ids are read in any case
    const spans = [
      validSpan(traceId, hex(16)),
      validSpan('xyz', hex(16)),
      validSpan('0'.repeat(32), hex(16)),
      validSpan(hex(32), '0'.repeat(16)),
      validSpan(hex(32), hex(15)),
      { ...validSpan(hex(32), hex(16)), parentSpanId: 'nope' },
      { ...validSpan(hex(32), hex(16)), startTimeUnixNano: '0' },
    ];
    const res = await postOtlp(server.url, agent.apiKey, jsonExport(spans), JSON_TYPE);
    expect(res.status).toBe(200);
    expect(res.body.partialSuccess.rejectedSpans).toBe('6');
    expect(res.body.partialSuccess.errorMessage).toMatch(/^6 spans were refused: /);
    expect(res.body.partialSuccess.errorMessage).toContain('not 32 hex digits');
    expect(await storedTrace(server.store, traceId.toLowerCase())).toMatchObject({
      event_count: 1,
    });
  });

  it('answers a partial success in protobuf to a protobuf export', async () => {
    const recorder = recordingTracer();
    recorder.tracer.startSpan('fine').end();
    const [span] = recorder.finished();
    // the same span once more, with an all-zero trace id (no SDK would send one)
    const broken = Object.create(span!, {
      spanContext: {
        value: () => ({ ...span!.spanContext(), traceId: '0'.repeat(32) }),
      },
    });
    const bytes = ProtobufTraceSerializer.serializeRequest([span!, broken])!;
    const answer = await fetch(`${server.url}/v1/otlp/v1/traces`, {
      method: 'POST',
      headers: { authorization: `Bearer ${agent.apiKey}`, 'content-type': PROTOBUF },
      body: Buffer.from(bytes),
    });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toBe(PROTOBUF);
    const decoded = ProtobufTraceSerializer.deserializeResponse(
      new Uint8Array(await answer.arrayBuffer()),
    );
    expect(decoded.partialSuccess).toMatchObject({ rejectedSpans: 1 });
    expect(String(decoded.partialSuccess?.errorMessage)).toContain('all zeros');
  });
});
