import { TransportBatchPayloadSchema } from '@flightlog/protocol';
import { describe, expect, it } from 'vitest';
import { createBoundedValidator } from '../../src/http/schema-validator.js';
import { exportBatch } from '../../src/otlp/export-batch.js';
import type { ExportTraceServiceRequest } from '../../src/otlp/otlp-json.js';
import { isoFromNanos, mapExport, type MappedSpan } from '../../src/otlp/span-mapping.js';

/**
 * The mapping of spans to events, from the attributes each instrumentation writes (the names are
 * taken from their sources: the Vercel AI SDK 6 `ai.*` telemetry and AI SDK 7's `@ai-sdk/otel`,
 * OpenInference, OpenLLMetry, the GenAI and MCP semantic conventions). Pure: no server.
 */

const TRACE = 'a'.repeat(32);
let nextSpan = 1;
const spanId = () => (nextSpan++).toString(16).padStart(16, '0');

type Plain = string | number | boolean | string[];

function anyValue(value: Plain): Record<string, unknown> {
  if (Array.isArray(value)) return { arrayValue: { values: value.map(anyValue) } };
  if (typeof value === 'string') return { stringValue: value };
  if (typeof value === 'boolean') return { boolValue: value };
  return Number.isInteger(value) ? { intValue: String(value) } : { doubleValue: value };
}

interface SpanSpec {
  name: string;
  attributes?: Record<string, Plain>;
  parent?: string;
  id?: string;
  kind?: number;
  status?: { code: number; message?: string };
  /** Start in ms after the export's first instant (default: the span's index). */
  startMs?: number;
}

function request(specs: SpanSpec[], service = 'agent'): ExportTraceServiceRequest {
  return {
    resourceSpans: [
      {
        resource: { attributes: [{ key: 'service.name', value: { stringValue: service } }] },
        scopeSpans: [
          {
            scope: { name: 'test', version: '1' },
            spans: specs.map((spec, i) => ({
              traceId: TRACE,
              spanId: spec.id ?? spanId(),
              ...(spec.parent ? { parentSpanId: spec.parent } : {}),
              name: spec.name,
              kind: spec.kind ?? 1,
              startTimeUnixNano: String(
                1_794_909_600_000_000_000n + BigInt(spec.startMs ?? i) * 1_000_000n,
              ),
              endTimeUnixNano: String(1_794_909_601_000_000_000n + BigInt(i) * 1_000_000n),
              attributes: Object.entries(spec.attributes ?? {}).map(([key, value]) => ({
                key,
                value: anyValue(value),
              })),
              ...(spec.status ? { status: spec.status } : {}),
            })),
          },
        ],
      },
    ],
  };
}

/** The export mapped and turned into the batch a new trace gets; the batch must be valid. */
function mapped(specs: SpanSpec[], service?: string) {
  const { spans, rejected } = mapExport(request(specs, service));
  expect(rejected.size).toBe(0);
  const batch = exportBatch('agent-1', spans, new Map(), new Map());
  const payload = { batchId: '01JD2X7Q9C3V6N8B0M4K2H1G5F', items: batch.items };
  // what the batch endpoint's own validator would take
  const validate = createBoundedValidator(TransportBatchPayloadSchema);
  expect(validate(payload) ? [] : validate.errors).toEqual([]);
  const byName = (name: string): MappedSpan['event'] => {
    const span = spans.find(
      (s) => (s.event.payload.otel as { spanName: string }).spanName === name,
    );
    if (!span) throw new Error(`no span ${name}`);
    return span.event;
  };
  return { trace: batch.items[0]!.trace, events: batch.items[0]!.events, byName };
}

