import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FlightlogClient } from '@flightlog/client';
import { RecordingLogger } from '@flightlog/test-support';
import { startRealServer, storedEventRows, type RealServer } from './harness/real-server.js';

describe('a trace id owned by another agent costs only that trace, at the real service', () => {
  let server: RealServer;
  beforeAll(async () => {
    server = await startRealServer();
  });
  afterAll(() => server.close());

  it('the other session of the same batches is stored whole; the clashing one is dropped and named, without poisoning later flushes', async () => {
    const traceX = 'shared-run-id-42';
    // Agent B records trace X first: the id is B's.
    const agentB = await server.createAgent('agent B');
    const clientB = new FlightlogClient({
      apiKey: agentB.apiKey,
      ingestUrl: server.url,
      logger: new RecordingLogger(),
    });
    const sessionB = clientB.startSession({ inputSummary: 'B owns it', traceId: traceX });
    sessionB.toolCall({ name: 'b.step' });
    sessionB.end({ outputSummary: 'B done' });
    await clientB.close();

    // Agent A's client runs a session that (wrongly) reuses X, and a normal one, side by side.
    const agentA = await server.createAgent('agent A');
    const logger = new RecordingLogger();
    const client = new FlightlogClient({
      apiKey: agentA.apiKey,
      ingestUrl: server.url,
      logger,
      flushIntervalMs: 60_000,
    });
    const clash = client.startSession({ inputSummary: 'reuses B’s id', traceId: traceX });
    const normal = client.startSession({ inputSummary: 'normal run' });
    clash.toolCall({ name: 'x.1' });
    normal.toolCall({ name: 'n.1' });
    await client.flush(); // the first batch holds both: 409 on X's item
    clash.toolCall({ name: 'x.2' });
    normal.toolCall({ name: 'n.2' });
    await client.flush();
    clash.toolCall({ name: 'x.3' });
    normal.toolCall({ name: 'n.3' });
    clash.end({ outputSummary: 'should not land' });
    normal.end({ outputSummary: 'normal done' });
    expect(await client.close()).toEqual({ timedOut: false });

    // The normal session: every event and its final snapshot.
    const { status, body } = await server.readTrace(agentA.agentId, normal.traceId);
    expect(status).toBe(200);
    expect(body.trace).toMatchObject({
      status: 'completed',
      outputSummary: 'normal done',
      eventCount: 3,
      toolsCalled: ['n.1', 'n.2', 'n.3'],
    });
    expect(body.events.map((e) => e.payload.name)).toEqual(['n.1', 'n.2', 'n.3']);

    // X: nothing of A's; B's trace is untouched.
    expect((await server.readTrace(agentA.agentId, traceX)).status).toBe(404);
    const bTrace = await server.readTrace(agentB.agentId, traceX);
    expect(bTrace.body.trace).toMatchObject({ outputSummary: 'B done', eventCount: 1 });
    expect((await storedEventRows(server.store, traceX)).length).toBe(1);

    // The warnings name X and say what happened to it.
    expect(logger.matching(`the service refused trace ${traceX} with 409`)).toHaveLength(1);
    expect(
      logger.matching(`events of trace ${traceX} are dropped without being sent`),
    ).toHaveLength(1);
    expect(logger.lines).toHaveLength(2);
    expect(client.stats()).toMatchObject({
      recordedEvents: 6,
      deliveredEvents: 3,
      droppedEvents: 3,
      failedBatches: 0,
    });
  });
});
