import type { Event } from '@flightlog/protocol';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { REBUILT_MAX_BYTES, replayHistoryFrom } from '../../src/live/replay-history.js';
import { describeEngines, openTestStore, type TestStore } from '../harness/engines.js';
import { llmCallEvent, newId, traceSnapshot } from '../fixtures/batches.js';

/*
 * Break found in review (issue 15 follow-up): the replay a Redis bus rebuilds from the store is
 * bounded to REBUILT_MAX_BYTES only after `recentRuns` has loaded up to 100 runs x 200 events,
 * whatever their size. One agent key can store large, highly compressible payloads (40 MB of
 * events is 6 MB on disk), and every stream opened on that agent after Redis lost its data loads
 * all of it into the server's memory: against a real `flightlog serve` on PostgreSQL, 100 runs
 * of 200 events of 200 KB took the server from 117 MB to 1.8-2.3 GB RSS per replay, hit the
 * statement timeout, left the rebuild undone and so repeated it at every stream opened.
 */

const EVENTS = 200;
const PAYLOAD_BYTES = 100 * 1024;
const EVENTS_PER_BATCH = 20;

describeEngines('a rebuilt replay reads the store within its byte budget [%s]', (engine) => {
  let t: TestStore;
  const agentId = `agent-${newId()}`;

  beforeAll(async () => {
    t = await openTestStore(engine);
    await t.store.agents.createAgent({
      id: agentId,
      name: null,
      keyId: newId(),
      keyHash: newId(),
      verifyTokenHash: newId(),
    });
    // one run of 200 events of 100 KB each: 20 MB, well past the 8 MiB budget
    const trace = traceSnapshot({ agentId, eventCount: EVENTS });
    for (let from = 0; from < EVENTS; from += EVENTS_PER_BATCH) {
      const events: Event[] = Array.from({ length: EVENTS_PER_BATCH }, (_, i) => {
        const event = llmCallEvent(trace.id, from + i);
        return { ...event, payload: { ...event.payload, blob: 'x'.repeat(PAYLOAD_BYTES) } };
      });
      const outcome = await t.store.traces.writeBatch({
        agentId,
        batchId: newId(),
        items: [{ trace, events }],
        analysisGraceMs: 60_000,
      });
      expect(outcome.kind).toBe('accepted');
    }
  }, 120_000);
  afterAll(() => t?.dispose());

  it('loads at most about REBUILT_MAX_BYTES of events from the store for one rebuild', async () => {
    let loadedBytes = 0;
    const history = replayHistoryFrom({
      // the real store; only counts what it hands to the server's memory
      recentRuns: async (...args) => {
        const runs = await t.store.traces.recentRuns(...args);
        for (const run of runs) loadedBytes += JSON.stringify(run.events).length;
        return runs;
      },
    });
    const now = Date.now();
    const rebuilt = await history(agentId, {
      from: new Date(now - 86_400_000),
      before: new Date(now + 1_000),
    });
    console.log(
      `[${engine}] rebuilt replay loaded ${(loadedBytes / 1024 / 1024).toFixed(1)} MiB ` +
        `of events for a budget of ${REBUILT_MAX_BYTES / 1024 / 1024} MiB`,
    );
    expect(loadedBytes).toBeLessThanOrEqual(REBUILT_MAX_BYTES * 1.25);
    // the run is still in the replay, with as many of its newest events as fit
    expect(rebuilt).toHaveLength(1);
    const run = JSON.parse(rebuilt[0] as string) as { events: Event[] };
    expect(run.events.length).toBeGreaterThan(10);
    expect(run.events.at(-1)?.sequence).toBe(EVENTS - 1);
  }, 60_000);
});
