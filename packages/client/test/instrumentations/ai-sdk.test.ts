import { generateText, stepCountIs, streamText, tool, wrapLanguageModel } from 'ai';
import { MockLanguageModelV3, simulateReadableStream } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { flightlogMiddleware } from '../../src/instrumentations/ai-sdk.js';
import { failingSessions, refusedPayloadSession } from '../harness/failing-sessions.js';
import { lastTrace, recordedSession } from '../harness/recorded-session.js';

const usage = (input: number, output: number, cacheRead = 0) => ({
  inputTokens: { total: input, noCache: input - cacheRead, cacheRead, cacheWrite: 0 },
  outputTokens: { total: output, text: output, reasoning: 0 },
});
const stop = { unified: 'stop' as const, raw: 'stop' };

function textResult(text: string, input = 12, output = 5) {
  return {
    content: [{ type: 'text' as const, text }],
    finishReason: stop,
    usage: usage(input, output),
    warnings: [],
    response: { id: 'resp-1', modelId: 'gpt-4o-mini-2024-07-18', timestamp: new Date(0) },
  };
}

function streamParts(pieces: string[], input = 9, output = 3) {
  return [
    { type: 'stream-start' as const, warnings: [] },
    { type: 'response-metadata' as const, id: 'resp-2', modelId: 'gpt-4o-mini-2024-07-18' },
    { type: 'text-start' as const, id: 't' },
    ...pieces.map((delta) => ({ type: 'text-delta' as const, id: 't', delta })),
    { type: 'text-end' as const, id: 't' },
    { type: 'finish' as const, finishReason: stop, usage: usage(input, output) },
  ];
}

const model = (options: ConstructorParameters<typeof MockLanguageModelV3>[0]) =>
  new MockLanguageModelV3({ provider: 'openai.chat', modelId: 'gpt-4o-mini', ...options });

