import type { Event, Trace } from '@flightlog/protocol';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeEngines, type EngineName } from '../harness/engines.js';
import { isProblem, postBatch } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { llmCallEvent, newId, traceSnapshot } from '../fixtures/batches.js';

/*
 * The first look a large batch gets before its one big statement (issue 15, bystander p99 under
 * conflicting ids): it must name the same id the statement would, in the statement's order (by
 * item, a trace before its events), and must not call anything a conflict that the statement
 * accepts (a re-sent batch, a re-sent event of the same trace).
 */
describeEngines('id conflicts found in slices before a large batch [%s]', (engine: EngineName) => {
  let server: TestServer;
  let mine: TestAgent;
  let theirs: TestAgent;
  let theirTrace: Trace;
  let theirEvents: Event[];
  let myTrace: Trace;
  let myEvents: Event[];

  const item = (trace: Trace, events: Event[]) => ({ trace: { ...trace, agentId: 'x' }, events });
  const find = (agent: TestAgent, items: ReturnType<typeof item>[], batchId = newId()) =>
    server.store.traces.findIdConflict(agent.agentId, batchId, items);

  beforeAll(async () => {
    server = await startTestServer(engine);
    [mine, theirs] = [await server.createAgent(), await server.createAgent()];
    theirTrace = traceSnapshot({ eventCount: 3 });
    theirEvents = [0, 1, 2].map((i) => llmCallEvent(theirTrace.id, i));
    myTrace = traceSnapshot({ eventCount: 2500 });
    myEvents = Array.from({ length: 2500 }, (_, i) => llmCallEvent(myTrace.id, i));
    for (const [agent, trace, events] of [
      [theirs, theirTrace, theirEvents],
      [mine, myTrace, myEvents],
    ] as const) {
      const res = await postBatch(server.url, agent.apiKey, {
        batchId: newId(),
        items: [{ trace, events }],
      });
      expect(res.status, res.text).toBe(202);
    }
  });
  afterAll(() => server?.close());

  it('names what the batch statement names, across slices of 1,000 ids', async () => {
    const fresh = traceSnapshot({ eventCount: 2500 });
    // my own ids of 2,500 events re-sent under another trace: the first one
    const resent = myEvents.map((e) => ({ ...e, traceId: fresh.id }));
    expect(await find(mine, [item(fresh, resent)])).toBe('/items/0/events/0/id');
    // one foreign id deep in the third slice of a clean item
    const clean = Array.from({ length: 2500 }, (_, i) => llmCallEvent(fresh.id, i));
    clean[2200] = { ...(theirEvents[1] as Event), traceId: fresh.id };
    expect(await find(mine, [item(fresh, clean)])).toBe('/items/0/events/2200/id');
    // a foreign trace in item 1 comes before an event conflict in item 2, after one in item 0
    const other = traceSnapshot();
    const items = [
      item(fresh, [llmCallEvent(fresh.id, 0)]),
      item(theirTrace, []),
      item(other, [{ ...(theirEvents[0] as Event), traceId: other.id }]),
    ];
    expect(await find(mine, items)).toBe('/items/1/trace/id');
    items[0] = item(fresh, [{ ...(theirEvents[2] as Event), traceId: fresh.id }]);
    expect(await find(mine, items)).toBe('/items/0/events/0/id');
  });

  it('finds nothing where the statement accepts: my events re-sent in their own trace, a batch id seen before', async () => {
    expect(await find(mine, [item(myTrace, myEvents)])).toBeNull();
    const batchId = newId();
    const trace = traceSnapshot();
    const res = await postBatch(server.url, mine.apiKey, {
      batchId,
      items: [{ trace, events: [llmCallEvent(trace.id, 0)] }],
    });
    expect(res.status).toBe(202);
    // the same batch id again, even with foreign ids: the statement answers it as a duplicate
    expect(await find(mine, [item(theirTrace, theirEvents)], batchId)).toBeNull();
  });

  it('a large batch of re-sent ids is refused with 409 at the first one, nothing written', async () => {
    const fresh = traceSnapshot({ eventCount: 2500 });
    const filler = 'y'.repeat(200);
    const resent = myEvents.map((e) => ({
      ...e,
      traceId: fresh.id,
      payload: { name: 'big', data: filler },
    }));
    const res = await postBatch(server.url, mine.apiKey, {
      batchId: newId(),
      items: [{ trace: fresh, events: resent }],
    });
    expect(isProblem(res, 409), res.text).toBe(true);
    expect(res.body.errors[0].pointer).toBe('/items/0/events/0/id');
    const [row] = await server.store.sql.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM traces WHERE id = $1',
      [fresh.id],
    );
    expect(row?.n).toBe(0);
  });
});
