import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FlightlogClient } from '../../src/index.js';
import { observeOpenAI } from '../../src/instrumentations/openai.js';
import { FakeUpstream } from '../harness/fake-llm-upstream.js';
import { openAIChat, openAIChatStream } from '../harness/provider-replies.js';
import { RecordingLogger } from '../harness/recording-logger.js';
import { startRealServer, storedEventRows, type RealServer } from '../harness/real-server.js';

/*
 * The instrumentations' events go the normal way: buffered by the client, flushed as gzip
 * batches, stored by a running Flightlog service, and read back as the dashboard reads them.
 */
describe('instrumented calls arrive in a running Flightlog service', () => {
  let server: RealServer;
  let upstream: FakeUpstream;
  beforeAll(async () => {
    server = await startRealServer();
    upstream = await new FakeUpstream(() => openAIChat()).start();
  });
  afterAll(async () => {
    await upstream.close();
    await server.close();
  });

  it('stores every model call once, nested and totalled', async () => {
    const agent = await server.createAgent();
    const logger = new RecordingLogger();
    const client = new FlightlogClient({
      apiKey: agent.apiKey,
      ingestUrl: server.url,
      logger,
    });
    const session = client.startSession({ inputSummary: 'Plan a swap' });
    const openai = observeOpenAI(
      new OpenAI({ apiKey: 'sk-test', baseURL: `${upstream.url}/v1`, maxRetries: 0 }),
      session,
    );
    const messages = [{ role: 'user' as const, content: 'Quote 1 SOL' }];
    await session.timed(
      'tool_call',
      async () => {
        upstream.reply = () => openAIChat({ usage: { input: 100, output: 50 } });
        await openai.chat.completions.create({ model: 'gpt-4o-mini', messages });
        upstream.reply = () => openAIChatStream({ usage: { input: 10, output: 5 } });
        const stream = await openai.chat.completions.create({
          model: 'gpt-4o-mini',
          messages,
          stream: true,
          stream_options: { include_usage: true },
        });
        for await (const _chunk of stream);
      },
      () => ({ name: 'plan' }),
    );
    session.end({ outputSummary: 'planned' });
    await client.close();
    expect(logger.lines).toEqual([]);

    const { status, body } = await server.readTrace(agent.agentId, session.traceId);
    expect(status).toBe(200);
    // 150 × $0.15/M + … : (100 × 0.15 + 50 × 0.6 + 10 × 0.15 + 5 × 0.6) / 10^6
    expect(body.trace).toMatchObject({
      status: 'completed',
      eventCount: 3,
      totalTokens: 165,
      totalCostUsd: '0.0000495',
      toolsCalled: ['plan'],
    });
    const [plan, plain, streamed] = body.events;
    expect(plan).toMatchObject({ type: 'tool_call', parentEventId: null });
    expect(plain).toMatchObject({ type: 'llm_call', status: 'ok', parentEventId: plan?.id });
    expect(streamed).toMatchObject({ type: 'llm_call', status: 'ok', parentEventId: plan?.id });
    expect(plain?.payload).toMatchObject({ provider: 'openai', streamed: false });
    expect(streamed?.payload).toMatchObject({
      streamed: true,
      output: { content: 'Hello there' },
      usage: { totalTokens: 15 },
    });
    expect(await storedEventRows(server.store, session.traceId)).toHaveLength(3);
  });
});