describe('the Vercel AI SDK (ai.* attributes, AI SDK 4 to 6)', () => {
  it('generateText with a tool call: model calls, a tool call, tokens counted once', () => {
    const root = spanId();
    const { trace, byName } = mapped([
      {
        id: root,
        name: 'ai.generateText',
        attributes: {
          'operation.name': 'ai.generateText weather-agent',
          'ai.operationId': 'ai.generateText',
          'ai.model.provider': 'mock-provider',
          'ai.model.id': 'mock-model-id',
          'ai.prompt': '{"prompt":"What is the weather in SF?"}',
          'ai.response.text': 'It is 20 °C in SF.',
          'ai.response.finishReason': 'stop',
          // the generation's totals: the sum of its two calls
          'ai.usage.inputTokens': 30,
          'ai.usage.outputTokens': 12,
          'ai.usage.totalTokens': 42,
        },
      },
      {
        name: 'ai.generateText.doGenerate',
        parent: root,
        attributes: {
          'ai.operationId': 'ai.generateText.doGenerate',
          'ai.model.provider': 'mock-provider',
          'ai.model.id': 'mock-model-id',
          'ai.prompt.messages':
            '[{"role":"user","content":[{"type":"text","text":"What is the weather in SF?"}]}]',
          'ai.response.finishReason': 'tool-calls',
          'ai.response.toolCalls': '[{"toolCallId":"call-1","toolName":"weather"}]',
          'ai.usage.inputTokens': 10,
          'ai.usage.outputTokens': 5,
          'ai.usage.totalTokens': 15,
          'gen_ai.system': 'mock-provider',
          'gen_ai.request.model': 'mock-model-id',
          'gen_ai.response.model': 'mock-model-id',
          'gen_ai.usage.input_tokens': 10,
          'gen_ai.usage.output_tokens': 5,
          'gen_ai.response.finish_reasons': ['tool-calls'],
        },
      },
      {
        name: 'ai.toolCall',
        parent: root,
        attributes: {
          'operation.name': 'ai.toolCall',
          'ai.operationId': 'ai.toolCall',
          'ai.toolCall.name': 'weather',
          'ai.toolCall.id': 'call-1',
          'ai.toolCall.args': '{"city":"SF"}',
          'ai.toolCall.result': '{"celsius":20}',
        },
      },
      {
        name: 'ai.streamText.doStream',
        parent: root,
        attributes: {
          'ai.operationId': 'ai.streamText.doStream',
          'ai.model.provider': 'mock-provider',
          'ai.model.id': 'mock-model-id',
          'ai.response.text': 'It is 20 °C in SF.',
          'ai.response.finishReason': 'stop',
          // AI SDK 4 and 5 names
          'ai.usage.promptTokens': 20,
          'ai.usage.completionTokens': 7,
        },
      },
    ]);
    expect(byName('ai.generateText')).toMatchObject({ type: 'custom', parentEventId: null });
    expect(byName('ai.generateText.doGenerate')).toMatchObject({
      type: 'llm_call',
      parentEventId: `${TRACE}-${root}`,
      payload: {
        provider: 'mock-provider',
        model: 'mock-model-id',
        input: { messages: [{ role: 'user', content: 'What is the weather in SF?' }] },
        output: { content: '', finishReason: 'tool-calls' },
        usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15 },
        streamed: false,
      },
    });
    expect(byName('ai.toolCall')).toMatchObject({
      type: 'tool_call',
      payload: {
        name: 'weather',
        callId: 'call-1',
        input: { city: 'SF' },
        output: { celsius: 20 },
      },
    });
    expect(byName('ai.streamText.doStream')).toMatchObject({
      type: 'llm_call',
      payload: {
        output: { content: 'It is 20 °C in SF.', finishReason: 'stop' },
        usage: { inputTokens: 20, outputTokens: 7, totalTokens: 27 },
        streamed: true,
      },
    });
    expect(trace).toMatchObject({
      status: 'completed',
      inputSummary: 'What is the weather in SF?',
      outputSummary: 'It is 20 °C in SF.',
      eventCount: 4,
      totalTokens: 42,
      toolsCalled: ['weather'],
    });
  });

  it('AI SDK 7 (@ai-sdk/otel): invoke_agent, chat and execute_tool spans', () => {
    const root = spanId();
    const { trace, byName } = mapped([
      {
        id: root,
        name: 'invoke_agent mock-model-id',
        attributes: {
          'gen_ai.operation.name': 'invoke_agent',
          'gen_ai.provider.name': 'mock-provider',
          'gen_ai.request.model': 'mock-model-id',
          'gen_ai.input.messages':
            '[{"role":"system","parts":[{"type":"text","content":"be brief"}]},{"role":"user","parts":[{"type":"text","content":"Weather in SF?"}]}]',
          'gen_ai.output.messages':
            '[{"role":"assistant","parts":[{"type":"text","content":"Sunny."}],"finish_reason":"stop"}]',
          'gen_ai.usage.input_tokens': 30,
          'gen_ai.usage.output_tokens': 12,
        },
      },
      {
        name: 'chat mock-model-id',
        parent: root,
        attributes: {
          'gen_ai.operation.name': 'chat',
          'gen_ai.provider.name': 'mock-provider',
          'gen_ai.request.model': 'mock-model-id',
          'gen_ai.output.messages':
            '[{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"weather","arguments":{"city":"SF"}}],"finish_reason":"tool_call"}]',
          'gen_ai.usage.input_tokens': 10,
          'gen_ai.usage.output_tokens': 5,
        },
      },
      {
        name: 'execute_tool weather',
        parent: root,
        attributes: {
          'gen_ai.operation.name': 'execute_tool',
          'gen_ai.tool.name': 'weather',
          'gen_ai.tool.call.id': 'c1',
          'gen_ai.tool.call.arguments': '{"city":"SF"}',
          'gen_ai.tool.call.result': '"sunny"',
        },
      },
    ]);
    expect(byName('invoke_agent mock-model-id').type).toBe('custom');
    expect(byName('chat mock-model-id')).toMatchObject({
      type: 'llm_call',
      payload: {
        output: { content: '[tool_call weather] {"city":"SF"}', finishReason: 'tool_call' },
        usage: { totalTokens: 15 },
      },
    });
    expect(byName('execute_tool weather')).toMatchObject({
      type: 'tool_call',
      payload: { name: 'weather', input: { city: 'SF' }, output: 'sunny' },
    });
    expect(trace).toMatchObject({
      inputSummary: 'Weather in SF?',
      outputSummary: 'Sunny.',
      totalTokens: 15,
      toolsCalled: ['weather'],
    });
  });
});

