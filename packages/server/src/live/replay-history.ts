import type { TraceStore } from '../store/trace-store.js';

/**
 * Where a bus that lost an agent's buffered batches (Redis restarted empty) rebuilds the
 * replay from: the agent's recent runs created in [`from`, `before`), oldest first, each as the
 * JSON of one `trace` message (its current snapshot and its latest events).
 */
export type ReplayHistory = (
  agentId: string,
  window: { from: Date; before: Date },
) => Promise<string[]>;

/** Bounds of a rebuilt replay: it is read from the store and written to the bus in one go. */
export const REBUILT_RUNS = 100;
export const REBUILT_EVENTS_PER_RUN = 200;
export const REBUILT_MAX_BYTES = 8 * 1024 * 1024;

/**
 * The store as a replay history. A run is a message of the same shape as a batch's item, so a
 * dashboard applies it as it applies any update; older events of a long run stay in the read
 * API. Runs past the byte budget are left out, the oldest first.
 */
export function replayHistoryFrom(traces: Pick<TraceStore, 'recentRuns'>): ReplayHistory {
  return async (agentId, window) => {
    const runs = await traces.recentRuns(agentId, {
      createdFrom: window.from,
      createdBefore: window.before,
      runs: REBUILT_RUNS,
      eventsPerRun: REBUILT_EVENTS_PER_RUN,
      // room left for the snapshots and the JSON around the events
      maxBytes: Math.floor(REBUILT_MAX_BYTES * 0.875),
    });
    const kept: string[] = [];
    let bytes = 0;
    for (let i = runs.length - 1; i >= 0; i--) {
      const json = JSON.stringify(runs[i]);
      // a run that does not fit is left out, not every run older than it
      if (bytes + json.length > REBUILT_MAX_BYTES) continue;
      bytes += json.length;
      kept.push(json);
    }
    return kept.reverse();
  };
}
