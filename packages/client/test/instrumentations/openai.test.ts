import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { observeOpenAI } from '../../src/instrumentations/openai.js';
import {
  FakeUpstream,
  openAIChat,
  openAIChatStream,
  openAIEmbeddings,
  openAIError,
  openAIResponse,
  openAIResponseStream,
  type UpstreamReply,
} from '@flightlog/test-support';
import { lastTrace, recordedSession } from '../harness/recorded-session.js';

let upstream: FakeUpstream;
beforeAll(async () => {
  upstream = await new FakeUpstream(() => openAIChat()).start();
});
afterAll(() => upstream.close());

const sdk = () => new OpenAI({ apiKey: 'sk-test', baseURL: `${upstream.url}/v1`, maxRetries: 0 });
const replying = (reply: UpstreamReply | ((n: number) => UpstreamReply)) => {
  let n = 0;
  upstream.reply = () => (typeof reply === 'function' ? reply(++n) : reply);
};
const messages = [
  { role: 'system' as const, content: 'You are terse.' },
  { role: 'user' as const, content: 'Say hello' },
];

/** What an error looks like from the caller's side. */
const shape = (error: unknown) => {
  const e = error as InstanceType<typeof OpenAI.APIError>;
  return { class: e.constructor.name, status: e.status, message: e.message };
};

