import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEngines } from '../harness/engines.js';
import { postBatch } from '../harness/http.js';
import { analysisJobs, storedEvents, storedTrace, tableCounts } from '../harness/inspect.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { at, llmCallEvent, newId, runBatch, traceSnapshot } from '../fixtures/batches.js';
import { itemDocument, toItemJson } from '../../src/store/batch-json.js';

const pointers = (res: { body: { errors?: { pointer: string }[] } }) =>
  (res.body.errors ?? []).map((e) => e.pointer);

/**
 * A batch is one statement (one round trip): a refusal found at its end (an id of another
 * owner) must undo everything the statement did before, the analysis job included.
 */
describeEngines('POST /v1/traces/batch is all or nothing in one statement [%s]', (engine) => {
  let server: TestServer;
  let alice: TestAgent;
  let mallory: TestAgent;
  beforeAll(async () => {
    server = await startTestServer(engine);
    alice = await server.createAgent({ name: 'alice' });
    mallory = await server.createAgent({ name: 'mallory' });
  });
  afterAll(() => server.close());

  it('an id of another agent on the 20th event writes nothing, queues no analysis and keeps the batch id free', async () => {
    const victim = runBatch({ events: 1 });
    expect((await postBatch(server.url, alice.apiKey, victim.body)).status).toBe(202);
    // a finished run: accepted, it would queue its analysis
    const mine = traceSnapshot({ status: 'completed', endedAt: at(30_000), eventCount: 20 });
    const events = Array.from({ length: 20 }, (_, i) => llmCallEvent(mine.id, i));
    events[19] = llmCallEvent(mine.id, 19, { id: victim.events[0]!.id });
    const batchId = newId();
    const before = await tableCounts(server.store);
    const res = await postBatch(server.url, mallory.apiKey, {
      batchId,
      items: [{ trace: mine, events }],
    });
    expect(res.status).toBe(409);
    expect(pointers(res)).toEqual(['/items/0/events/19/id']);
    expect(res.text).not.toContain(alice.agentId);
    expect(await tableCounts(server.store)).toEqual(before);
    expect(await storedTrace(server.store, mine.id)).toBeUndefined();
    expect(await analysisJobs(server.store, mine.id)).toEqual([]);
    const [kept] = await storedEvents(server.store, victim.trace.id);
    expect(kept).toMatchObject({ agent_id: alice.agentId, payload: victim.events[0]!.payload });

    // the same batch id, corrected, is a new batch: stored, and its run queued once
    events[19] = llmCallEvent(mine.id, 19);
    const retry = await postBatch(server.url, mallory.apiKey, {
      batchId,
      items: [{ trace: mine, events }],
    });
    expect(retry.status).toBe(202);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    expect(await storedEvents(server.store, mine.id)).toHaveLength(20);
    expect(await analysisJobs(server.store, mine.id)).toEqual([{ state: 'pending' }]);
  });

  it('names the first foreign id in trace order, a trace before its events, by its place in the body', async () => {
    const foreign = runBatch({ events: 2 });
    expect((await postBatch(server.url, alice.apiKey, foreign.body)).status).toBe(202);
    // three traces, sent out of id order (a < b < c): foreign event ids in c (the body's
    // first item) and in b (its last); b comes first in trace order, so b's is named
    const [a, b, c] = [traceSnapshot(), traceSnapshot(), traceSnapshot()];
    const eventsOf = (id: string, n: number) =>
      Array.from({ length: n }, (_, i) => llmCallEvent(id, i));
    const cEvents = eventsOf(c.id, 6);
    cEvents[4] = llmCallEvent(c.id, 4, { id: foreign.events[1]!.id });
    const bEvents = eventsOf(b.id, 3);
    bEvents[1] = llmCallEvent(b.id, 1, { id: foreign.events[0]!.id });
    const before = await tableCounts(server.store);
    const res = await postBatch(server.url, mallory.apiKey, {
      batchId: newId(),
      items: [
        { trace: { ...c, eventCount: 6 }, events: cEvents },
        { trace: { ...a, eventCount: 1 }, events: eventsOf(a.id, 1) },
        { trace: { ...b, eventCount: 3 }, events: bEvents },
      ],
    });
    expect(res.status).toBe(409);
    expect(pointers(res)).toEqual(['/items/2/events/1/id']);
    expect(await tableCounts(server.store)).toEqual(before);

    // a foreign trace id (the oldest id, so first in trace order) before a foreign event id
    const d = traceSnapshot({ eventCount: 1 });
    const res2 = await postBatch(server.url, mallory.apiKey, {
      batchId: newId(),
      items: [
        { trace: traceSnapshot(), events: [] },
        { trace: { ...foreign.trace, agentId: mallory.agentId }, events: [] },
        { trace: d, events: [llmCallEvent(d.id, 0, { id: foreign.events[0]!.id })] },
      ],
    });
    expect(res2.status).toBe(409);
    expect(pointers(res2)).toEqual(['/items/1/trace/id']);
    expect(await tableCounts(server.store)).toEqual(before);
  });

  it('several snapshots of one trace (written in rounds, in one transaction) are all or nothing too', async () => {
    const foreign = runBatch({ events: 1 });
    expect((await postBatch(server.url, alice.apiKey, foreign.body)).status).toBe(202);
    const t = traceSnapshot({ eventCount: 1 });
    const before = await tableCounts(server.store);
    const res = await postBatch(server.url, mallory.apiKey, {
      batchId: newId(),
      items: [
        { trace: t, events: [llmCallEvent(t.id, 0)] },
        {
          trace: { ...t, status: 'errored', endedAt: at(5_000), eventCount: 2 },
          events: [llmCallEvent(t.id, 1, { id: foreign.events[0]!.id })],
        },
      ],
    });
    expect(res.status).toBe(409);
    expect(pointers(res)).toEqual(['/items/1/events/0/id']);
    expect(await tableCounts(server.store)).toEqual(before);
    expect(await analysisJobs(server.store, t.id)).toEqual([]);
  });

  it('two agents racing to create one trace id: one batch is stored whole, the other refused whole', async () => {
    for (let round = 0; round < 5; round++) {
      const shared = traceSnapshot({ eventCount: 3 });
      const batchOf = () => ({
        batchId: newId(),
        items: [{ trace: shared, events: [0, 1, 2].map((i) => llmCallEvent(shared.id, i)) }],
      });
      const [x, y] = await Promise.all([
        postBatch(server.url, alice.apiKey, batchOf()),
        postBatch(server.url, mallory.apiKey, batchOf()),
      ]);
      expect([x.status, y.status].sort()).toEqual([202, 409]);
      const winner = x.status === 202 ? alice : mallory;
      expect(await storedTrace(server.store, shared.id)).toMatchObject({
        agent_id: winner.agentId,
      });
      const events = await storedEvents(server.store, shared.id);
      expect(events).toHaveLength(3);
      expect(events.every((e) => e.agent_id === winner.agentId)).toBe(true);
    }
  });
});

describe('batch JSON (serialised once for the statement and the live stream)', () => {
  it('writes each item as JSON.stringify does, up to the place of each payload', () => {
    const { body } = runBatch({ events: 3 });
    const item = body.items[0]!;
    item.events[1]!.payload = {
      text: 'quote " backslash \\ nul \u0000 lone \ud800',
      n: [1.5, null],
    };
    item.events[1]!.errorMessage = undefined;
    const doc = itemDocument(toItemJson(item));
    expect(JSON.parse(doc)).toEqual(JSON.parse(JSON.stringify(item)));
    expect(toItemJson({ trace: item.trace, events: [] })).toEqual({
      trace: JSON.stringify(item.trace),
      events: [],
      payloads: [],
    });
    expect(JSON.parse(itemDocument(toItemJson({ trace: item.trace, events: [] })))).toEqual({
      trace: item.trace,
      events: [],
    });
  });
});
