import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeEngines, type EngineName } from '../harness/engines.js';
import { postBatch } from '../harness/http.js';
import { startTestServer, type TestServer } from '../harness/test-server.js';
import { llmCallEvent, newId, traceSnapshot } from '../fixtures/batches.js';

/** 20 KiB of payload text per event: what the rebuilt replay's byte budget is measured in. */
const BIG = 'x'.repeat(20 * 1024);

/*
 * What a live replay is rebuilt from when Redis lost it (live/replay-history.ts): the agent's
 * recent runs with their newest events, loaded within a byte budget, newest runs first, so a
 * tenant whose runs hold huge events cannot make a rebuild load them all.
 */
describeEngines('recent runs for a rebuilt replay [%s]', (engine: EngineName) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(engine);
  });
  afterAll(() => server?.close());

  it('loads the newest events of the newest runs within maxBytes, and nothing past it', async () => {
    const agent = await server.createAgent();
    const runs = [];
    for (let r = 0; r < 3; r++) {
      const trace = traceSnapshot({ eventCount: 4, startedAt: `2026-11-0${r + 1}T10:00:00.000Z` });
      const events = Array.from({ length: 4 }, (_, i) =>
        llmCallEvent(trace.id, i, { payload: { name: 'big', data: BIG } }),
      );
      const res = await postBatch(server.url, agent.apiKey, {
        batchId: newId(),
        items: [{ trace, events }],
      });
      expect(res.status, res.text).toBe(202);
      runs.push({ trace, events });
    }
    const window = { createdFrom: new Date(0), createdBefore: new Date(Date.now() + 60_000) };
    const all = await server.store.traces.recentRuns(agent.agentId, {
      ...window,
      runs: 10,
      eventsPerRun: 10,
      maxBytes: 10 * 1024 * 1024,
    });
    expect(all.map((r) => r.trace.id)).toEqual(runs.map((r) => r.trace.id));
    expect(all.map((r) => r.events.length)).toEqual([4, 4, 4]);

    // room for 6 events: the newest run whole, then the newest two of the one before
    const bounded = await server.store.traces.recentRuns(agent.agentId, {
      ...window,
      runs: 10,
      eventsPerRun: 10,
      maxBytes: 6 * (BIG.length + 100),
    });
    expect(bounded.map((r) => r.trace.id)).toEqual(runs.map((r) => r.trace.id));
    expect(bounded[2]?.events.map((e) => e.id)).toEqual(runs[2]?.events.map((e) => e.id));
    expect(bounded[1]?.events.map((e) => e.id)).toEqual(runs[1]?.events.slice(2).map((e) => e.id));
    expect(bounded[0]?.events).toEqual([]);
  });
});
