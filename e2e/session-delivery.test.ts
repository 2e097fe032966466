import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FlightlogClient } from '@flightlog/client';
import { RecordingLogger, llmPayload } from '@flightlog/test-support';
import {
  acceptedBatchCount,
  startRealServer,
  storedEventRows,
  type RealAgent,
  type RealServer,
} from './harness/real-server.js';

describe('a recorded session arrives at the real service and is stored exactly', () => {
  let server: RealServer;
  beforeAll(async () => {
    server = await startRealServer();
  });
  afterAll(() => server.close());

  const clientFor = (agent: RealAgent, logger: RecordingLogger, extra = {}) =>
    new FlightlogClient({
      apiKey: agent.apiKey,
      agentId: agent.agentId,
      ingestUrl: server.url,
      logger,
      ...extra,
    });

  it('stores the snapshot, the aggregates and every event in order, and consumes the verify token', async () => {
    const agent = await server.createAgent();
    const logger = new RecordingLogger();
    const client = clientFor(agent, logger, {
      verifyToken: agent.verifyToken,
      environment: 'devnet',
    });
    const startedAt = new Date(Date.now() - 5_000);
    const session = client.startSession({
      inputSummary: 'Swap 1 SOL for USDC',
      tags: ['swap', 'swap', 'jupiter'],
      startedAt,
    });
    const plan = session.llmCall(llmPayload());
    const quote = session.toolCall(
      { name: 'jupiter.quote', input: { inAmount: '1000000000' }, output: { outAmount: '148.2' } },
      { parentEventId: plan, durationMs: 120 },
    );
    session.toolCall({ name: 'jupiter.quote', input: { retry: true } }, { parentEventId: plan });
    session.toolCall({ name: 'wallet.balance' });
    session.chainTx(
      { signature: '5Jx…sig', lamports: '18446744073709551616', network: 'devnet' },
      { parentEventId: quote },
    );
    session.chainTx(
      { signature: null, lamports: '5000', confirmation: 'failed' },
      { status: 'error', errorMessage: 'Blockhash not found' },
    );
    session.x402Payment({
      resource: 'https://api.example/forecast',
      amount: '0.01',
      asset: 'USDC',
    });
    session.mcpCall({ server: 'solana-mcp', method: 'tools/call', tool: 'getBalance' });
    session.custom({ name: 'checkpoint', data: { step: 3 } });
    session.llmCall(
      llmPayload({
        costUsd: 0.00042,
        usage: { inputTokens: 10, outputTokens: 10, totalTokens: 20 },
      }),
    );
    session.end({ outputSummary: 'Swapped 1 SOL for 148.2 USDC via Orca' });
    expect(session.status).toBe('completed');

    const closed = await client.close();
    expect(closed.timedOut).toBe(false);
    expect(logger.lines).toEqual([]);

    const { status, body } = await server.readTrace(agent.agentId, session.traceId);
    expect(status).toBe(200);
    const { trace, events } = body;
    expect(trace).toMatchObject({
      id: session.traceId,
      agentId: agent.agentId,
      status: 'completed',
      startedAt: startedAt.toISOString(),
      inputSummary: 'Swap 1 SOL for USDC',
      outputSummary: 'Swapped 1 SOL for 148.2 USDC via Orca',
      errorMessage: null,
      tags: ['env:devnet', 'swap', 'jupiter'],
      eventCount: 10,
      totalTokens: 200,
      totalCostUsd: '0.00084',
      totalLamports: '18446744073709556616',
      chainTxCount: 2,
      toolsCalled: ['jupiter.quote', 'wallet.balance'],
      anchorSignature: null,
      anchorSlot: null,
      merkleProof: null,
      shareToken: null,
    });
    // the run's fingerprint: null until the server's worker computed it, then 64 hex digits
    expect(trace.traceHash === null || /^[0-9a-f]{64}$/.test(String(trace.traceHash))).toBe(true);
    expect(trace.durationMs).toBeGreaterThanOrEqual(5_000);
    expect(Date.parse(trace.endedAt as string)).toBeGreaterThanOrEqual(startedAt.getTime() + 5_000);

    expect(events.map((e) => [e.sequence, e.type])).toEqual([
      [0, 'llm_call'],
      [1, 'tool_call'],
      [2, 'tool_call'],
      [3, 'tool_call'],
      [4, 'chain_tx'],
      [5, 'chain_tx'],
      [6, 'x402_payment'],
      [7, 'mcp_call'],
      [8, 'custom'],
      [9, 'llm_call'],
    ]);
    expect(events[0]).toMatchObject({
      id: plan,
      parentEventId: null,
      status: 'ok',
      payloadEncrypted: false,
    });
    expect(events[0]?.payload).toEqual(llmPayload());
    expect(events[1]).toMatchObject({ id: quote, parentEventId: plan, durationMs: 120 });
    expect(Date.parse(events[1]!.endedAt!) - Date.parse(events[1]!.startedAt)).toBe(120);
    expect(events[4]).toMatchObject({ parentEventId: quote });
    expect(events[5]).toMatchObject({ status: 'error', errorMessage: 'Blockhash not found' });
    expect(new Set(events.map((e) => e.id)).size).toBe(10);

    expect((await server.agent(agent.agentId)).verifiedAt).not.toBeNull();
  });

  it('keeps the cost exact over 10,000 additions of 0.1 and delivers 10,000 events across several buffer-full flushes', async () => {
    const agent = await server.createAgent();
    const logger = new RecordingLogger();
    // 10,000 events recorded in one synchronous loop (~6 MB) outgrow the default 5 MiB backlog
    // before any request can go out; the backlog cap itself is tested on its own.
    const client = clientFor(agent, logger, { maxBacklogBytes: 16 * 1024 * 1024 });
    const session = client.startSession({ inputSummary: 'many small calls' });
    for (let i = 0; i < 10_000; i++)
      session.llmCall(
        llmPayload({ costUsd: 0.1, usage: { inputTokens: 1, outputTokens: 0, totalTokens: 1 } }),
      );
    session.end();
    await client.close();
    expect(logger.lines).toEqual([]);
    expect(client.stats()).toMatchObject({
      recordedEvents: 10_000,
      deliveredEvents: 10_000,
      droppedEvents: 0,
    });

    const { body } = await server.readTrace(agent.agentId, session.traceId);
    expect(body.trace).toMatchObject({
      eventCount: 10_000,
      totalTokens: 10_000,
      totalCostUsd: '1000',
    });
    const rows = await storedEventRows(server.store, session.traceId);
    expect(rows.map((r) => r.sequence)).toEqual(Array.from({ length: 10_000 }, (_, i) => i));
    // ~100 KB buffers: the run went out as many requests, not one.
    expect(await acceptedBatchCount(server.store, agent.agentId)).toBeGreaterThan(10);
  });

  it('finalises a trace later through the complete endpoint', async () => {
    const agent = await server.createAgent();
    const logger = new RecordingLogger();
    const client = clientFor(agent, logger);
    const session = client.startSession({ inputSummary: 'finished elsewhere' });
    session.custom({ name: 'started' });
    const endedAt = new Date(Date.now() + 1_000);
    const outcome = await client.completeTrace(session.traceId, {
      status: 'errored',
      errorMessage: 'worker crashed',
      endedAt,
    });
    expect(outcome).toEqual({ kind: 'ok' });
    const { body } = await server.readTrace(agent.agentId, session.traceId);
    expect(body.trace).toMatchObject({
      status: 'errored',
      errorMessage: 'worker crashed',
      endedAt: endedAt.toISOString(),
      eventCount: 1,
    });

    const missing = await client.completeTrace('01HZZZZZZZZZZZZZZZZZZZZZZZ');
    expect(missing).toMatchObject({ kind: 'failed', status: 404 });
    await client.close();
  });

  it('drops a refused batch with a warning that names the status and the problem detail', async () => {
    const logger = new RecordingLogger();
    const client = new FlightlogClient({ apiKey: 'flk_not-a-key', ingestUrl: server.url, logger });
    const session = client.startSession({ inputSummary: 'wrong key' });
    session.custom({ name: 'a' });
    session.custom({ name: 'b' });
    session.end();
    const result = await client.close();
    expect(result.timedOut).toBe(false);
    expect(logger.matching('refused a batch with 401')).toHaveLength(1);
    expect(logger.lines[0]?.context).toMatchObject({ status: 401 });
    expect(client.stats()).toMatchObject({
      failedBatches: 1,
      droppedEvents: 2,
      deliveredEvents: 0,
    });
  });
});
