import Anthropic from '@anthropic-ai/sdk';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Connection, Keypair, LAMPORTS_PER_SOL, SystemProgram, Transaction } from '@solana/web3.js';
import { ExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment, x402Client } from '@x402/fetch';
import { generateText, wrapLanguageModel } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import OpenAI from 'openai';
import { privateKeyToAccount } from 'viem/accounts';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FlightlogClient } from '@flightlog/client';
import { flightlogMiddleware } from '@flightlog/client/ai-sdk';
import { observeAnthropic } from '@flightlog/client/anthropic';
import { observeMcpClient } from '@flightlog/client/mcp';
import { observeOpenAI } from '@flightlog/client/openai';
import { observeSolanaConnection } from '@flightlog/client/solana';
import { observeX402Fetch } from '@flightlog/client/x402';
import {
  anthropicStream,
  FakeUpstream,
  LiteSvmRpc,
  openAIChat,
  openAIChatStream,
  PaywalledServer,
  RecordingLogger,
} from '@flightlog/test-support';
import { startRealServer, storedEventRows, type RealServer } from './harness/real-server.js';

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

  it('stores one event per SDK call for every instrumentation, totals included', async () => {
    const rpc = await new LiteSvmRpc().start();
    const paywall = await new PaywalledServer().start();
    const mcpServer = new McpServer({ name: 'wallet-mcp', version: '1.0.0' });
    mcpServer.registerTool('balance', { inputSchema: { wallet: z.string() } }, async () => ({
      content: [{ type: 'text', text: '3 SOL' }],
    }));
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await mcpServer.connect(serverSide);
    const mcpClient = new Client({ name: 'agent', version: '1.0.0' });
    await mcpClient.connect(clientSide);
    try {
      const agent = await server.createAgent();
      const logger = new RecordingLogger();
      const client = new FlightlogClient({ apiKey: agent.apiKey, ingestUrl: server.url, logger });
      const session = client.startSession({ inputSummary: 'Every instrumentation' });

      upstream.reply = () =>
        anthropicStream({ model: 'claude-haiku-4-5-20251001', usage: { input: 10, output: 10 } });
      const anthropic = observeAnthropic(
        new Anthropic({ apiKey: 'k', baseURL: upstream.url, maxRetries: 0 }),
        session,
      );
      await anthropic.messages
        .stream({
          model: 'claude-haiku-4-5',
          max_tokens: 10,
          messages: [{ role: 'user', content: 'hi' }],
        })
        .finalMessage();

      const model = wrapLanguageModel({
        model: new MockLanguageModelV3({
          modelId: 'gpt-4o-mini',
          doGenerate: {
            content: [{ type: 'text', text: 'ok' }],
            finishReason: { unified: 'stop', raw: 'stop' },
            usage: {
              inputTokens: { total: 4, noCache: 4, cacheRead: 0, cacheWrite: 0 },
              outputTokens: { total: 1, text: 1, reasoning: 0 },
            },
            warnings: [],
          },
        }),
        middleware: flightlogMiddleware(session),
      });
      await generateText({ model, prompt: 'ok?' });

      await observeMcpClient(mcpClient, session).callTool({
        name: 'balance',
        arguments: { wallet: 'abc' },
      });

      const payer = Keypair.generate();
      await rpc.airdrop(payer.publicKey.toBase58(), BigInt(LAMPORTS_PER_SOL));
      const connection = observeSolanaConnection(new Connection(rpc.url, 'confirmed'), session);
      await connection.sendTransaction(
        new Transaction().add(
          SystemProgram.transfer({
            fromPubkey: payer.publicKey,
            toPubkey: Keypair.generate().publicKey,
            lamports: 2_000_000,
          }),
        ),
        [payer],
      );

      const account = privateKeyToAccount(
        '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d',
      );
      const pay = wrapFetchWithPayment(
        observeX402Fetch(fetch, session),
        new x402Client().register('eip155:*', new ExactEvmScheme(account)),
      );
      await pay(`${paywall.url}/forecast`);

      session.end({ outputSummary: 'done' });
      await client.close();
      expect(logger.lines).toEqual([]);
      const { body } = await server.readTrace(agent.agentId, session.traceId);
      expect(body.events.map((e) => e.type)).toEqual([
        'llm_call',
        'llm_call',
        'mcp_call',
        'chain_tx',
        'x402_payment',
      ]);
      expect(body.events.every((e) => e.status === 'ok')).toBe(true);
      // haiku 4.5: 10 × $1 + 10 × $5 per million; gpt-4o-mini: 4 × $0.15 + 1 × $0.60
      expect(body.trace).toMatchObject({
        eventCount: 5,
        totalTokens: 25,
        totalCostUsd: '0.0000612',
        totalLamports: '2000000',
        chainTxCount: 1,
      });
      expect(body.events[4]?.payload).toMatchObject({ amount: '10000', settled: true });
    } finally {
      await mcpClient.close();
      await paywall.close();
      await rpc.close();
    }
  });
});
