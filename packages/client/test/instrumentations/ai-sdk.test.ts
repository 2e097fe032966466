import { generateText, stepCountIs, streamText, tool, wrapLanguageModel } from 'ai';
import { MockLanguageModelV3, simulateReadableStream } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { flightlogMiddleware } from '../../src/instrumentations/ai-sdk.js';
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