describe('flightlogMiddleware for the AI SDK', () => {
  it('generateText: the same result as the unwrapped model, and one llm_call with usage and cost', async () => {
    const recorded = recordedSession();
    const plain = await generateText({
      model: model({ doGenerate: textResult('Hello there') }),
      prompt: 'Say hello',
      system: 'Be terse',
    });
    const wrapped = await generateText({
      model: wrapLanguageModel({
        model: model({ doGenerate: textResult('Hello there') }),
        middleware: flightlogMiddleware(recorded.session),
      }),
      prompt: 'Say hello',
      system: 'Be terse',
    });
    expect(wrapped.text).toBe(plain.text);
    expect(wrapped.usage).toEqual(plain.usage);
    expect(wrapped.finishReason).toBe(plain.finishReason);
    const events = await recorded.events();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'llm_call', status: 'ok' });
    expect(events[0]?.payload).toEqual({
      provider: 'openai.chat',
      model: 'gpt-4o-mini-2024-07-18',
      operation: 'generate',
      input: {
        messages: [
          { role: 'system', content: 'Be terse' },
          { role: 'user', content: 'Say hello' },
        ],
      },
      output: { content: 'Hello there', finishReason: 'stop' },
      usage: { inputTokens: 12, outputTokens: 5, totalTokens: 17 },
      costUsd: 0.0000048,
      streamed: false,
      responseId: 'resp-1',
    });
  });

  it('streamText: the caller reads the same text, and the call is recorded at the end of the stream', async () => {
    const recorded = recordedSession();
    const parts = streamParts(['Hel', 'lo', ' there']);
    const plain = streamText({
      model: model({ doStream: { stream: simulateReadableStream({ chunks: parts }) } }),
      prompt: 'Say hello',
    });
    const plainText: string[] = [];
    for await (const piece of plain.textStream) plainText.push(piece);
    const wrapped = streamText({
      model: wrapLanguageModel({
        model: model({ doStream: { stream: simulateReadableStream({ chunks: parts }) } }),
        middleware: flightlogMiddleware(recorded.session),
      }),
      prompt: 'Say hello',
    });
    const wrappedText: string[] = [];
    for await (const piece of wrapped.textStream) wrappedText.push(piece);
    expect(wrappedText).toEqual(plainText);
    expect(await wrapped.usage).toEqual(await plain.usage);
    const events = await recorded.events();
    expect(events).toHaveLength(1);
    expect(events[0]?.payload).toMatchObject({
      operation: 'stream',
      output: { content: 'Hello there', finishReason: 'stop' },
      usage: { inputTokens: 9, outputTokens: 3, totalTokens: 12 },
      costUsd: 0.00000315,
      streamed: true,
      responseId: 'resp-2',
    });
  });

  it('records each step of a tool loop, with the tool call and its result in the next prompt', async () => {
    const recorded = recordedSession();
    let call = 0;
    const wrapped = wrapLanguageModel({
      model: model({
        doGenerate: async () => {
          call += 1;
          if (call === 1)
            return {
              content: [
                {
                  type: 'tool-call' as const,
                  toolCallId: 'call-1',
                  toolName: 'balance',
                  input: '{"wallet":"abc"}',
                },
              ],
              finishReason: { unified: 'tool-calls' as const, raw: 'tool_calls' },
              usage: usage(20, 10),
              warnings: [],
            };
          return textResult('You have 3 SOL', 40, 6);
        },
      }),
      middleware: flightlogMiddleware(recorded.session),
    });
    const result = await generateText({
      model: wrapped,
      prompt: 'What is my balance?',
      tools: {
        balance: tool({
          inputSchema: z.object({ wallet: z.string() }),
          execute: async ({ wallet }) => ({ wallet, sol: 3 }),
        }),
      },
      stopWhen: stepCountIs(3),
    });
    expect(result.text).toBe('You have 3 SOL');
    const events = await recorded.events();
    expect(events).toHaveLength(2);
    expect(events[0]?.payload).toMatchObject({
      output: {
        finishReason: 'tool-calls',
        toolCalls: [{ id: 'call-1', name: 'balance', arguments: '{"wallet":"abc"}' }],
      },
    });
    expect(events[1]?.payload).toMatchObject({
      input: {
        messages: [
          { role: 'user', content: 'What is my balance?' },
          { role: 'assistant', toolCalls: [{ name: 'balance' }] },
          { role: 'tool', content: '{"wallet":"abc","sol":3}' },
        ],
      },
      output: { content: 'You have 3 SOL' },
    });
    expect(lastTrace(recorded)?.totalTokens).toBe(76);
  });

  it('passes a model error through unchanged and records it', async () => {
    const recorded = recordedSession();
    const failure = new Error('model overloaded');
    const run = (middleware: boolean) =>
      generateText({
        model: middleware
          ? wrapLanguageModel({
              model: model({ doGenerate: () => Promise.reject(failure) }),
              middleware: flightlogMiddleware(recorded.session),
            })
          : model({ doGenerate: () => Promise.reject(failure) }),
        prompt: 'x',
        maxRetries: 0,
      }).catch((e: unknown) => e);
    expect(await run(true)).toBe(await run(false));
    const [event] = await recorded.events();
    expect(event).toMatchObject({ status: 'error', errorMessage: 'model overloaded' });
  });

  it('records a stream aborted by the caller as aborted, and an in-band error part as an error', async () => {
    const recorded = recordedSession();
    const controller = new AbortController();
    const aborted = streamText({
      model: wrapLanguageModel({
        model: model({
          doStream: {
            stream: simulateReadableStream({
              chunks: streamParts(['a', 'b', 'c', 'd']),
              chunkDelayInMs: 10,
            }),
          },
        }),
        middleware: flightlogMiddleware(recorded.session),
      }),
      prompt: 'x',
      abortSignal: controller.signal,
    });
    let pieces = 0;
    try {
      for await (const _piece of aborted.textStream) if (++pieces === 2) controller.abort();
    } catch {
      // the AI SDK may end the read with the abort
    }
    const failing = streamText({
      model: wrapLanguageModel({
        model: model({
          doStream: {
            stream: simulateReadableStream({
              chunks: [
                { type: 'stream-start' as const, warnings: [] },
                { type: 'error' as const, error: new Error('upstream broke') },
              ],
            }),
          },
        }),
        middleware: flightlogMiddleware(recorded.session),
      }),
      prompt: 'y',
      onError: () => undefined,
    });
    for await (const _piece of failing.textStream);
    const events = await recorded.events();
    expect(events).toHaveLength(2);
    expect(events[0]).toMatchObject({ status: 'error' });
    expect(events[0]?.payload).toMatchObject({ aborted: true });
    expect(events[1]).toMatchObject({ status: 'error', errorMessage: 'upstream broke' });
  });

  it('capture: false keeps prompt and answer out', async () => {
    const recorded = recordedSession();
    await generateText({
      model: wrapLanguageModel({
        model: model({ doGenerate: textResult('secret answer') }),
        middleware: flightlogMiddleware(recorded.session, { capture: false }),
      }),
      prompt: 'secret question',
    });
    const [event] = await recorded.events();
    expect(JSON.stringify(event?.payload)).not.toContain('secret');
    expect(event?.payload).toMatchObject({ captured: false, usage: { totalTokens: 17 } });
  });
});