describe('observeOpenAI: chat.completions.create', () => {
  it('returns what the unwrapped client returns and records one llm_call with usage and exact cost', async () => {
    replying(openAIChat({ usage: { input: 12, output: 5 } }));
    const recorded = recordedSession();
    const plain = await sdk().chat.completions.create({ model: 'gpt-4o-mini', messages });
    const wrapped = await observeOpenAI(sdk(), recorded.session).chat.completions.create({
      model: 'gpt-4o-mini',
      messages,
    });
    // recorded on the next turn, and counted as soon as anything asks: nothing the caller can see waits
    expect(recorded.client.stats().recordedEvents).toBe(1);
    expect(wrapped).toEqual(plain);
    expect(upstream.requests.at(-1)?.body).toEqual(upstream.requests.at(-2)?.body);

    const events = await recorded.events();
    expect(events).toHaveLength(1);
    const [event] = events;
    expect(event).toMatchObject({
      type: 'llm_call',
      status: 'ok',
      errorMessage: null,
      parentEventId: null,
    });
    expect(event?.durationMs).toBeGreaterThanOrEqual(0);
    expect(Date.parse(event!.endedAt!)).toBeGreaterThanOrEqual(Date.parse(event!.startedAt));
    expect(event?.payload).toEqual({
      provider: 'openai',
      model: 'gpt-4o-mini-2024-07-18',
      operation: 'chat.completions',
      input: { messages },
      output: { content: 'Hello there', finishReason: 'stop' },
      usage: { inputTokens: 12, outputTokens: 5, totalTokens: 17 },
      // gpt-4o-mini: $0.15 in, $0.60 out per million tokens
      costUsd: 0.0000048,
      streamed: false,
      responseId: 'chatcmpl-1',
    });
    expect(lastTrace(recorded)).toMatchObject({ totalTokens: 17, totalCostUsd: '0.0000048' });
    expect(recorded.logger.lines).toEqual([]);
  });

  it('records the call as it happened, whatever the caller does with its objects next', async () => {
    // The event is built on the next turn of the event loop: what the caller does in between —
    // push to its history, edit a message, edit the completion, end the session — changes
    // nothing recorded, and ending the session right away loses nothing.
    replying(openAIChat({ usage: { input: 12, output: 5 } }));
    const recorded = recordedSession();
    const history: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'Say hello' },
    ];
    const openai = observeOpenAI(sdk(), recorded.session);
    const completion = await openai.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: history,
    });
    history.push(completion.choices[0]!.message);
    history[1]!.content = 'edited afterwards';
    completion.choices[0]!.message.content = 'edited afterwards';
    completion.choices[0]!.finish_reason = 'length';
    completion.usage!.prompt_tokens = 1_000_000;
    completion.model = 'edited-afterwards';
    recorded.session.end();

    const [event, ...more] = await recorded.events();
    expect(more).toEqual([]);
    expect(event?.payload).toMatchObject({
      model: 'gpt-4o-mini-2024-07-18',
      input: { messages },
      output: { content: 'Hello there', finishReason: 'stop' },
      usage: { inputTokens: 12, outputTokens: 5, totalTokens: 17 },
    });
    expect(lastTrace(recorded)).toMatchObject({
      status: 'completed',
      eventCount: 1,
      totalTokens: 17,
    });
  });

  it('tells a call that ends after the session ended as such, though its costUsd throws', async () => {
    replying(openAIChat({ usage: { input: 12, output: 5 } }));
    const recorded = recordedSession();
    const openai = observeOpenAI(sdk(), recorded.session, {
      costUsd: () => {
        throw new Error('no price today');
      },
    });
    const call = openai.chat.completions.create({ model: 'gpt-4o-mini', messages });
    recorded.session.end();
    await call;
    await new Promise((resolve) => setImmediate(resolve));
    expect(recorded.logger.matching('after the session ended').length).toBeGreaterThan(0);
    expect(recorded.logger.matching('no price today')).toHaveLength(0);
    expect(recorded.client.stats().invalidEvents).toBe(0);
  });

  it('asks costUsd when the call ends, as it was then, not when its event is recorded', async () => {
    replying(openAIChat({ usage: { input: 12, output: 5 } }));
    const recorded = recordedSession();
    let rate = 1;
    const asked: { messages: number; model: unknown }[] = [];
    const openai = observeOpenAI(sdk(), recorded.session, {
      costUsd: ({ request }) => {
        const body = request as { messages: unknown[]; model: unknown };
        asked.push({ messages: body.messages.length, model: body.model });
        return rate;
      },
    });
    const body: OpenAI.ChatCompletionCreateParamsNonStreaming = {
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Say hello' }],
    };
    const completion = await openai.chat.completions.create(body);
    rate = 2;
    body.messages.push(completion.choices[0]!.message);
    body.model = 'gpt-4o';
    replying(openAIChatStream({ usage: { input: 3, output: 2 } }));
    const stream = await openai.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Say hello' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    for await (const _chunk of stream) void _chunk;
    rate = 3;
    const events = await recorded.events();
    expect(events.map((e) => (e.payload as { costUsd: number }).costUsd)).toEqual([1, 2]);
    expect(asked[0]).toEqual({ messages: 1, model: 'gpt-4o-mini' });
    expect(asked).toHaveLength(2);
  });

  it('records the tool calls the model asked for, and prices cached input tokens apart', async () => {
    replying(
      openAIChat({
        content: null,
        model: 'gpt-4o-2024-08-06',
        usage: { input: 1000, output: 20, cached: 400 },
        toolCalls: [{ id: 'call_1', name: 'jupiter_quote', arguments: '{"amount":"1"}' }],
      }),
    );
    const recorded = recordedSession();
    const result = await observeOpenAI(sdk(), recorded.session).chat.completions.create({
      model: 'gpt-4o',
      messages,
      tools: [
        {
          type: 'function',
          function: { name: 'jupiter_quote', parameters: { type: 'object', properties: {} } },
        },
      ],
    });
    expect(result.choices[0]?.message.tool_calls?.[0]?.id).toBe('call_1');
    const [event] = await recorded.events();
    expect(event?.payload).toMatchObject({
      output: {
        content: '',
        finishReason: 'tool_calls',
        toolCalls: [{ id: 'call_1', name: 'jupiter_quote', arguments: '{"amount":"1"}' }],
      },
      usage: { inputTokens: 1000, outputTokens: 20, totalTokens: 1020, cachedInputTokens: 400 },
      // 600 × $2.50 + 400 × $1.25 + 20 × $10, per million
      costUsd: 0.0022,
    });
  });

  it('throws exactly what the unwrapped client throws on 4xx and 5xx, and records the error', async () => {
    for (const status of [400, 429, 500, 503]) {
      replying(openAIError(status, `upstream says ${status}`));
      const recorded = recordedSession();
      const plain = await sdk()
        .chat.completions.create({ model: 'gpt-4o-mini', messages })
        .catch((e: unknown) => e);
      const wrapped = await observeOpenAI(sdk(), recorded.session)
        .chat.completions.create({ model: 'gpt-4o-mini', messages })
        .catch((e: unknown) => e);
      expect(wrapped).toBeInstanceOf(OpenAI.APIError);
      expect(shape(wrapped)).toEqual(shape(plain));
      const events = await recorded.events();
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({
        type: 'llm_call',
        status: 'error',
        errorMessage: (wrapped as Error).message,
      });
      expect(events[0]?.payload).toMatchObject({
        model: 'gpt-4o-mini',
        usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 },
        usageReported: false,
        costUsd: 0,
      });
    }
  });

  it("records a call the SDK retried (a 500, then 200) once, as ok, its time the retries' too", async () => {
    replying((n) => (n === 1 ? openAIError(500, 'try again') : openAIChat()));
    const recorded = recordedSession();
    const openai = observeOpenAI(
      new OpenAI({ apiKey: 'sk-test', baseURL: `${upstream.url}/v1`, maxRetries: 1 }),
      recorded.session,
    );
    const before = upstream.requests.length;
    await openai.chat.completions.create({ model: 'gpt-4o-mini', messages });
    expect(upstream.requests.length - before).toBe(2);
    const events = await recorded.events();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ status: 'ok' });
  });

  it('records an aborted request (the signal fired before the answer) as aborted', async () => {
    replying({ sse: [], hang: true });
    const recorded = recordedSession();
    const controller = new AbortController();
    const call = observeOpenAI(sdk(), recorded.session).chat.completions.create(
      { model: 'gpt-4o-mini', messages },
      { signal: controller.signal },
    );
    setTimeout(() => controller.abort(), 20);
    const error = await call.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.APIUserAbortError);
    const [event] = await recorded.events();
    expect(event).toMatchObject({ status: 'error', errorMessage: (error as Error).message });
    expect(event?.payload).toMatchObject({ aborted: true });
  });

  it('records 25 concurrent calls once each, with exact totals', async () => {
    replying((n) => openAIChat({ content: `answer ${n}`, usage: { input: n, output: 2 * n } }));
    const recorded = recordedSession();
    const openai = observeOpenAI(sdk(), recorded.session);
    const results = await Promise.all(
      Array.from({ length: 25 }, (_, i) =>
        openai.chat.completions.create({
          model: 'gpt-4o-mini',
          messages: [{ role: 'user', content: `q${i}` }],
        }),
      ),
    );
    const events = await recorded.events();
    expect(events).toHaveLength(25);
    expect(new Set(events.map((e) => e.id)).size).toBe(25);
    const byAnswer = new Map(
      events.map((e) => [(e.payload as { output: { content: string } }).output.content, e]),
    );
    for (const result of results) {
      const content = result.choices[0]?.message.content ?? '';
      const n = Number(content.split(' ')[1]);
      expect(byAnswer.get(content)?.payload).toMatchObject({
        usage: { inputTokens: n, outputTokens: 2 * n, totalTokens: 3 * n },
      });
    }
    // Σ 3n for n = 1..25
    expect(lastTrace(recorded)?.totalTokens).toBe(975);
  });

  it('is recorded once when the result is read several ways (await twice, withResponse)', async () => {
    replying(openAIChat());
    const recorded = recordedSession();
    const call = observeOpenAI(sdk(), recorded.session).chat.completions.create({
      model: 'gpt-4o-mini',
      messages,
    });
    const first = await call;
    const second = await call;
    const { data, response } = await call.withResponse();
    expect(second).toBe(first);
    expect(data).toBe(first);
    expect(response.status).toBe(200);
    expect(await recorded.events()).toHaveLength(1);
  });

  it('records the SDK helpers built on create (parse, stream) exactly once each', async () => {
    replying(openAIChat({ content: '{"ok":true}' }));
    const recorded = recordedSession();
    const openai = observeOpenAI(sdk(), recorded.session);
    const parsed = await openai.chat.completions.parse({ model: 'gpt-4o-mini', messages });
    expect(parsed.choices[0]?.message.content).toBe('{"ok":true}');
    replying(openAIChatStream({ usage: { input: 3, output: 4 } }));
    const runner = openai.chat.completions.stream({
      model: 'gpt-4o-mini',
      messages,
      stream_options: { include_usage: true },
    });
    const final = await runner.finalChatCompletion();
    expect(final.choices[0]?.message.content).toBe('Hello there');
    const events = await recorded.events();
    expect(events.map((e) => (e.payload as { streamed: boolean }).streamed)).toEqual([false, true]);
    expect(events[1]?.payload).toMatchObject({
      output: { content: 'Hello there', finishReason: 'stop' },
      usage: { inputTokens: 3, outputTokens: 4, totalTokens: 7 },
    });
  });
});

