import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FlightlogClient } from '@flightlog/client';
import { RecordingLogger, llmPayload } from '@flightlog/test-support';
import { ResponseDroppingProxy } from './harness/response-dropping-proxy.js';
import {
  acceptedBatchCount,
  startRealServer,
  storedEventRows,
  type RealServer,
} from './harness/real-server.js';

describe('a response lost after the service stored the batch (real TCP proxy)', () => {
  let server: RealServer;
  let proxy: ResponseDroppingProxy;
  beforeAll(async () => {
    server = await startRealServer();
    proxy = new ResponseDroppingProxy(Number(new URL(server.url).port));
    await proxy.start();
  });
  afterAll(async () => {
    await proxy.close();
    await server.close();
  });

  it('is retried with the same batchId: the trace has every event exactly once', async () => {
    const agent = await server.createAgent();
    const logger = new RecordingLogger();
    const client = new FlightlogClient({
      apiKey: agent.apiKey,
      agentId: agent.agentId,
      ingestUrl: proxy.url,
      logger,
      retry: { initialDelayMs: 20, maxDelayMs: 200 },
    });
    proxy.dropNext = 1;
    const session = client.startSession({ inputSummary: 'answer lost on the way back' });
    const ids = [
      session.llmCall(llmPayload()),
      session.toolCall({ name: 'jupiter.quote' }),
      session.chainTx({ signature: 'sig', lamports: '5000' }),
    ];
    session.end({ outputSummary: 'done' });
    const result = await client.close();

    expect(result.timedOut).toBe(false);
    expect(proxy.dropped).toBe(1);
    expect(client.stats()).toMatchObject({
      retriedRequests: 1,
      sentBatches: 1,
      replayedBatches: 1,
      deliveredEvents: 3,
      droppedEvents: 0,
    });
    expect(logger.matching('retrying')).toHaveLength(1);
    // stored once: one accepted batch, each event once, the snapshot final
    expect(await acceptedBatchCount(server.store, agent.agentId)).toBe(1);
    const rows = await storedEventRows(server.store, session.traceId);
    expect(rows.map((r) => r.id)).toEqual(ids);
    const { body } = await server.readTrace(agent.agentId, session.traceId);
    expect(body.trace).toMatchObject({ status: 'completed', eventCount: 3, totalLamports: '5000' });
  });
});