describe('sequence numbers within one export', () => {
  it('spans that start in the same millisecond: parents first, then in the order they ended', () => {
    // as the OTel JS SDK sends an instant generateText: start times to the ms, in end order;
    // span ids chosen so that ordering by id would put the root last
    const root = 'f'.repeat(16);
    const { events } = mapped([
      { id: '0000000000000003', name: 'model call 1', parent: root, startMs: 0 },
      { id: '0000000000000002', name: 'tool call', parent: root, startMs: 0 },
      { id: '0000000000000004', name: 'tool detail', parent: '0000000000000002', startMs: 0 },
      { id: '0000000000000001', name: 'model call 2', parent: root, startMs: 1 },
      { id: root, name: 'generation', startMs: 0 },
    ]);
    expect(events.map((e) => [e.sequence, e.payload.name])).toEqual([
      [0, 'generation'],
      [1, 'model call 1'],
      [2, 'tool call'],
      [3, 'tool detail'],
      [4, 'model call 2'],
    ]);
  });

  it('a parent chain that loops (a forged export) still numbers every span once', () => {
    const { events } = mapped([
      { id: '00000000000000a1', name: 'a', parent: '00000000000000a2', startMs: 0 },
      { id: '00000000000000a2', name: 'b', parent: '00000000000000a1', startMs: 0 },
      { id: '00000000000000a3', name: 'c', startMs: 0 },
    ]);
    expect(events.map((e) => e.sequence).sort()).toEqual([0, 1, 2]);
    expect(events.map((e) => e.payload.name)).toContain('c');
  });
});