describe('observeOpenAI: streaming chat completions', () => {
  const read = async (stream: AsyncIterable<unknown>) => {
    const items: unknown[] = [];
    for await (const item of stream) items.push(item);
    return items;
  };

  it('hands the caller the same chunks, and records the call at the end of the stream with its usage', async () => {
    replying(openAIChatStream({ usage: { input: 9, output: 3 } }));
    const recorded = recordedSession();
    const body = {
      model: 'gpt-4o-mini',
      messages,
      stream: true as const,
      stream_options: { include_usage: true },
    };
    const plain = await read(await sdk().chat.completions.create(body));
    const stream = await observeOpenAI(sdk(), recorded.session).chat.completions.create(body);
    expect(await recorded.flushed()).toEqual([]); // nothing before the stream is read
    const wrapped = await read(stream);
    expect(recorded.client.stats().recordedEvents).toBe(1);
    expect(wrapped).toEqual(plain);

    const events = await recorded.events();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ status: 'ok' });
    expect(events[0]?.payload).toMatchObject({
      model: 'gpt-4o-mini-2024-07-18',
      output: { content: 'Hello there', finishReason: 'stop' },
      usage: { inputTokens: 9, outputTokens: 3, totalTokens: 12 },
      costUsd: 0.00000315,
      streamed: true,
    });
  });

  it('records a stream without usage (no include_usage) as usageReported: false, not as zero cost silently', async () => {
    replying(openAIChatStream({ usage: null }));
    const recorded = recordedSession();
    const stream = await observeOpenAI(sdk(), recorded.session).chat.completions.create({
      model: 'gpt-4o-mini',
      messages,
      stream: true,
    });
    await read(stream);
    const [event] = await recorded.events();
    expect(event?.payload).toMatchObject({
      output: { content: 'Hello there' },
      usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 },
      usageReported: false,
    });
  });

  it('assembles streamed tool calls', async () => {
    replying(
      openAIChatStream({
        pieces: [],
        usage: { input: 5, output: 6 },
        toolCalls: [
          { id: 'call_a', name: 'get_price', arguments: '{"mint":"SOL"}' },
          { id: 'call_b', name: 'get_balance', arguments: '{"wallet":"abc"}' },
        ],
      }),
    );
    const recorded = recordedSession();
    await read(
      await observeOpenAI(sdk(), recorded.session).chat.completions.create({
        model: 'gpt-4o-mini',
        messages,
        stream: true,
        stream_options: { include_usage: true },
      }),
    );
    const [event] = await recorded.events();
    expect(event?.payload).toMatchObject({
      output: {
        finishReason: 'tool_calls',
        toolCalls: [
          { id: 'call_a', name: 'get_price', arguments: '{"mint":"SOL"}' },
          { id: 'call_b', name: 'get_balance', arguments: '{"wallet":"abc"}' },
        ],
      },
    });
  });

  it('records a stream the caller stopped reading (break) as aborted, with what was read', async () => {
    replying(openAIChatStream({ pieces: ['a', 'b', 'c', 'd'], gapMs: 5 }));
    const recorded = recordedSession();
    const stream = await observeOpenAI(sdk(), recorded.session).chat.completions.create({
      model: 'gpt-4o-mini',
      messages,
      stream: true,
    });
    let seen = 0;
    for await (const _chunk of stream) if (++seen === 3) break;
    const [event] = await recorded.events();
    expect(event).toMatchObject({
      status: 'error',
      errorMessage: 'the stream was aborted before it finished',
    });
    expect(event?.payload).toMatchObject({ output: { content: 'ab' }, aborted: true });
  });

  it('records a stream aborted through its controller or the request signal as aborted', async () => {
    for (const how of ['controller', 'signal'] as const) {
      replying(openAIChatStream({ pieces: ['x', 'y'], hang: true, cut: 2 }));
      const recorded = recordedSession();
      const signal = new AbortController();
      const stream = await observeOpenAI(sdk(), recorded.session).chat.completions.create(
        { model: 'gpt-4o-mini', messages, stream: true },
        { signal: signal.signal },
      );
      const items: unknown[] = [];
      const reading = (async () => {
        for await (const item of stream) {
          items.push(item);
          if (items.length === 2) {
            if (how === 'controller') stream.controller.abort();
            else signal.abort();
          }
        }
      })();
      await reading.catch(() => undefined);
      const [event] = await recorded.events();
      expect(event?.status).toBe('error');
      expect(event?.payload).toMatchObject({ aborted: true, output: { content: 'x' } });
    }
  });

  it('records each side of a tee() once, as one call', async () => {
    replying(openAIChatStream({ usage: { input: 1, output: 1 } }));
    const recorded = recordedSession();
    const stream = await observeOpenAI(sdk(), recorded.session).chat.completions.create({
      model: 'gpt-4o-mini',
      messages,
      stream: true,
      stream_options: { include_usage: true },
    });
    const [left, right] = stream.tee();
    const [a, b] = await Promise.all([read(left), read(right)]);
    expect(a).toEqual(b);
    const events = await recorded.events();
    expect(events).toHaveLength(1);
    expect(events[0]?.payload).toMatchObject({ output: { content: 'Hello there' } });
  });
});

