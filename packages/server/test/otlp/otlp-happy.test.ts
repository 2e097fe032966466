import { SpanStatusCode } from '@opentelemetry/api';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEngines } from '../harness/engines.js';
import { send } from '../harness/http.js';
import {
  childSpan,
  eventIdOf,
  exportSpans,
  otlpExporter,
  postOtlp,
  recordingTracer,
  traceIdOf,
  type OtlpEncoding,
} from '../harness/otel.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';

/** An agent run as instrumentations write it: a root, a model call and a tool call under it. */
function recordRun(tracer: ReturnType<typeof recordingTracer>['tracer'], question: string) {
  const root = tracer.startSpan('invoke_agent planner', {
    attributes: {
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.input.messages': JSON.stringify([
        { role: 'user', parts: [{ type: 'text', content: question }] },
      ]),
      'gen_ai.output.messages': JSON.stringify([
        {
          role: 'assistant',
          parts: [{ type: 'text', content: 'Paris, 18 °C' }],
          finish_reason: 'stop',
        },
      ]),
      // the run's total usage: must not be counted on top of its model call's
      'gen_ai.usage.input_tokens': 120,
      'gen_ai.usage.output_tokens': 30,
    },
  });
  const chat = childSpan(tracer, root, 'chat gpt-4o-mini', {
    'gen_ai.operation.name': 'chat',
    'gen_ai.provider.name': 'openai',
    'gen_ai.request.model': 'gpt-4o-mini',
    'gen_ai.response.model': 'gpt-4o-mini-2024-07-18',
    'gen_ai.usage.input_tokens': 120,
    'gen_ai.usage.output_tokens': 30,
    'gen_ai.response.finish_reasons': ['tool_calls'],
  });
  chat.end();
  const tool = childSpan(tracer, root, 'execute_tool weather', {
    'gen_ai.operation.name': 'execute_tool',
    'gen_ai.tool.name': 'weather',
    'gen_ai.tool.call.arguments': '{"city":"Paris"}',
    'gen_ai.tool.call.result': '{"celsius":18}',
  });
  tool.end();
  root.end();
  return { root, chat, tool };
}