describe('OpenInference', () => {
  it('AGENT root, LLM and TOOL spans, with the cost the span states', () => {
    const root = spanId();
    const { trace, byName } = mapped([
      {
        id: root,
        name: 'Agent',
        attributes: {
          'openinference.span.kind': 'AGENT',
          'input.value': 'plan a trip to Lisbon',
          'output.value': 'booked',
          'llm.token_count.total': 999,
        },
      },
      {
        name: 'ChatOpenAI',
        parent: root,
        attributes: {
          'openinference.span.kind': 'LLM',
          'llm.model_name': 'gpt-4o',
          'llm.provider': 'openai',
          'llm.token_count.prompt': 11,
          'llm.token_count.completion': 4,
          'llm.token_count.total': 15,
          'llm.cost.total': 0.000125,
          'llm.input_messages.0.message.role': 'system',
          'llm.input_messages.0.message.content': 'plan',
          'llm.input_messages.1.message.role': 'user',
          'llm.input_messages.1.message.content': 'Lisbon?',
          'llm.output_messages.0.message.role': 'assistant',
          'llm.output_messages.0.message.content': 'Flights found',
        },
      },
      {
        name: 'search_flights',
        parent: root,
        attributes: {
          'openinference.span.kind': 'TOOL',
          'tool.name': 'search_flights',
          'input.value': '{"to":"LIS"}',
          'output.value': '3 flights',
        },
      },
    ]);
    expect(byName('Agent').type).toBe('custom');
    expect(byName('ChatOpenAI')).toMatchObject({
      type: 'llm_call',
      payload: {
        provider: 'openai',
        model: 'gpt-4o',
        input: {
          messages: [
            { role: 'system', content: 'plan' },
            { role: 'user', content: 'Lisbon?' },
          ],
        },
        output: { content: 'Flights found' },
        usage: { inputTokens: 11, outputTokens: 4, totalTokens: 15 },
        costUsd: 0.000125,
      },
    });
    expect(byName('search_flights')).toMatchObject({
      type: 'tool_call',
      payload: { name: 'search_flights', input: { to: 'LIS' }, output: '3 flights' },
    });
    expect(trace).toMatchObject({
      inputSummary: 'plan a trip to Lisbon',
      outputSummary: 'booked',
      totalTokens: 15,
      totalCostUsd: '0.000125',
    });
  });
});

describe('OpenLLMetry', () => {
  it('llm.request.type and the indexed prompt and completion, traceloop tools', () => {
    const { byName } = mapped([
      {
        name: 'openai.chat',
        attributes: {
          'llm.request.type': 'chat',
          'gen_ai.system': 'openai',
          'gen_ai.request.model': 'gpt-3.5-turbo',
          'gen_ai.usage.prompt_tokens': 7,
          'gen_ai.usage.completion_tokens': 3,
          'gen_ai.prompt.0.role': 'user',
          'gen_ai.prompt.0.content': '2+2?',
          'gen_ai.completion.0.role': 'assistant',
          'gen_ai.completion.0.content': '4',
          'gen_ai.completion.0.finish_reason': 'stop',
        },
      },
      {
        name: 'calc.tool',
        attributes: {
          'traceloop.span.kind': 'tool',
          'traceloop.entity.name': 'calc',
          'traceloop.entity.input': '{"expr":"2+2"}',
        },
      },
    ]);
    expect(byName('openai.chat')).toMatchObject({
      type: 'llm_call',
      payload: {
        provider: 'openai',
        model: 'gpt-3.5-turbo',
        input: { messages: [{ role: 'user', content: '2+2?' }] },
        output: { content: '4', finishReason: 'stop' },
        usage: { inputTokens: 7, outputTokens: 3, totalTokens: 10 },
      },
    });
    expect(byName('calc.tool')).toMatchObject({
      type: 'tool_call',
      payload: { name: 'calc', input: { expr: '2+2' } },
    });
  });
});

