import { context, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { generateText, jsonSchema, stepCountIs, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { getAnalysis, jobsOf, startTestWorker } from '../harness/analysis.js';
import { describeEngines } from '../harness/engines.js';
import { send } from '../harness/http.js';
import { otlpExporter } from '../harness/otel.js';
import { SseClient } from '../harness/sse-client.js';
import { startTestServer, type TestServer } from '../harness/test-server.js';
import { waitFor } from '../harness/wait.js';

/*
 * The Vercel AI SDK (`ai` 6) with `experimental_telemetry` on, as a user wires it: a tracer
 * provider with a batch processor and the real OTLP protobuf exporter aimed at Flightlog, the
 * agent's key in its headers, and Node's async context manager (what NodeTracerProvider's
 * register() installs; without one the SDK's spans would not nest). The model is the SDK's own
 * mock: no network.
 */

type ModelAnswer = Awaited<ReturnType<MockLanguageModelV3['doGenerate']>>;

const usage = (input: number, output: number) => ({
  inputTokens: { total: input, noCache: input, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: output, text: output, reasoning: 0 },
});
const RESPONSE_MODEL = 'gpt-4o-mini-2024-07-18';

const toolCallAnswer: ModelAnswer = {
  content: [
    { type: 'tool-call', toolCallId: 'call-1', toolName: 'weather', input: '{"city":"Paris"}' },
  ],
  finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
  usage: usage(20, 10),
  warnings: [],
  response: { id: 'resp-1', modelId: RESPONSE_MODEL, timestamp: new Date() },
};
const textAnswer: ModelAnswer = {
  content: [{ type: 'text', text: 'Paris: 18 °C and sunny.' }],
  finishReason: { unified: 'stop', raw: 'stop' },
  usage: usage(40, 6),
  warnings: [],
  response: { id: 'resp-2', modelId: RESPONSE_MODEL, timestamp: new Date() },
};

/** A model whose calls answer in turn: an answer, or an error it throws. */
function scriptedModel(...answers: (ModelAnswer | Error)[]): MockLanguageModelV3 {
  let call = 0;
  return new MockLanguageModelV3({
    provider: 'openai.chat',
    modelId: 'gpt-4o-mini',
    doGenerate: async () => {
      const answer = answers[call++];
      if (answer === undefined) throw new Error('the model was called more times than scripted');
      if (answer instanceof Error) throw answer;
      return answer;
    },
  });
}

const weatherTool = tool({
  description: 'Current weather in a city',
  inputSchema: jsonSchema<{ city: string }>({
    type: 'object',
    properties: { city: { type: 'string' } },
    required: ['city'],
  }),
  execute: async ({ city }) => ({ city, celsius: 18, sky: 'sunny' }),
});

/** A tracer exporting to `url` with `apiKey`, as the user's process would hold it. */
function exportingTracer(
  url: string,
  apiKey: string,
): { tracer: Tracer; provider: BasicTracerProvider } {
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'weather-agent' }),
    spanProcessors: [
      new BatchSpanProcessor(otlpExporter(url, { encoding: 'protobuf', apiKey, gzip: true })),
    ],
  });
  return { tracer: provider.getTracer('weather-agent'), provider };
}

