import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { observeAnthropic } from '../../src/instrumentations/anthropic.js';
import {
  anthropicError,
  anthropicMessage,
  anthropicStream,
  FakeUpstream,
  type UpstreamReply,
} from '@flightlog/test-support';
import { failingSessions, refusedPayloadSession } from '../harness/failing-sessions.js';
import { lastTrace, recordedSession } from '../harness/recorded-session.js';

let upstream: FakeUpstream;
beforeAll(async () => {
  upstream = await new FakeUpstream(() => anthropicMessage()).start();
});
afterAll(() => upstream.close());

const sdk = () => new Anthropic({ apiKey: 'sk-ant-test', baseURL: upstream.url, maxRetries: 0 });
const replying = (reply: UpstreamReply | ((n: number) => UpstreamReply)) => {
  let n = 0;
  upstream.reply = () => (typeof reply === 'function' ? reply(++n) : reply);
};
const request = {
  model: 'claude-sonnet-4-5',
  max_tokens: 256,
  system: 'Answer in French.',
  messages: [{ role: 'user' as const, content: 'Say hello' }],
};
const read = async (stream: AsyncIterable<unknown>) => {
  const items: unknown[] = [];
  for await (const item of stream) items.push(item);
  return items;
};

describe('observeAnthropic: messages.create', () => {
  it('returns what the unwrapped client returns and records one llm_call with usage and exact cost', async () => {
    replying(anthropicMessage({ usage: { input: 15, output: 7, cacheRead: 100, cacheWrite: 50 } }));
    const recorded = recordedSession();
    const plain = await sdk().messages.create(request);
    const wrapped = await observeAnthropic(sdk(), recorded.session).messages.create(request);
    expect(recorded.client.stats().recordedEvents).toBe(1);
    expect(wrapped).toEqual(plain);
    const [event] = await recorded.events();
    expect(event).toMatchObject({ type: 'llm_call', status: 'ok', parentEventId: null });
    expect(event?.payload).toEqual({
      provider: 'anthropic',
      model: 'claude-sonnet-4-5-20250929',
      operation: 'messages',
      input: {
        messages: [
          { role: 'system', content: 'Answer in French.' },
          { role: 'user', content: 'Say hello' },
        ],
      },
      output: { content: 'Bonjour', finishReason: 'end_turn' },
      usage: {
        inputTokens: 165,
        outputTokens: 7,
        totalTokens: 172,
        cachedInputTokens: 100,
        cacheWriteInputTokens: 50,
      },
      // claude-sonnet-4-5: 15 × $3 + 100 × $0.30 + 50 × $3.75 + 7 × $15, per million
      costUsd: 0.0003675,
      streamed: false,
      responseId: 'msg_01',
    });
  });

  it('records tool use and tool results in the conversation', async () => {
    replying(
      anthropicMessage({
        text: 'Checking.',
        toolUse: [{ id: 'toolu_1', name: 'get_balance', input: { wallet: 'abc' } }],
      }),
    );
    const recorded = recordedSession();
    await observeAnthropic(sdk(), recorded.session).messages.create({
      ...request,
      messages: [
        { role: 'user', content: 'Balance?' },
        {
          role: 'assistant',
          content: [{ type: 'tool_use', id: 'toolu_0', name: 'get_wallet', input: {} }],
        },
        {
          role: 'user',
          content: [{ type: 'tool_result', tool_use_id: 'toolu_0', content: 'wallet abc' }],
        },
      ],
    });
    const [event] = await recorded.events();
    expect(event?.payload).toMatchObject({
      input: {
        messages: [
          { role: 'system', content: 'Answer in French.' },
          { role: 'user', content: 'Balance?' },
          {
            role: 'assistant',
            content: '',
            toolCalls: [{ id: 'toolu_0', name: 'get_wallet', arguments: '{}' }],
          },
          { role: 'user', content: 'wallet abc' },
        ],
      },
      output: {
        content: 'Checking.',
        finishReason: 'tool_use',
        toolCalls: [{ id: 'toolu_1', name: 'get_balance', arguments: '{"wallet":"abc"}' }],
      },
    });
  });

  it('throws exactly what the unwrapped client throws on 4xx and 5xx, and records the error', async () => {
    for (const status of [400, 401, 500, 529]) {
      replying(anthropicError(status, `upstream says ${status}`));
      const recorded = recordedSession();
      const plain = (await sdk()
        .messages.create(request)
        .catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>;
      const wrapped = (await observeAnthropic(sdk(), recorded.session)
        .messages.create(request)
        .catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>;
      expect(wrapped.constructor).toBe(plain.constructor);
      expect([wrapped.status, wrapped.message]).toEqual([plain.status, plain.message]);
      const events = await recorded.events();
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({ status: 'error', errorMessage: wrapped.message });
    }
  });

  it('records concurrent calls once each, with exact totals', async () => {
    replying((n) => anthropicMessage({ text: `r${n}`, usage: { input: n, output: n } }));
    const recorded = recordedSession();
    const anthropic = observeAnthropic(sdk(), recorded.session);
    await Promise.all(Array.from({ length: 20 }, () => anthropic.messages.create(request)));
    const events = await recorded.events();
    expect(events).toHaveLength(20);
    expect(lastTrace(recorded)?.totalTokens).toBe(420); // Σ 2n for n = 1..20
  });

  it('records an aborted request as aborted', async () => {
    replying({ sse: [], hang: true });
    const recorded = recordedSession();
    const controller = new AbortController();
    const call = observeAnthropic(sdk(), recorded.session).messages.create(request, {
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(), 20);
    const error = await call.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Anthropic.APIUserAbortError);
    const [event] = await recorded.events();
    expect(event?.status).toBe('error');
    expect(event?.payload).toMatchObject({ aborted: true });
  });
});

describe('observeAnthropic: streaming', () => {
  it('hands the caller the same events, and records the call at the end with its usage', async () => {
    replying(anthropicStream({ usage: { input: 15, output: 7 } }));
    const recorded = recordedSession();
    const plain = await read(await sdk().messages.create({ ...request, stream: true }));
    const stream = await observeAnthropic(sdk(), recorded.session).messages.create({
      ...request,
      stream: true,
    });
    const wrapped = await read(stream);
    expect(recorded.client.stats().recordedEvents).toBe(1);
    expect(wrapped).toEqual(plain);
    const [event] = await recorded.events();
    expect(event).toMatchObject({ status: 'ok' });
    expect(event?.payload).toMatchObject({
      output: { content: 'Bonjour', finishReason: 'end_turn' },
      usage: { inputTokens: 15, outputTokens: 7, totalTokens: 22 },
      costUsd: 0.00015,
      streamed: true,
      responseId: 'msg_02',
    });
  });

  it('records the stream as it came, whatever the caller does with its events next', async () => {
    // Recorded on the next turn of the event loop: the usage the events carried is copied as
    // they go by, so the caller editing them afterwards changes nothing recorded.
    replying(anthropicStream({ usage: { input: 15, output: 7 } }));
    const recorded = recordedSession();
    const stream = await observeAnthropic(sdk(), recorded.session).messages.create({
      ...request,
      stream: true,
    });
    const events = await read(stream);
    for (const event of events as { message?: { usage?: object }; usage?: object }[]) {
      if (event.message?.usage) Object.assign(event.message.usage, { input_tokens: 999 });
      if (event.usage) Object.assign(event.usage, { output_tokens: 999 });
    }
    recorded.session.end();
    const [event] = await recorded.events();
    expect(event?.payload).toMatchObject({
      usage: { inputTokens: 15, outputTokens: 7, totalTokens: 22 },
    });
  });

  it('records messages.stream() once, tool use assembled', async () => {
    replying(
      anthropicStream({
        usage: { input: 4, output: 9 },
        toolUse: { id: 'toolu_9', name: 'swap', json: '{"from":"SOL","to":"USDC"}' },
      }),
    );
    const recorded = recordedSession();
    const stream = observeAnthropic(sdk(), recorded.session).messages.stream(request);
    const final = await stream.finalMessage();
    expect(final.content[1]).toMatchObject({
      type: 'tool_use',
      input: { from: 'SOL', to: 'USDC' },
    });
    const events = await recorded.events();
    expect(events).toHaveLength(1);
    expect(events[0]?.payload).toMatchObject({
      output: {
        content: 'Bonjour',
        finishReason: 'tool_use',
        toolCalls: [{ id: 'toolu_9', name: 'swap', arguments: '{"from":"SOL","to":"USDC"}' }],
      },
      usage: { inputTokens: 4, outputTokens: 9, totalTokens: 13 },
      streamed: true,
    });
  });

  it('records a stream the caller stopped, or aborted, as aborted', async () => {
    replying(anthropicStream({ pieces: ['a', 'b', 'c'], gapMs: 5 }));
    const recorded = recordedSession();
    const anthropic = observeAnthropic(sdk(), recorded.session);
    const stream = await anthropic.messages.create({ ...request, stream: true });
    let seen = 0;
    for await (const _event of stream) if (++seen === 4) break;
    replying(anthropicStream({ hang: true, cut: 3 }));
    const helper = anthropic.messages.stream(request);
    helper.on('text', () => helper.abort());
    await helper.done().catch(() => undefined);
    const events = await recorded.events();
    expect(events).toHaveLength(2);
    expect(events.map((e) => e.status)).toEqual(['error', 'error']);
    expect(events[0]?.payload).toMatchObject({ aborted: true, output: { content: 'ab' } });
    expect(events[1]?.payload).toMatchObject({ aborted: true });
  });

  it('capture: false keeps the prompt and the answer out', async () => {
    replying(anthropicStream());
    const recorded = recordedSession();
    await read(
      await observeAnthropic(sdk(), recorded.session, { capture: false }).messages.create({
        ...request,
        stream: true,
      }),
    );
    const [event] = await recorded.events();
    expect(event?.payload).toMatchObject({
      input: { messages: [] },
      output: { content: '' },
      usage: { totalTokens: 22 },
      captured: false,
    });
  });

  it('keeps the client as it was: instanceof, other resources, the original unwrapped', async () => {
    const recorded = recordedSession();
    const original = sdk();
    const wrapped = observeAnthropic(original, recorded.session);
    expect(wrapped).toBeInstanceOf(Anthropic);
    expect(wrapped.messages).toBe(wrapped.messages);
    replying(anthropicMessage());
    await original.messages.create(request);
    await wrapped.beta.messages.create(request);
    const events = await recorded.events();
    expect(events).toHaveLength(1);
  });
});

describe('observeAnthropic: failures of its own', () => {
  it('never throws into the host: when its own recording fails, plain and streamed calls give what they give unwrapped', async () => {
    const current = {
      model: 'claude-haiku-4-5',
      max_tokens: 64,
      messages: [{ role: 'user' as const, content: 'Say hello' }],
    };
    const model = 'claude-haiku-4-5-20251001';
    replying((n) => (n % 2 === 1 ? anthropicMessage({ model }) : anthropicStream({ model })));
    const plainMessage = await sdk().messages.create(current);
    const plainEvents = await read(await sdk().messages.create({ ...current, stream: true }));
    // a price entry whose getter throws: the payload cannot be built, so the event is refused
    const failing = [...failingSessions(), refusedPayloadSession('claude-haiku-4-5', 2)];
    for (const { name, session, failedAsExpected, options } of failing) {
      const anthropic = observeAnthropic(sdk(), session, options ?? {});
      expect(await anthropic.messages.create(current), name).toEqual(plainMessage);
      const events = await read(await anthropic.messages.create({ ...current, stream: true }));
      expect(events, name).toEqual(plainEvents);
      failedAsExpected();
    }
  });
});
