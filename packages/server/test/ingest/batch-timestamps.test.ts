import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { llmCallEvent, newId, runBatch, traceSnapshot } from '../fixtures/batches.js';
import { describeEngines } from '../harness/engines.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import { tableCounts } from '../harness/inspect.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';

type Where = 'trace.startedAt' | 'trace.endedAt' | 'event.startedAt' | 'event.endedAt';

/** A one-event batch with `value` in the field `where`, and the pointer of that field. */
function batchWith(where: Where, value: string) {
  const trace = traceSnapshot({ eventCount: 1, startedAt: '2026-11-01T12:00:00Z' });
  const event = llmCallEvent(trace.id, 0, {
    startedAt: '2026-11-01T12:00:00Z',
    endedAt: '2026-11-01T12:00:01Z',
  });
  const [owner, field] = where.split('.') as ['trace' | 'event', 'startedAt' | 'endedAt'];
  if (owner === 'trace') {
    trace[field] = value;
    if (field === 'endedAt') trace.status = 'completed';
  } else event[field] = value;
  // endedAt may not be before startedAt: move the start to the same instant
  if (field === 'endedAt') (owner === 'trace' ? trace : event).startedAt = value;
  const pointer = owner === 'trace' ? `/items/0/trace/${field}` : `/items/0/events/0/${field}`;
  return { body: { batchId: newId(), items: [{ trace, events: [event] }] }, trace, pointer };
}

/**
 * Timestamps the schema took and the database then could not store as sent, or stored as an
 * instant no read could return (PostgreSQL rounds to microseconds: .9999999 on the last second
 * of 9999 became year 10000, and every read that met it answered 500). One rule, in the schemas'
 * date-time format, refuses them with the field's pointer before anything is written.
 */
describeEngines('timestamps the store could not keep as sent [%s]', (engine) => {
  let server: TestServer;
  let agent: TestAgent;
  let viewer: string;
  const kept = runBatch({ events: 2 });

  beforeAll(async () => {
    server = await startTestServer(engine);
    agent = await server.createAgent();
    viewer = await server.userToken('viewer', agent.agentId);
    expect((await postBatch(server.url, agent.apiKey, kept.body)).status).toBe(202);
  });
  afterAll(() => server.close());

  /** Every read of the agent's data answers as before (no 5xx), and `traceId` among them. */
  async function everythingReadable(traceId: string) {
    const trace = await send(server.url, `/v1/traces/${traceId}`, undefined, { token: viewer });
    expect(trace.status, trace.text).toBe(200);
    const list = await send(server.url, `/v1/agents/${agent.agentId}/traces?limit=200`, undefined, {
      token: viewer,
    });
    expect(list.status, list.text).toBe(200);
    expect(list.body.traces.map((t: { id: string }) => t.id)).toContain(traceId);
    const analysis = await send(server.url, `/v1/traces/${traceId}/analysis`, undefined, {
      token: viewer,
    });
    expect(analysis.status, analysis.text).toBeLessThan(500);
    return trace.body.trace;
  }

  describe('refused with 400 and the field pointer, nothing written', () => {
    it.each([
      ['trace.startedAt', '9999-12-31T23:59:59.9999999Z'],
      ['trace.endedAt', '9999-12-31T23:59:59.9999995Z'],
      ['event.startedAt', '9999-12-31T23:59:59.999999999Z'],
      ['event.endedAt', '9999-12-31T22:59:59.9999999-01:00'],
      ['trace.startedAt', '2026-11-01T12:00:00+23:59'],
      ['event.startedAt', '2026-11-01T12:00:00-16:00'],
      ['trace.endedAt', '2026-11-01T12:00:00+16:00'],
    ] as [Where, string][])('%s = %s', async (where, value) => {
      const { body, pointer } = batchWith(where, value);
      const before = await tableCounts(server.store);
      const res = await postBatch(server.url, agent.apiKey, body);
      expect(isProblem(res, 400), res.text).toBe(true);
      expect(res.body.errors).toContainEqual({ pointer, detail: expect.any(String) });
      expect(await tableCounts(server.store)).toEqual(before);
      await everythingReadable(kept.trace.id);
    });

    it.each(['9999-12-31T23:59:59.9999999Z', '2026-11-01T12:00:00+23:59'])(
      'the complete endpoint refuses endedAt = %s the same way',
      async (endedAt) => {
        const run = runBatch();
        expect((await postBatch(server.url, agent.apiKey, run.body)).status).toBe(202);
        const res = await send(
          server.url,
          `/v1/traces/${run.trace.id}/complete`,
          { endedAt },
          { token: agent.apiKey },
        );
        expect(isProblem(res, 400), res.text).toBe(true);
        expect(res.body.errors).toContainEqual({ pointer: '/endedAt', detail: expect.any(String) });
        expect((await everythingReadable(run.trace.id)).status).toBe('running');
      },
    );
  });

  describe('taken, stored and readable', () => {
    it.each([
      ['trace.startedAt', '9999-12-31T23:59:59.999999Z', '9999-12-31T23:59:59.999Z'],
      ['trace.startedAt', '9999-12-31T23:59:59.9999994Z', '9999-12-31T23:59:59.999Z'],
      ['trace.startedAt', '2026-11-01T12:00:00.123456789Z', '2026-11-01T12:00:00.123Z'],
      ['trace.startedAt', '2026-11-01T12:00:00+15:59', '2026-10-31T20:01:00.000Z'],
      ['trace.startedAt', '2026-11-01T12:00:00-15:59', '2026-11-02T03:59:00.000Z'],
      ['event.endedAt', '9999-12-31T23:59:59.999999Z', undefined],
    ] as [Where, string, string | undefined][])('%s = %s', async (where, value, returned) => {
      const { body, trace } = batchWith(where, value);
      const res = await postBatch(server.url, agent.apiKey, body);
      expect(res.status, res.text).toBe(202);
      const read = await everythingReadable(trace.id);
      if (returned !== undefined) expect(read.startedAt).toBe(returned);
    });
  });
});
