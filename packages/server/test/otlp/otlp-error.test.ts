import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEngines } from '../harness/engines.js';
import { isProblem } from '../harness/http.js';
import { storedEvents, storedTrace, tableCounts } from '../harness/inspect.js';
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

/** Bytes of a protobuf field header and length (wire type 2) for a field of `length` bytes. */
function lengthHeader(field: number, length: number): number[] {
  const bytes = [(field << 3) | 2];
  let rest = length;
  while (rest >= 0x80) {
    bytes.push((rest & 0x7f) | 0x80);
    rest = Math.floor(rest / 0x80);
  }
  bytes.push(rest);
  return bytes;
}

/**
 * An export of one span whose attribute nests `depth` array values, written as protobuf bytes
 * directly (lengths computed from the inside out, headers written outside in): no encoder would
 * build a message that deep without overflowing its own stack.
 */
function deepProtobufExport(depth: number): Buffer {
  const inner = [0x0a, 0x01, 0x78]; // AnyValue { string_value: "x" }
  const headers: number[][] = [];
  let length = inner.length;
  for (let i = 0; i < depth; i++) {
    const array = lengthHeader(1, length); // ArrayValue { values: [AnyValue] }
    length += array.length;
    const any = lengthHeader(5, length); // AnyValue { array_value }
    length += any.length;
    headers.push(array, any);
  }
  const key = [0x0a, 0x01, 0x6b]; // KeyValue { key: "k" }
  const value = lengthHeader(2, length);
  const kv = key.length + value.length + length;
  const ids = [
    ...lengthHeader(1, 16),
    ...Array(16).fill(0xab), // trace_id
    ...lengthHeader(2, 8),
    ...Array(8).fill(0xcd), // span_id
    0x39, // start_time_unix_nano (fixed64, little-endian)
    ...Buffer.from(new BigUint64Array([1_794_909_600_000_000_000n]).buffer),
  ];
  const attribute = lengthHeader(9, kv); // Span { attributes: [KeyValue] }
  const spanLength = ids.length + attribute.length + kv;
  const span = lengthHeader(2, spanLength); // ScopeSpans { spans }
  const scope = lengthHeader(2, span.length + spanLength); // ResourceSpans { scope_spans }
  const resource = lengthHeader(1, scope.length + span.length + spanLength); // request
  const out = [...resource, ...scope, ...span, ...ids, ...attribute, ...key, ...value];
  const buffer = Buffer.alloc(
    out.length + headers.reduce((n, h) => n + h.length, 0) + inner.length,
  );
  let at = 0;
  for (const byte of out) buffer[at++] = byte;
  for (let i = headers.length - 1; i >= 0; i--) for (const byte of headers[i]!) buffer[at++] = byte;
  for (const byte of inner) buffer[at++] = byte;
  return buffer;
}

describeEngines('OTLP ingest, refusals [%s]', (engine) => {
  let server: TestServer;
  let agent: TestAgent;
  beforeAll(async () => {
    server = await startTestServer(engine, {
      http: {
        maxBodyBytes: 64 * 1024, // bodies from 2 KiB up are decoded by the worker pool: both paths are exercised
        largeBodyBytes: 2 * 1024,
      },
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

  it('takes values nested deeper than it keeps, and survives nesting as deep as the body limit allows', async () => {
    // 40 levels: stored, cut at the payload's bound
    const kept = await postOtlp(server.url, agent.apiKey, deepProtobufExport(40), PROTOBUF);
    expect(kept.status).toBe(200);
    const stored = await storedEvents(server.store, 'ab'.repeat(16));
    expect(JSON.stringify(stored[0]!.payload)).toContain('[nested too deep]');
    // thousands of levels within the body limit (decoded by the worker pool, and on this thread
    // when the value cannot travel back): a 400 where a decoder's stack gives out, never a 500
    const before = await tableCounts(server.store);
    const deep = deepProtobufExport(7_000);
    expect(deep.length).toBeLessThan(64 * 1024);
    const answer = await postOtlp(server.url, agent.apiKey, deep, PROTOBUF);
    expect([200, 400]).toContain(answer.status);
    if (answer.status === 400) expect(await tableCounts(server.store)).toEqual(before);
    expect((await postOtlp(server.url, agent.apiKey, deepProtobufExport(3), PROTOBUF)).status).toBe(
      200,
    );
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
