import { afterAll, beforeAll, expect, it } from 'vitest';
import { whileStoreBusy } from '../harness/busy-store.js';
import { describeEngines } from '../harness/engines.js';
import { postBatch, type HttpResult } from '../harness/http.js';
import { analysisJobs, storedEvents, storedTrace, tableCounts } from '../harness/inspect.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { at, llmCallEvent, newId, runBatch, traceSnapshot } from '../fixtures/batches.js';

const pointers = (res: HttpResult) =>
  ((res.body as { errors?: { pointer: string }[] }).errors ?? []).map((e) => e.pointer);

/**
 * Group commit: batches that arrive while the store is busy share one statement and one commit.
 * One writer (INGEST_GROUP_CONCURRENCY=1) makes a burst of requests form groups on both engines.
 * Whatever shares a group, each batch gets the answer it would get alone.
 */
describeEngines('group commit of batches [%s]', (engine) => {
  let server: TestServer;
  let alice: TestAgent;
  let bob: TestAgent;
  beforeAll(async () => {
    server = await startTestServer(engine, {
      store: { ingestGroup: { maxBatches: 32, concurrency: 1 } },
    });
    alice = await server.createAgent({ name: 'alice' });
    bob = await server.createAgent({ name: 'bob' });
  });
  afterAll(() => server.close());

  /** Posts the bodies all at once, answers in order, while the store is busy for a moment. */
  const burst = (bodies: { key: string; body: unknown }[]) =>
    whileStoreBusy(server.store, () =>
      Promise.all(bodies.map(({ key, body }) => postBatch(server.url, key, body))),
    );

  it('a burst of two agents shares statements, and every batch is stored exactly, once', async () => {
    const commitsBefore = server.store.traces.groupCommits;
    const runs = Array.from({ length: 30 }, (_, i) => ({
      agent: i % 2 === 0 ? alice : bob,
      run: runBatch({ events: 1 + (i % 4) }),
    }));
    const answers = await burst(
      runs.map(({ agent, run }) => ({ key: agent.apiKey, body: run.body })),
    );
    expect(answers.map((a) => a.status)).toEqual(runs.map(() => 202));
    for (const { agent, run } of runs) {
      expect(await storedTrace(server.store, run.trace.id)).toMatchObject({
        agent_id: agent.agentId,
        event_count: run.events.length,
      });
      expect(await storedEvents(server.store, run.trace.id)).toHaveLength(run.events.length);
    }
    // grouped indeed: fewer statements than batches
    expect(server.store.traces.groupCommits).toBeGreaterThan(commitsBefore);
  });

  it('a batch with another agent’s id is refused exactly as alone; its neighbours are stored, and their retries are duplicates', async () => {
    const victim = runBatch({ events: 2 });
    expect((await postBatch(server.url, alice.apiKey, victim.body)).status).toBe(202);
    // the same offending batch, alone first, is the reference answer
    const offending = (batchId: string) => {
      const mine = traceSnapshot({ eventCount: 3 });
      const events = [0, 1, 2].map((i) => llmCallEvent(mine.id, i));
      events[1] = llmCallEvent(mine.id, 1, { id: victim.events[1]!.id });
      return { batchId, items: [{ trace: mine, events }] };
    };
    const alone = await postBatch(server.url, bob.apiKey, offending(newId()));
    expect(alone.status).toBe(409);

    const fallbacksBefore = server.store.traces.groupFallbacks;
    const neighbours = Array.from({ length: 30 }, () => runBatch({ events: 2 }));
    const bad = offending(newId());
    const bodies = [
      ...neighbours.slice(0, 15).map((n) => ({ key: alice.apiKey, body: n.body })),
      { key: bob.apiKey, body: bad },
      ...neighbours.slice(15).map((n) => ({ key: bob.apiKey, body: n.body })),
    ];
    const countsBefore = await tableCounts(server.store);
    const answers = await burst(bodies);
    expect(answers[15]!.status).toBe(409);
    expect(pointers(answers[15]!)).toEqual(pointers(alone));
    expect(pointers(answers[15]!)).toEqual(['/items/0/events/1/id']);
    expect(answers.filter((_, i) => i !== 15).map((a) => a.status)).toEqual(
      neighbours.map(() => 202),
    );
    // the victim is untouched; nothing of the refused batch is stored
    const [kept] = await storedEvents(server.store, victim.trace.id);
    expect(kept).toMatchObject({ agent_id: alice.agentId });
    expect(await storedTrace(server.store, bad.items[0]!.trace.id)).toBeUndefined();
    const counts = await tableCounts(server.store);
    expect(counts.events! - countsBefore.events!).toBe(60);
    expect(counts.traces! - countsBefore.traces!).toBe(30);
    expect(server.store.traces.groupFallbacks).toBeGreaterThan(fallbacksBefore);

    // the clients retry everything: duplicates answered as the first time, nothing doubled
    const retries = await burst(bodies);
    expect(retries[15]!.status).toBe(409);
    for (const [i, retry] of retries.entries()) {
      if (i === 15) continue;
      expect(retry.status).toBe(202);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
    }
    expect(await tableCounts(server.store)).toEqual(counts);
  });

  it('the same batch sent twice at once is stored once; the copy is answered as a duplicate', async () => {
    const runs = Array.from({ length: 10 }, () => runBatch({ events: 3 }));
    const bodies = runs.flatMap((r) => [
      { key: alice.apiKey, body: r.body },
      { key: alice.apiKey, body: r.body },
    ]);
    const before = await tableCounts(server.store);
    const answers = await burst(bodies);
    expect(answers.map((a) => a.status)).toEqual(bodies.map(() => 202));
    for (let i = 0; i < runs.length; i++) {
      const pair = [answers[2 * i]!, answers[2 * i + 1]!];
      expect(pair.filter((a) => a.headers.get('idempotent-replayed') === 'true')).toHaveLength(1);
    }
    const after = await tableCounts(server.store);
    expect(after.events! - before.events!).toBe(30);
  });

  it('snapshots of one run in one burst never regress it, and its analysis is queued once', async () => {
    const trace = traceSnapshot();
    const events = Array.from({ length: 12 }, (_, i) => llmCallEvent(trace.id, i));
    // each batch sends the snapshot after its events; the last one finishes the run
    const bodies = events.map((event, i) => ({
      key: alice.apiKey,
      body: {
        batchId: newId(),
        items: [
          {
            trace: {
              ...trace,
              eventCount: i + 1,
              ...(i === 11 ? { status: 'completed', endedAt: at(20_000), durationMs: 20_000 } : {}),
            },
            events: [event],
          },
        ],
      },
    }));
    // other runs finishing in the same burst, each twice (a client's retry racing the first)
    const others = Array.from({ length: 10 }, () =>
      runBatch({
        events: 1,
        trace: { status: 'completed', endedAt: at(5_000), durationMs: 5_000 },
      }),
    );
    const answers = await burst([
      ...bodies,
      ...others.flatMap((o) => [
        { key: bob.apiKey, body: o.body },
        { key: bob.apiKey, body: o.body },
      ]),
    ]);
    expect(answers.map((a) => a.status).every((s) => s === 202)).toBe(true);
    expect(await storedEvents(server.store, trace.id)).toHaveLength(12);
    const stored = await storedTrace(server.store, trace.id);
    // batches of one run go in arrival order or later groups, never one statement: the stored
    // snapshot is the newest one that arrived last, or a later one; never an older over a newer
    expect(stored?.event_count).toBe(12);
    expect(stored?.status).toBe('completed');
    expect(await analysisJobs(server.store, trace.id)).toEqual([{ state: 'pending' }]);
    for (const other of others)
      expect(await analysisJobs(server.store, other.trace.id)).toEqual([{ state: 'pending' }]);
  });

  it('a deleted run stays deleted when a burst brings its batch back; the rest of the burst is stored', async () => {
    const gone = runBatch({ events: 2 });
    expect((await postBatch(server.url, alice.apiKey, gone.body)).status).toBe(202);
    const deleted = await fetch(`${server.url}/admin/v1/traces/${gone.trace.id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${server.adminToken}` },
    });
    expect(deleted.status).toBe(204);
    const late = runBatch({ events: 3, trace: { id: gone.trace.id } });
    const neighbours = Array.from({ length: 12 }, () => runBatch({ events: 1 }));
    const answers = await burst([
      ...neighbours.map((n) => ({ key: alice.apiKey, body: n.body })),
      { key: alice.apiKey, body: late.body },
    ]);
    expect(answers.map((a) => a.status).every((s) => s === 202)).toBe(true);
    expect(await storedTrace(server.store, gone.trace.id)).toBeUndefined();
    for (const n of neighbours)
      expect(await storedEvents(server.store, n.trace.id)).toHaveLength(1);
  });
});