describeEngines('OTLP ingest from the Vercel AI SDK with telemetry on [%s]', (engine) => {
  let server: TestServer;
  beforeAll(async () => {
    expect(context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())).toBe(
      true,
    );
    server = await startTestServer(engine);
  });
  afterAll(async () => {
    context.disable();
    await server.close();
  });

  /** A fresh agent, a viewer of it, its live stream open, and a tracer exporting with its key. */
  async function agentSetUp(name: string) {
    const agent = await server.createAgent({ name });
    const viewer = await server.userToken(`${name}-viewer`, agent.agentId);
    const live = await SseClient.open(`${server.url}/v1/agents/${agent.agentId}/live`, viewer);
    expect(live.status).toBe(200);
    return { agent, viewer, live, ...exportingTracer(server.url, agent.apiKey) };
  }

  const get = async (path: string, token: string) => {
    const res = await send(server.url, path, undefined, { token });
    expect(res.status).toBe(200);
    return res.body as any;
  };

  /** The agent's one run, as the dashboard lists it, and its events. */
  async function theOnlyRun(agentId: string, viewer: string) {
    const { traces } = await get(`/v1/agents/${agentId}/traces`, viewer);
    expect(traces).toHaveLength(1);
    const { trace, events, nextCursor } = await get(`/v1/traces/${traces[0].id}`, viewer);
    expect(nextCursor).toBeNull();
    return { trace, events: events as any[] };
  }

  async function autopsyOf(traceId: string, viewer: string): Promise<string> {
    const worker = startTestWorker(server.store);
    try {
      const analysis = await waitFor(async () => {
        const res = await getAnalysis(server.url, viewer, traceId);
        return res.body.status === 'done' ? res.body : undefined;
      }, 'the autopsy');
      return analysis.autopsy as string;
    } finally {
      await worker.stop(5_000);
    }
  }

  it('a generateText with a tool call becomes one run: model calls and the tool under the generation, tokens counted once', async () => {
    const { agent, viewer, live, tracer, provider } = await agentSetUp('ai-sdk-ok');
    try {
      const result = await generateText({
        model: scriptedModel(toolCallAnswer, textAnswer),
        prompt: 'What is the weather in Paris?',
        tools: { weather: weatherTool },
        stopWhen: stepCountIs(3),
        experimental_telemetry: { isEnabled: true, tracer },
      });
      expect(result.text).toBe('Paris: 18 °C and sunny.');
      await provider.forceFlush();

      const { trace, events } = await theOnlyRun(agent.agentId, viewer);
      expect(trace).toMatchObject({
        status: 'completed',
        inputSummary: 'What is the weather in Paris?',
        outputSummary: 'Paris: 18 °C and sunny.',
        eventCount: 4,
        // 30 + 46 from the two model calls; the generation span's own sum (76) is not added
        totalTokens: 76,
        toolsCalled: ['weather'],
        errorMessage: null,
      });
      expect(events.map((e) => [e.sequence, e.type, e.payload.otel.spanName])).toEqual([
        [0, 'custom', 'ai.generateText'],
        [1, 'llm_call', 'ai.generateText.doGenerate'],
        [2, 'tool_call', 'ai.toolCall'],
        [3, 'llm_call', 'ai.generateText.doGenerate'],
      ]);
      const [generation, firstCall, weather, secondCall] = events;
      expect(generation.parentEventId).toBeNull();
      expect(generation.id.startsWith(`${trace.id}-`)).toBe(true);
      for (const child of [firstCall, weather, secondCall])
        expect(child).toMatchObject({ parentEventId: generation.id, status: 'ok' });
      expect(firstCall.payload).toMatchObject({
        provider: 'openai.chat',
        model: RESPONSE_MODEL,
        usage: { inputTokens: 20, outputTokens: 10, totalTokens: 30 },
        output: { finishReason: 'tool-calls' },
        input: { messages: [{ role: 'user', content: 'What is the weather in Paris?' }] },
        streamed: false,
      });
      expect(secondCall.payload).toMatchObject({
        provider: 'openai.chat',
        model: RESPONSE_MODEL,
        usage: { inputTokens: 40, outputTokens: 6, totalTokens: 46 },
        output: { content: 'Paris: 18 °C and sunny.', finishReason: 'stop' },
      });
      expect(weather.payload).toMatchObject({
        name: 'weather',
        callId: 'call-1',
        input: { city: 'Paris' },
        output: { city: 'Paris', celsius: 18, sky: 'sunny' },
      });

      // the live stream carried the run, ending completed with every event
      await live.waitFor(
        (c) => c.traces().some((m) => m.item.trace.status === 'completed'),
        5_000,
        'the completed run',
      );
      const messages = live.traces();
      expect(messages.every((m) => m.item.trace.id === trace.id)).toBe(true);
      expect(messages.flatMap((m) => m.item.events.map((e: any) => e.id)).sort()).toEqual(
        events.map((e) => e.id).sort(),
      );

      const autopsy = await autopsyOf(trace.id, viewer);
      expect(autopsy).toMatch(/^## Verdict: succeeded/);
      expect(autopsy).toContain('| `weather` | 1 | 0 |');
      expect(autopsy).toContain('**Tokens:** 76 over 2 model calls (60 in, 16 out)');
      expect(await jobsOf(server.store, trace.id)).toHaveLength(1);
    } finally {
      live.close();
      await provider.shutdown();
    }
  });

  it('a model call that fails after the tool ran makes an errored run whose autopsy names that call', async () => {
    const { agent, viewer, live, tracer, provider } = await agentSetUp('ai-sdk-error');
    try {
      await expect(
        generateText({
          model: scriptedModel(toolCallAnswer, new Error('upstream overloaded (529)')),
          prompt: 'What is the weather in Paris?',
          tools: { weather: weatherTool },
          stopWhen: stepCountIs(3),
          maxRetries: 0,
          experimental_telemetry: { isEnabled: true, tracer },
        }),
      ).rejects.toThrow('upstream overloaded (529)');
      await provider.forceFlush();

      const { trace, events } = await theOnlyRun(agent.agentId, viewer);
      expect(trace).toMatchObject({
        status: 'errored',
        errorMessage: 'upstream overloaded (529)',
        eventCount: 4,
        totalTokens: 30,
        toolsCalled: ['weather'],
      });
      expect(events.map((e) => [e.type, e.status])).toEqual([
        ['custom', 'error'],
        ['llm_call', 'ok'],
        ['tool_call', 'ok'],
        ['llm_call', 'error'],
      ]);
      const failed = events[3];
      expect(failed).toMatchObject({
        parentEventId: events[0].id,
        errorMessage: 'upstream overloaded (529)',
      });

      await live.waitFor(
        (c) => c.traces().some((m) => m.item.trace.status === 'errored'),
        5_000,
        'the errored run',
      );
      expect(live.traces().every((m) => m.item.trace.id === trace.id)).toBe(true);

      const autopsy = await autopsyOf(trace.id, viewer);
      expect(autopsy).toMatch(/^## Verdict: failed/);
      // the likely cause names the step where it started: the second model call, and its error
      expect(autopsy).toContain(
        `**Likely cause:** #${failed.sequence} \`llm_call gpt-4o-mini\` failed: upstream overloaded (529)`,
      );
    } finally {
      live.close();
      await provider.shutdown();
    }
  });
});