describe('observeOpenAI: responses and embeddings', () => {
  it('records responses.create, plain and streamed', async () => {
    replying(openAIResponse({ usage: { input: 20, output: 8 } }));
    const recorded = recordedSession();
    const openai = observeOpenAI(sdk(), recorded.session);
    const response = await openai.responses.create({
      model: 'gpt-4.1',
      instructions: 'Be brief',
      input: 'Hi',
    });
    expect(response.output_text).toBe('Hi from responses');
    replying(openAIResponseStream({ usage: { input: 30, output: 10 } }));
    const stream = await openai.responses.create({ model: 'gpt-4.1', input: 'Hi', stream: true });
    const types: string[] = [];
    for await (const event of stream) types.push(event.type);
    expect(types.at(-1)).toBe('response.completed');

    const [plain, streamed] = await recorded.events();
    expect(plain?.payload).toEqual({
      provider: 'openai',
      model: 'gpt-4.1-2025-04-14',
      operation: 'responses',
      input: {
        messages: [
          { role: 'system', content: 'Be brief' },
          { role: 'user', content: 'Hi' },
        ],
      },
      output: { content: 'Hi from responses', finishReason: 'stop' },
      usage: { inputTokens: 20, outputTokens: 8, totalTokens: 28 },
      // gpt-4.1: $2 in, $8 out per million
      costUsd: 0.000104,
      streamed: false,
      responseId: 'resp_1',
    });
    expect(streamed?.payload).toMatchObject({
      output: { content: 'Hi from responses', finishReason: 'stop' },
      usage: { inputTokens: 30, outputTokens: 10, totalTokens: 40 },
      costUsd: 0.00014,
      streamed: true,
    });
  });

  it('records embeddings.create with the input and the count of vectors', async () => {
    // The SDK asks for base64 unless told otherwise, and decodes it.
    upstream.reply = (request) =>
      openAIEmbeddings(2, 4, 6, (request.body as { encoding_format?: string }).encoding_format);
    const recorded = recordedSession();
    const result = await observeOpenAI(sdk(), recorded.session).embeddings.create({
      model: 'text-embedding-3-small',
      input: ['one', 'two'],
    });
    expect(result.data).toHaveLength(2);
    const [event] = await recorded.events();
    expect(event?.payload).toMatchObject({
      operation: 'embeddings',
      model: 'text-embedding-3-small',
      input: {
        messages: [
          { role: 'input', content: 'one' },
          { role: 'input', content: 'two' },
        ],
      },
      usage: { inputTokens: 6, outputTokens: 0, totalTokens: 6 },
      costUsd: 0.00000012,
      embeddings: 2,
      dimensions: 4,
    });
  });
});

