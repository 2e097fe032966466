import type { Event, Trace } from '@flightlog/protocol';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { BatchWrite } from '../../src/store/trace-store.js';
import { whileStoreBusy } from '../harness/busy-store.js';
import { describeEngines } from '../harness/engines.js';
import { storedEvents, storedTrace } from '../harness/inspect.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { llmCallEvent, newId, traceSnapshot } from '../fixtures/batches.js';

/*
 * A batch written with `newTraces` (an OTLP export's first write, without reading first) only
 * ever creates traces: one that exists, of its agent or another's, makes it write nothing at all
 * and answer an id conflict on that trace, so that its writer reads and writes again under the
 * trace locks. Alone, in a group of neighbours, and against a concurrent writer of the same trace.
 */
describeEngines('batches that only create their traces [%s]', (engine) => {
  let server: TestServer;
  let grouped: TestServer;
  let mine: TestAgent;
  let theirs: TestAgent;
  /** The agents of `grouped` (the same ones when it shares the database, on PostgreSQL). */
  let groupedMine: TestAgent;
  let groupedTheirs: TestAgent;
  /** A second writer of `server`'s database: another instance on PostgreSQL. */
  let rival: TestServer;
  beforeAll(async () => {
    server = await startTestServer(engine);
    [mine, theirs] = [await server.createAgent(), await server.createAgent()];
    const shared = engine === 'postgres';
    grouped = await startTestServer(
      engine,
      { store: { ingestGroup: { maxBatches: 32, concurrency: 1 } } },
      shared ? { shareWith: server } : {},
    );
    [groupedMine, groupedTheirs] = shared
      ? [mine, theirs]
      : [await grouped.createAgent(), await grouped.createAgent()];
    rival = shared ? grouped : server;
  });
  afterAll(async () => {
    await grouped?.close();
    await server?.close();
  });

  const run = (events = 2, overrides: Partial<Trace> = {}) => {
    const trace = traceSnapshot({ eventCount: events, ...overrides });
    return { trace, events: Array.from({ length: events }, (_, i) => llmCallEvent(trace.id, i)) };
  };
  const write = (
    target: TestServer,
    agent: TestAgent,
    items: { trace: Trace; events: Event[] }[],
    options: Partial<BatchWrite> = {},
  ) =>
    target.store.traces.writeBatch({
      agentId: agent.agentId,
      batchId: newId(),
      items: items.map(({ trace, events }) => ({
        trace: { ...trace, agentId: agent.agentId },
        events,
      })),
      analysisGraceMs: 60_000,
      ...options,
    });
  const acceptedBatches = async (target: TestServer, batchId: string) =>
    (await target.store.sql.query('SELECT 1 FROM accepted_batches WHERE batch_id = $1', [batchId]))
      .length;

  it('creates a new trace with its events, as a batch does', async () => {
    const fresh = run(3);
    expect(await write(server, mine, [fresh], { newTraces: true })).toMatchObject({
      kind: 'accepted',
      traceId: fresh.trace.id,
    });
    expect(await storedTrace(server.store, fresh.trace.id)).toMatchObject({ event_count: 3 });
    expect(await storedEvents(server.store, fresh.trace.id)).toHaveLength(3);
  });

  it('writes nothing when one of its traces exists, of its agent or of another', async () => {
    const existing = run(2);
    const theirRun = run(1);
    expect((await write(server, mine, [existing])).kind).toBe('accepted');
    expect((await write(server, theirs, [theirRun])).kind).toBe('accepted');

    for (const [taken, position] of [
      [existing, 1],
      [theirRun, 0],
    ] as const) {
      // a newer snapshot of the taken trace, beside a new trace: neither is written
      const newer = run(4, { id: taken.trace.id });
      const fresh = run(2);
      const items = position === 1 ? [fresh, newer] : [newer, fresh];
      const batchId = newId();
      expect(await write(server, mine, items, { newTraces: true, batchId })).toEqual({
        kind: 'id-conflict',
        pointer: `/items/${position}/trace/id`,
      });
      expect(await storedTrace(server.store, fresh.trace.id)).toBeUndefined();
      expect(await storedTrace(server.store, taken.trace.id)).toMatchObject({
        event_count: taken.events.length,
      });
      expect(await storedEvents(server.store, taken.trace.id)).toHaveLength(taken.events.length);
      // the batch id was not taken: the same batch written the ordinary way is not a duplicate
      expect(await acceptedBatches(server, batchId)).toBe(0);
    }
  });

  it('in a group, only the batch whose trace exists is refused; its neighbours are written', async () => {
    const existing = run(2);
    expect((await write(grouped, groupedMine, [existing])).kind).toBe('accepted');
    const neighbours = Array.from({ length: 6 }, () => run(2));
    const groupsBefore = grouped.store.traces.groupCommits + grouped.store.traces.groupFallbacks;
    // the store held busy for a moment, so that the writes below wait and form a group
    const answers = await whileStoreBusy(grouped.store, () =>
      Promise.all([
        ...neighbours.map((n, i) =>
          write(grouped, i % 2 ? groupedTheirs : groupedMine, [n], { newTraces: i < 3 }),
        ),
        write(grouped, groupedMine, [run(3, { id: existing.trace.id })], { newTraces: true }),
      ]),
    );
    expect(answers.slice(0, 6).map((a) => a.kind)).toEqual(neighbours.map(() => 'accepted'));
    expect(answers[6]).toEqual({ kind: 'id-conflict', pointer: '/items/0/trace/id' });
    expect(grouped.store.traces.groupCommits + grouped.store.traces.groupFallbacks).toBeGreaterThan(
      groupsBefore,
    );
    for (const n of neighbours)
      expect(await storedEvents(grouped.store, n.trace.id)).toHaveLength(2);
    expect(await storedTrace(grouped.store, existing.trace.id)).toMatchObject({ event_count: 2 });
  });

  it('of two writers creating one trace at once, one writes it and the other is refused', async () => {
    for (let round = 0; round < 5; round++) {
      const id = run(1).trace.id;
      const [a, b] = [run(2, { id }), run(3, { id })];
      const answers = await Promise.all([
        write(server, mine, [a], { newTraces: true }),
        write(rival, mine, [b], { newTraces: true }),
      ]);
      const kinds = answers.map((x) => x.kind).sort();
      expect(kinds).toEqual(['accepted', 'id-conflict']);
      const winner = answers[0]!.kind === 'accepted' ? a : b;
      expect(await storedTrace(server.store, id)).toMatchObject({
        event_count: winner.events.length,
      });
      expect((await storedEvents(server.store, id)).map((e) => e.id).sort()).toEqual(
        winner.events.map((e) => e.id).sort(),
      );
    }
  });
});
