import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FlightlogClient, type LlmCallPayload } from '@flightlog/client';
import { RecordingLogger, runNode, llmPayload } from '@flightlog/test-support';
import { startRealServer, storedEventRows, type RealServer } from './harness/real-server.js';
import { RefusingProxy } from './harness/refusing-proxy.js';

/** The built client, as a host program of this machine imports it. */
const CLIENT_DIST = createRequire(import.meta.url).resolve('@flightlog/client');

/** A script that records one run and exits on its own, never calling close(). */
const shortScript = (traceId: string, settings = '') => `
  import { FlightlogClient } from ${JSON.stringify(CLIENT_DIST)};
  const client = new FlightlogClient({ apiKey: process.env.KEY, ingestUrl: process.env.URL${settings} });
  const session = client.startSession({ inputSummary: 'short script', traceId: ${JSON.stringify(traceId)} });
  session.toolCall({ name: 'step' });
  session.toolCall({ name: 'step' });
  session.end({ outputSummary: 'exited' });
`;

describe('the client never hurts its host', () => {
  let server: RealServer;
  beforeAll(async () => {
    server = await startRealServer();
  });
  afterAll(() => server.close());

  it('drops malformed events with a warning; the good ones of the same batch arrive', async () => {
    const agent = await server.createAgent();
    const logger = new RecordingLogger();
    const client = new FlightlogClient({ apiKey: agent.apiKey, ingestUrl: server.url, logger });
    const session = client.startSession({ inputSummary: 'messy host' });
    const circular: Record<string, unknown> = { name: 'loop' };
    circular.self = circular;
    const good1 = session.toolCall({ name: 'ok.before' });
    session.llmCall({ provider: 'openai' } as unknown as LlmCallPayload);
    session.custom(circular as { name: string });
    session.custom({ name: 'big', data: 10n });
    session.toolCall({ name: 'bad-date' }, { startedAt: '2026-02-30T00:00:00Z' });
    session.toolCall(
      { name: 'backwards' },
      { startedAt: new Date(2_000), endedAt: new Date(1_000) },
    );
    session.toolCall({ name: 'bad-parent' }, { parentEventId: 'not an id!' });
    session.chainTx({ signature: null, lamports: '-5' });
    session.llmCall(llmPayload({ costUsd: Number.NaN }));
    const good2 = session.toolCall(
      { name: 'ok.after' },
      { errorMessage: 'nul \u0000 and lone \ud800 are cleaned, 🚀 kept' },
    );
    session.end({ outputSummary: 'still fine' });
    await client.close();

    expect(client.stats()).toMatchObject({ invalidEvents: 8, recordedEvents: 2, droppedEvents: 0 });
    for (const reason of [
      'llm_call event dropped: payload is not a valid llm_call payload: /model',
      'payload nests deeper than 64 levels',
      'BigInt',
      'startedAt must be a valid Date',
      'endedAt is before startedAt',
      'parentEventId must be an event id',
      'chain_tx event dropped: payload is not a valid chain_tx payload: /lamports',
      'llm_call event dropped: payload is not a valid llm_call payload: /costUsd',
    ])
      expect(logger.matching(reason), reason).toHaveLength(1);
    const rows = await storedEventRows(server.store, session.traceId);
    expect(rows.map((r) => r.id)).toEqual([good1, good2]);
    const { body } = await server.readTrace(agent.agentId, session.traceId);
    expect(body.events[1]).toMatchObject({
      status: 'error',
      errorMessage: 'nul \ufffd and lone \ufffd are cleaned, 🚀 kept',
    });
    expect(body.trace.status).toBe('completed');
  });

  it('with enabled: false or an empty apiKey, every call is a no-op and nothing is sent', async () => {
    const agent = await server.createAgent();
    const logger = new RecordingLogger();
    for (const settings of [
      { apiKey: agent.apiKey, ingestUrl: server.url, enabled: false, logger },
      { apiKey: '', ingestUrl: server.url, logger },
    ]) {
      const client = new FlightlogClient(settings);
      expect(client.enabled).toBe(false);
      const session = client.startSession({ inputSummary: 'nothing', traceId: 'no-op-trace' });
      expect(session.traceId).toBe('no-op-trace');
      expect(session.llmCall(llmPayload())).toBe('');
      expect(
        session.timed(
          'tool_call',
          () => 42,
          () => ({ name: 'x' }),
        ),
      ).toBe(42);
      session.end();
      expect(await client.flush()).toEqual({ timedOut: false });
      expect(await client.close()).toEqual({ timedOut: false });
      expect(client.stats().recordedEvents).toBe(0);
    }
    expect(logger.matching('apiKey is empty')).toHaveLength(1);
    expect(logger.lines).toHaveLength(1);
    const [row] = await server.store.sql.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM traces WHERE agent_id = $1',
      [agent.agentId],
    );
    expect(row?.n).toBe(0);
  });

  it('lets a program that never calls close() exit on its own, delivering its buffer first', async () => {
    const agent = await server.createAgent();
    const traceId = '01JCLIENTEXITTEST000000001';
    const result = await runNode(shortScript(traceId), { KEY: agent.apiKey, URL: server.url });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.ms).toBeLessThan(10_000);
    const { body } = await server.readTrace(agent.agentId, traceId);
    expect(body.trace).toMatchObject({
      status: 'completed',
      outputSummary: 'exited',
      eventCount: 2,
    });
  });

  it('a 503 during the exit flush is retried before the process exits: the run still arrives', async () => {
    const agent = await server.createAgent();
    const traceId = '01JCLIENTEXIT503TEST000001';
    // The service is busy once (503, Retry-After: 1), then takes the batch.
    const proxy = new RefusingProxy(server.url, (n) => n === 1);
    await proxy.start();
    try {
      const result = await runNode(shortScript(traceId), { KEY: agent.apiKey, URL: proxy.url });
      expect(result.code).toBe(0);
      expect(proxy.statuses).toEqual([503, 202]);
      expect(new Set(proxy.batchIds).size).toBe(1); // the retry is the same batch
      expect(result.stderr).toContain('retrying in 1000 ms');
      expect(result.stderr).not.toContain('events not delivered');
      const { body } = await server.readTrace(agent.agentId, traceId);
      expect(body.trace).toMatchObject({ status: 'completed', eventCount: 2 });
      expect(body.events).toHaveLength(2);
    } finally {
      await proxy.close();
    }
  });

  it('waits at most flushTimeoutMs at exit for a service that keeps refusing, then says how many events are lost', async () => {
    const proxy = new RefusingProxy(server.url, () => true);
    await proxy.start();
    try {
      const result = await runNode(
        shortScript('01JCLIENTEXIT503TEST000002', ', flushTimeoutMs: 1500'),
        {
          KEY: 'flk_any',
          URL: proxy.url,
        },
      );
      expect(result.code).toBe(0);
      expect(proxy.statuses.length).toBeGreaterThanOrEqual(2); // it did retry while held
      expect(result.ms).toBeGreaterThanOrEqual(1_400);
      expect(result.ms).toBeLessThan(8_000);
      expect(result.stderr).toContain(
        'the process is exiting with 2 events not delivered: the service did not take them within flushTimeoutMs (1500 ms)',
      );
    } finally {
      await proxy.close();
    }
  });

  it('exits within flushTimeoutMs when the service is unreachable, and at once with flushOnExit: false', async () => {
    const source = (settings: string) => `
      import { FlightlogClient } from ${JSON.stringify(CLIENT_DIST)};
      const client = new FlightlogClient({ apiKey: 'flk_x', ingestUrl: 'http://127.0.0.1:9', logger: { warn(m) { if (m.includes('exiting')) console.error(m); } }${settings} });
      const session = client.startSession({ inputSummary: 'offline' });
      for (let i = 0; i < 1000; i++) session.toolCall({ name: 'step' });
    `;
    const held = await runNode(source(', flushTimeoutMs: 1000'), {});
    expect(held.code).toBe(0);
    expect(held.ms).toBeLessThan(5_000);
    expect(held.stderr).toContain('the process is exiting with 1000 events not delivered');
    // Without the exit flush nothing of the client keeps the process alive: timers are unref'd.
    const free = await runNode(source(', flushOnExit: false'), {});
    expect(free.code).toBe(0);
    expect(free.ms).toBeLessThan(3_000);
    expect(free.stderr).toBe('');
  });
});