describe('flightlogMiddleware: concurrent calls and failures of its own', () => {
  it('records several generateText and streamText calls at once on one session, each once with its own usage', async () => {
    const recorded = recordedSession();
    const wrapped = wrapLanguageModel({
      model: model({
        // Each call answers its own prompt (`q<n>`), with usage of its own, after a delay that
        // makes the calls overlap.
        doGenerate: async ({ prompt }) => {
          const n = Number(JSON.stringify(prompt).match(/q(\d+)/)?.[1]);
          await new Promise((r) => setTimeout(r, 5 * (6 - n)));
          return textResult(`answer ${n}`, 10 * n, n);
        },
        doStream: async ({ prompt }) => {
          const n = Number(JSON.stringify(prompt).match(/q(\d+)/)?.[1]);
          return {
            stream: simulateReadableStream({
              chunks: streamParts(['answer', ` ${n}`], 10 * n, n),
              chunkDelayInMs: 3 + (n % 3),
            }),
          };
        },
      }),
      middleware: flightlogMiddleware(recorded.session),
    });
    const generated = [1, 2, 3].map((n) => generateText({ model: wrapped, prompt: `q${n}` }));
    const streamed = [4, 5, 6].map(async (n) => {
      const result = streamText({ model: wrapped, prompt: `q${n}` });
      let text = '';
      for await (const piece of result.textStream) text += piece;
      return { text, usage: await result.usage };
    });
    const results = await Promise.all([...generated, ...streamed]);
    expect(results.map((r) => r.text)).toEqual([1, 2, 3, 4, 5, 6].map((n) => `answer ${n}`));
    const events = await recorded.events();
    expect(events).toHaveLength(6);
    expect(new Set(events.map((e) => e.id)).size).toBe(6);
    for (const event of events) {
      const payload = event.payload as {
        input: { messages: { content: string }[] };
        output: { content: string };
        operation: string;
      };
      const n = Number(payload.output.content.split(' ')[1]);
      // its own prompt, answer and usage: nothing of another call mixed in
      expect(payload.input.messages.at(-1)?.content).toBe(`q${n}`);
      expect(payload.operation).toBe(n <= 3 ? 'generate' : 'stream');
      expect(event.payload).toMatchObject({
        usage: { inputTokens: 10 * n, outputTokens: n, totalTokens: 11 * n },
        streamed: n > 3,
      });
      expect(results[n - 1]?.usage).toMatchObject({ inputTokens: 10 * n, outputTokens: n });
    }
    // Σ 11n for n = 1..6, and the cost of 210 input and 21 output tokens of gpt-4o-mini, exactly
    expect(lastTrace(recorded)).toMatchObject({ totalTokens: 231, totalCostUsd: '0.0000441' });
  });

  it('never throws into the host: when its own recording fails, the calls give what they give unwrapped', async () => {
    const unwrapped = model({
      doGenerate: textResult('Hello there'),
      doStream: async () => ({ stream: simulateReadableStream({ chunks: streamParts(['Hi']) }) }),
    });
    const plainText = (await generateText({ model: unwrapped, prompt: 'Say hello' })).text;
    const plainStream = streamText({ model: unwrapped, prompt: 'Say hello' });
    let plainPieces = '';
    for await (const piece of plainStream.textStream) plainPieces += piece;
    // a price entry whose getter throws: the payload cannot be built, so the event is refused
    const failing = [...failingSessions(), refusedPayloadSession('gpt-4o-mini', 2)];
    for (const { name, session, failedAsExpected, options } of failing) {
      const wrapped = wrapLanguageModel({
        model: model({
          doGenerate: textResult('Hello there'),
          doStream: async () => ({
            stream: simulateReadableStream({ chunks: streamParts(['Hi']) }),
          }),
        }),
        middleware: flightlogMiddleware(session, options),
      });
      const generated = await generateText({ model: wrapped, prompt: 'Say hello' });
      expect(generated.text, name).toBe(plainText);
      const streamed = streamText({ model: wrapped, prompt: 'Say hello' });
      let pieces = '';
      for await (const piece of streamed.textStream) pieces += piece;
      expect(pieces, name).toBe(plainPieces);
      expect(await streamed.usage, name).toEqual(await plainStream.usage);
      failedAsExpected();
    }
  });
});