describe('observeOpenAI: options and the wrapped object', () => {
  it('capture: false records metadata only', async () => {
    replying(
      openAIChat({ toolCalls: [{ id: 'c1', name: 'secret_tool', arguments: '{"key":"x"}' }] }),
    );
    const recorded = recordedSession();
    await observeOpenAI(sdk(), recorded.session, { capture: false }).chat.completions.create({
      model: 'gpt-4o-mini',
      messages,
    });
    const [event] = await recorded.events();
    expect(event?.payload).toMatchObject({
      input: { messages: [] },
      output: { content: '', finishReason: 'tool_calls', toolCalls: [{ name: 'secret_tool' }] },
      usage: { totalTokens: 17 },
      captured: false,
    });
    expect(JSON.stringify(event?.payload)).not.toContain('Say hello');
    expect(JSON.stringify(event?.payload)).not.toContain('"key"');
  });

  it('prices: per model over the table; costUsd: per call; an unknown model is marked unpriced', async () => {
    replying(openAIChat({ model: 'my-finetune', usage: { input: 1_000_000, output: 1_000_000 } }));
    const recorded = recordedSession();
    const byTable = observeOpenAI(sdk(), recorded.session, {
      prices: { 'my-finetune': { input: 1, output: 2 } },
    });
    await byTable.chat.completions.create({ model: 'my-finetune', messages });
    const byCall = observeOpenAI(sdk(), recorded.session, {
      costUsd: ({ model, usage }) =>
        model === 'my-finetune' ? usage.totalTokens * 1e-9 : undefined,
    });
    await byCall.chat.completions.create({ model: 'my-finetune', messages });
    await observeOpenAI(sdk(), recorded.session).chat.completions.create({
      model: 'my-finetune',
      messages,
    });
    const events = await recorded.events();
    expect(events.map((e) => (e.payload as { costUsd: number }).costUsd)).toEqual([3, 0.002, 0]);
    expect(events[2]?.payload).toMatchObject({ priced: false });
  });

  it('behaves like the client: instanceof, stable properties, other methods, this, the original untouched', async () => {
    const recorded = recordedSession();
    const original = sdk();
    const wrapped = observeOpenAI(original, recorded.session);
    expect(wrapped).toBeInstanceOf(OpenAI);
    expect(wrapped.chat).toBe(wrapped.chat);
    expect(wrapped.chat.completions.create).toBe(wrapped.chat.completions.create);
    expect(wrapped.chat.completions.create.name).toBe(original.chat.completions.create.name);
    expect(wrapped.baseURL).toBe(original.baseURL);
    expect(original.chat.completions).not.toBe(wrapped.chat.completions);
    // A method of the client itself (private fields inside) works on the wrapper.
    expect(wrapped.withOptions({ timeout: 5 })).toBeInstanceOf(OpenAI);
    replying({ json: { object: 'list', data: [{ id: 'gpt-4o', object: 'model' }] } });
    const models = await wrapped.models.list();
    expect(models.data[0]?.id).toBe('gpt-4o');
    // `this` as the caller gives it
    replying(openAIChat());
    const { create } = wrapped.chat.completions;
    const unbound = await Promise.resolve()
      .then(() => create({ model: 'gpt-4o-mini', messages }))
      .catch((e: unknown) => e);
    const unboundPlain = await Promise.resolve()
      .then(() => original.chat.completions.create.call(undefined, { model: 'x', messages }))
      .catch((e: unknown) => e);
    expect(String(unbound)).toBe(String(unboundPlain));
    const bound = (await create.call(wrapped.chat.completions, {
      model: 'gpt-4o-mini',
      messages,
    })) as OpenAI.ChatCompletion;
    expect(bound.choices[0]?.message.content).toBe('Hello there');
    const events = await recorded.events();
    expect(events.map((e) => e.status)).toEqual(['error', 'ok']);
  });

  it('never throws into the host: a broken session, or a non-object, leaves the call as it is', async () => {
    replying(openAIChat());
    const broken = {
      traceId: 't',
      timed() {
        throw new Error('session broke');
      },
    } as never;
    const result = await observeOpenAI(sdk(), broken).chat.completions.create({
      model: 'gpt-4o-mini',
      messages,
    });
    expect(result.choices[0]?.message.content).toBe('Hello there');
    expect(observeOpenAI(null as never, broken)).toBe(null);
    const disabled = recordedSession({ enabled: false });
    const viaDisabled = await observeOpenAI(sdk(), disabled.session).chat.completions.create({
      model: 'gpt-4o-mini',
      messages,
    });
    expect(viaDisabled.choices[0]?.message.content).toBe('Hello there');
  });

  it('nests under the step it runs in', async () => {
    replying(openAIChat());
    const recorded = recordedSession();
    const openai = observeOpenAI(sdk(), recorded.session);
    await recorded.session.timed(
      'tool_call',
      async () => {
        await openai.chat.completions.create({ model: 'gpt-4o-mini', messages });
      },
      () => ({ name: 'plan' }),
    );
    const events = await recorded.events();
    const outer = events.find((e) => e.type === 'tool_call');
    const inner = events.find((e) => e.type === 'llm_call');
    expect(outer?.sequence).toBe(0);
    expect(inner).toMatchObject({ type: 'llm_call', parentEventId: outer?.id });
  });
});