describe('MCP', () => {
  it('a client tools/call is an mcp_call (not a tool_call) naming the server, method and tool', () => {
    const { trace, byName } = mapped([
      {
        name: 'tools/call get_weather',
        kind: 3,
        attributes: {
          'mcp.method.name': 'tools/call',
          'gen_ai.operation.name': 'execute_tool',
          'gen_ai.tool.name': 'get_weather',
          'gen_ai.tool.call.arguments': '{"city":"Oslo"}',
          'server.address': 'weather.example',
          'server.port': 443,
          'jsonrpc.request.id': '7',
        },
      },
    ]);
    expect(byName('tools/call get_weather')).toMatchObject({
      type: 'mcp_call',
      payload: {
        server: 'weather.example:443',
        method: 'tools/call',
        tool: 'get_weather',
        input: { city: 'Oslo' },
        attributes: { 'jsonrpc.request.id': '7' },
      },
    });
    expect(trace.toolsCalled).toEqual([]);
  });

  it("on the server's side, the server is the reporting service", () => {
    const { byName } = mapped(
      [{ name: 'resources/read', kind: 2, attributes: { 'mcp.method.name': 'resources/read' } }],
      'weather-mcp',
    );
    expect(byName('resources/read')).toMatchObject({
      type: 'mcp_call',
      payload: { server: 'weather-mcp', method: 'resources/read' },
    });
  });
});

describe('anything else', () => {
  it('is a custom event with its name and attributes, and span details under otel', () => {
    const { byName } = mapped(
      [
        {
          name: 'GET /api/quote',
          kind: 3,
          attributes: { 'http.request.method': 'GET', 'http.response.status_code': 200 },
        },
      ],
      'svc',
    );
    expect(byName('GET /api/quote')).toMatchObject({
      type: 'custom',
      payload: {
        name: 'GET /api/quote',
        data: { 'http.request.method': 'GET', 'http.response.status_code': 200 },
        otel: { spanKind: 'client', service: 'svc', scope: 'test@1' },
      },
    });
  });

  it('keeps odd attribute values storable: NaN as text, 64-bit integers exactly, deep lists cut', () => {
    let deep: Record<string, unknown> = { stringValue: 'bottom' };
    for (let i = 0; i < 100; i++) deep = { arrayValue: { values: [deep] } };
    const { spans } = mapExport({
      resourceSpans: [
        {
          scopeSpans: [
            {
              spans: [
                {
                  traceId: TRACE,
                  spanId: spanId(),
                  name: 'odd',
                  startTimeUnixNano: '1794909600000000000',
                  attributes: [
                    { key: 'nan', value: { doubleValue: 'NaN' } },
                    { key: 'big', value: { intValue: '9007199254740993' } },
                    { key: 'deep', value: deep },
                    { key: '__proto__', value: { stringValue: 'plain key' } },
                  ],
                },
              ],
            },
          ],
        },
      ],
    });
    const data = spans[0]!.event.payload.data as Record<string, unknown>;
    expect(data.nan).toBe('NaN');
    expect(data.big).toBe('9007199254740993');
    expect(JSON.stringify(data.deep)).toContain('[nested too deep]');
    expect(Object.getOwnPropertyDescriptor(data, '__proto__')?.value).toBe('plain key');
    expect(spans[0]!.event).toMatchObject({ endedAt: null, durationMs: null });
  });
});

describe('times from nanoseconds', () => {
  it('are exact to the microsecond whatever order the seconds come in', () => {
    const reference = (nanos: bigint) => {
      const millis = Number(nanos / 1_000_000n);
      const micros = String(Number((nanos / 1_000n) % 1_000n)).padStart(3, '0');
      return `${new Date(millis).toISOString().slice(0, -1)}${micros}Z`;
    };
    // seconds revisited out of order, second and millisecond edges, the epoch, year 10000+
    const times = [
      1_764_000_000_999_999_999n,
      1_764_000_001_000_000_000n,
      1_764_000_000_000_000_001n,
      1_764_000_001_000_999_000n,
      1_764_000_000_500_123_456n,
      1n,
      999_999n,
      1_000_000n,
      253_402_300_800_000_001_000n,
      1_764_000_000_999_999_999n,
    ];
    for (const nanos of times) expect(isoFromNanos(nanos)).toBe(reference(nanos));
  });
});
