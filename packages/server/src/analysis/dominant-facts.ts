import type { Trace } from '@flightlog/protocol';
import { formatUsd } from './payload-fields.js';
import { containerOf, startMs, stepOf, type RunSteps, type StepFact } from './run-steps.js';
import { costOf } from './spend-facts.js';

/*
 * Dominant steps: one step that took more than half of the run's time, or of its model cost.
 * Time is a step's own time — its duration less that of the steps that ran inside it — so a
 * wrapper around the whole run dominates nothing, and the step inside it that did the waiting
 * does.
 */

/** More than this share of the run makes a step dominant. */
export const DOMINANT_SHARE = 0.5;

export type DominantFact =
  | {
      kind: 'time';
      step: StepFact;
      /** Of the run's duration, 0..1. */
      share: number;
      /** The step's own time (its children's excluded). */
      ms: number;
      runMs: number;
    }
  | {
      kind: 'cost';
      step: StepFact;
      /** Of the run's model cost, 0..1. */
      share: number;
      usd: string;
      totalUsd: string;
    };

/** The run's duration: the trace's own, else from its first step's start to its last end. */
function runDuration(trace: Trace, steps: RunSteps): number | null {
  if (typeof trace.durationMs === 'number' && trace.durationMs > 0) return trace.durationMs;
  let first = Infinity;
  let last = -Infinity;
  for (const read of steps.reads) {
    const start = startMs(read);
    first = Math.min(first, start);
    last = Math.max(last, start + (read.event.durationMs ?? 0));
  }
  return last > first ? last - first : null;
}

function dominantTime(trace: Trace, steps: RunSteps): DominantFact | null {
  const runMs = runDuration(trace, steps);
  if (runMs === null || steps.reads.length < 2) return null;
  // the time of the steps each step runs around (its children, and steps that followed from
  // them while it ran), by the id of that step
  const inside = new Map<string, number>();
  for (const read of steps.reads) {
    if (read.event.parentEventId == null || read.event.durationMs == null) continue;
    const container = containerOf(read, steps);
    if (container)
      inside.set(container.event.id, (inside.get(container.event.id) ?? 0) + read.event.durationMs);
  }
  let best: { read: RunSteps['reads'][number]; own: number } | null = null;
  for (const read of steps.reads) {
    const duration = read.event.durationMs;
    if (duration == null) continue;
    const own =
      inside.size === 0 ? duration : Math.max(0, duration - (inside.get(read.event.id) ?? 0));
    if (!best || own > best.own) best = { read, own };
  }
  if (!best || best.own / runMs <= DOMINANT_SHARE) return null;
  return {
    kind: 'time',
    step: stepOf(best.read),
    share: Math.min(1, best.own / runMs),
    ms: best.own,
    runMs,
  };
}

function dominantCost(trace: Trace, steps: RunSteps): DominantFact | null {
  let readable = 0;
  let priced = 0;
  let best: { read: RunSteps['reads'][number]; usd: number } | null = null;
  for (const read of steps.reads) {
    const usd = costOf(read);
    if (usd <= 0) continue;
    priced++;
    readable += usd;
    if (!best || usd > best.usd) best = { read, usd };
  }
  // a run with one priced call has nothing to compare it with
  if (!best || priced < 2) return null;
  // unreadable payloads hold cost too: the trace's total bounds the share from above
  const total = Math.max(readable, Number(trace.totalCostUsd) || 0);
  if (best.usd / total <= DOMINANT_SHARE) return null;
  return {
    kind: 'cost',
    step: stepOf(best.read),
    share: best.usd / total,
    usd: formatUsd(best.usd),
    totalUsd: formatUsd(total),
  };
}

/** The step that dominated the run's time, and the one that dominated its cost (either may be absent). */
export function findDominant(trace: Trace, steps: RunSteps): DominantFact[] {
  return [dominantTime(trace, steps), dominantCost(trace, steps)].filter(
    (d): d is DominantFact => d !== null,
  );
}