describeEngines('OTLP ingest, the happy path [%s]', (engine) => {
  let server: TestServer;
  let agent: TestAgent;
  let viewer: string;
  beforeAll(async () => {
    server = await startTestServer(engine);
    agent = await server.createAgent({ name: 'otel agent' });
    viewer = await server.userToken('otel-viewer', agent.agentId);
  });
  afterAll(() => server.close());

  const readRun = async (traceId: string) => {
    const res = await send(server.url, `/v1/traces/${traceId}`, undefined, { token: viewer });
    expect(res.status).toBe(200);
    return res.body as { trace: any; events: any[] };
  };

  describe.each([
    ['protobuf', false],
    ['protobuf', true],
    ['json', false],
    ['json', true],
  ] as [OtlpEncoding, boolean][])('exported as %s (gzip: %s)', (encoding, gzip) => {
    it('becomes a finished run with a model call and a tool call under its root', async () => {
      const recorder = recordingTracer();
      const { root, chat, tool } = recordRun(recorder.tracer, `weather in Paris? (${encoding})`);
      const exporter = otlpExporter(server.url, { encoding, apiKey: agent.apiKey, gzip });
      const result = await exportSpans(exporter, recorder.finished());
      expect(result).toMatchObject({ ok: true });
      await exporter.shutdown();

      const traceId = traceIdOf(root);
      expect(traceId).toMatch(/^[0-9a-f]{32}$/);
      const { trace, events } = await readRun(traceId);
      expect(trace).toMatchObject({
        id: traceId,
        agentId: agent.agentId,
        status: 'completed',
        inputSummary: `weather in Paris? (${encoding})`,
        outputSummary: 'Paris, 18 °C',
        errorMessage: null,
        eventCount: 3,
        totalTokens: 150,
        totalCostUsd: '0',
        toolsCalled: ['weather'],
      });
      expect(trace.durationMs).toBeGreaterThanOrEqual(0);
      const byId = new Map(events.map((e) => [e.id, e]));
      expect(byId.get(eventIdOf(root))).toMatchObject({
        type: 'custom',
        parentEventId: null,
        status: 'ok',
        payload: { name: 'invoke_agent planner' },
      });
      expect(byId.get(eventIdOf(chat))).toMatchObject({
        type: 'llm_call',
        parentEventId: eventIdOf(root),
        payload: {
          provider: 'openai',
          model: 'gpt-4o-mini-2024-07-18',
          usage: { inputTokens: 120, outputTokens: 30, totalTokens: 150 },
          output: { finishReason: 'tool_calls' },
          costUsd: 0,
          streamed: false,
        },
      });
      expect(byId.get(eventIdOf(tool))).toMatchObject({
        type: 'tool_call',
        parentEventId: eventIdOf(root),
        payload: { name: 'weather', input: { city: 'Paris' }, output: { celsius: 18 } },
      });
      expect(events.map((e) => e.sequence).sort()).toEqual([0, 1, 2]);
    });
  });

  it('answers an ExportTraceServiceResponse in the encoding of the request', async () => {
    const recorder = recordingTracer();
    recorder.tracer.startSpan('one').end();
    const body = Buffer.from(ProtobufTraceSerializer.serializeRequest(recorder.finished()) ?? []);
    const proto = await postOtlp(server.url, agent.apiKey, body, 'application/x-protobuf');
    expect(proto.status).toBe(200);
    expect(proto.headers.get('content-type')).toBe('application/x-protobuf');
    // a full success: an empty message, no partial_success
    expect(proto.text).toBe('');

    const json = await postOtlp(
      server.url,
      agent.apiKey,
      '{"resourceSpans":[]}',
      'application/json',
    );
    expect(json.status).toBe(200);
    expect(json.headers.get('content-type')).toMatch(/^application\/json/);
    expect(json.body).toEqual({});
  });

  it('is described in /openapi.json, with both encodings', async () => {
    const res = await send(server.url, '/openapi.json');
    const route = res.body.paths['/v1/otlp/v1/traces'].post;
    expect(Object.keys(route.requestBody.content).sort()).toEqual([
      'application/json',
      'application/x-protobuf',
    ]);
    expect(Object.keys(route.responses)).toEqual(
      expect.arrayContaining(['200', '400', '401', '413', '415', '429', '503']),
    );
  });

  it('works with nothing but the two standard environment variables', async () => {
    const saved = { ...process.env };
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `${server.url}/v1/otlp`;
    process.env.OTEL_EXPORTER_OTLP_HEADERS = `Authorization=Bearer ${agent.apiKey}`;
    try {
      for (const encoding of ['protobuf', 'json'] as const) {
        const { OTLPTraceExporter } =
          encoding === 'protobuf'
            ? await import('@opentelemetry/exporter-trace-otlp-proto')
            : await import('@opentelemetry/exporter-trace-otlp-http');
        const exporter = new OTLPTraceExporter();
        const recorder = recordingTracer();
        const span = recorder.tracer.startSpan(`configured by the environment (${encoding})`);
        span.end();
        expect(await exportSpans(exporter, recorder.finished())).toMatchObject({ ok: true });
        await exporter.shutdown();
        const { trace } = await readRun(traceIdOf(span));
        expect(trace).toMatchObject({ status: 'completed', eventCount: 1 });
      }
    } finally {
      process.env = saved;
    }
  });

  it('verifies a new agent by the verify token sent as a Flightlog-Verify-Token header', async () => {
    const fresh = await server.createAgent({ name: 'verified by OTLP' });
    const recorder = recordingTracer();
    recorder.tracer.startSpan('first run').end();
    const body = Buffer.from(ProtobufTraceSerializer.serializeRequest(recorder.finished()) ?? []);
    const headers = { 'flightlog-verify-token': fresh.verifyToken };
    const first = await postOtlp(server.url, fresh.apiKey, body, 'application/x-protobuf', {
      headers,
    });
    expect(first.status).toBe(200);
    expect(first.headers.get('flightlog-verify')).toBe('verified');
    const agentInfo = await send(server.url, `/admin/v1/agents/${fresh.agentId}`, undefined, {
      token: server.adminToken,
    });
    expect(agentInfo.body.verifiedAt).toEqual(expect.any(String));
    // the token is single use; later exports are stored all the same
    recorder.reset();
    recorder.tracer.startSpan('second run').end();
    const exporter = otlpExporter(server.url, {
      encoding: 'json',
      apiKey: fresh.apiKey,
      headers: { 'Flightlog-Verify-Token': fresh.verifyToken },
    });
    expect(await exportSpans(exporter, recorder.finished())).toMatchObject({ ok: true });
    const [second] = recorder.finished();
    const owner = await server.userToken('otel-verified-owner', fresh.agentId, 'owner');
    const run = await send(server.url, `/v1/traces/${second!.spanContext().traceId}`, undefined, {
      token: owner,
    });
    expect(run.body.trace).toMatchObject({ agentId: fresh.agentId, eventCount: 1 });
  });

  it('records a failed step as an error event, and the run stays completed when its root is OK', async () => {
    const recorder = recordingTracer();
    const root = recorder.tracer.startSpan('run');
    const failing = childSpan(recorder.tracer, root, 'execute_tool fetch', {
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'fetch',
    });
    failing.recordException(new TypeError('fetch failed: ECONNREFUSED'));
    failing.setStatus({ code: SpanStatusCode.ERROR });
    failing.end();
    const described = childSpan(recorder.tracer, root, 'step');
    described.setStatus({ code: SpanStatusCode.ERROR, message: 'quota exceeded' });
    described.end();
    root.end();
    const exporter = otlpExporter(server.url, { encoding: 'protobuf', apiKey: agent.apiKey });
    expect(await exportSpans(exporter, recorder.finished())).toMatchObject({ ok: true });
    const { trace, events } = await readRun(traceIdOf(root));
    expect(trace).toMatchObject({
      status: 'completed',
      errorMessage: null,
      toolsCalled: ['fetch'],
    });
    const byId = new Map(events.map((e) => [e.id, e]));
    expect(byId.get(eventIdOf(failing))).toMatchObject({
      status: 'error',
      errorMessage: 'TypeError: fetch failed: ECONNREFUSED',
    });
    expect(byId.get(eventIdOf(described))).toMatchObject({
      status: 'error',
      errorMessage: 'quota exceeded',
    });
  });
});
