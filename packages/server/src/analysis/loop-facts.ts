import { stepFailed, type ReadEvent, type RunSteps } from './run-steps.js';
import { operationOf, roleOf } from './step-operation.js';

/*
 * Loops: repetition without progress. Among the actions beside one parent (model calls and
 * notes in between are the agent thinking, and do not count), the same call — operation, input
 * and answer — over and over, or the same cycle of calls (click "next", read the page, click
 * "next", …), at least LOOP_REPEATS times in a row. What is not a loop: one tool called with a
 * new input each time (paging through results), the same call far apart with other work
 * between, a retry (failures, then one success), and polling that ends when the answer changes.
 */

export interface LoopFact {
  /** The names of the operations in the cycle, in order (one for a plain repetition). */
  operations: string[];
  /** Step labels of the cycle, in order. */
  labels: string[];
  /** Calls in one cycle: 1 for the same call again and again, 2 for A, B, A, B, … */
  period: number;
  /** How many times the cycle ran in a row. */
  repetitions: number;
  /** Calls in the loop (`period` × `repetitions`, and a partial cycle). */
  calls: number;
  /** Distinct inputs in one cycle. */
  inputs: number;
  /** The repeated input, shortened, when the cycle is one call of a plain payload. */
  input: string | null;
  /** Sequences of the calls (at most 12). */
  sequences: number[];
  firstSequence: number;
  lastSequence: number;
}

/** Times a cycle must run in a row to be a loop. */
export const LOOP_REPEATS = 3;
/** The longest cycle looked for. */
const MAX_PERIOD = 4;

interface Window {
  start: number;
  /** Exclusive. */
  end: number;
  period: number;
}

/** A key per action: the same call gives the same key; an unreadable one matches nothing. */
function callKey(read: ReadEvent): string | null {
  const op = operationOf(read);
  return op === null ? null : `${op.key}\u0000${op.input}\u0000${op.output ?? ''}`;
}

/** The smallest period of the first `period` keys from `start` (a cycle A,B,A,B has period 2). */
function isPrimitive(keys: (string | null)[], start: number, period: number): boolean {
  for (let d = 1; d < period; d++) {
    if (period % d !== 0) continue;
    let repeats = true;
    for (let i = start + d; i < start + period && repeats; i++) repeats = keys[i] === keys[i - d];
    if (repeats) return false;
  }
  return true;
}

function windowsOf(actions: ReadEvent[], keys: (string | null)[]): Window[] {
  const windows: Window[] = [];
  for (let period = 1; period <= MAX_PERIOD; period++) {
    let i = period;
    while (i < keys.length) {
      if (keys[i] === null || keys[i] !== keys[i - period]) {
        i++;
        continue;
      }
      let j = i;
      while (j < keys.length && keys[j] !== null && keys[j] === keys[j - period]) j++;
      // keys[i - period .. j) repeat with this period
      const start = i - period;
      const length = j - start;
      if (Math.floor(length / period) >= LOOP_REPEATS && isPrimitive(keys, start, period)) {
        const window = { start, end: j, period };
        if (period > 1 || isStuck(actions, keys, window)) windows.push(window);
      }
      i = j + 1;
    }
  }
  return windows;
}

/**
 * Whether the same call again and again made no progress: not a retry (at most one success)
 * and not a poll that ended with a changed answer (the next action is the same call with the
 * same input and another answer).
 */
function isStuck(actions: ReadEvent[], keys: (string | null)[], window: Window): boolean {
  let succeeded = 0;
  for (let i = window.start; i < window.end; i++) if (!stepFailed(actions[i]!)) succeeded++;
  if (succeeded < LOOP_REPEATS) return false;
  const next = actions[window.end];
  if (!next || keys[window.end] === null) return true;
  const a = operationOf(actions[window.start]!)!;
  const b = operationOf(next)!;
  return !(a.key === b.key && a.input === b.input && a.output !== b.output);
}

function loopOf(actions: ReadEvent[], window: Window): LoopFact {
  const cycle = actions.slice(window.start, window.start + window.period);
  const ops = cycle.map((r) => operationOf(r)!);
  const calls = window.end - window.start;
  const names: string[] = [];
  for (const op of ops) if (!names.includes(op.name)) names.push(op.name);
  return {
    operations: names,
    labels: cycle.map((r) => `${r.event.type} ${operationOf(r)!.name}`),
    period: window.period,
    repetitions: Math.floor(calls / window.period),
    calls,
    inputs: new Set(ops.map((op) => `${op.key}\u0000${op.input}`)).size,
    input: window.period === 1 ? (ops[0]?.quote ?? null) : null,
    sequences: actions
      .slice(window.start, Math.min(window.end, window.start + 12))
      .map((r) => r.event.sequence),
    firstSequence: actions[window.start]!.event.sequence,
    lastSequence: actions[window.end - 1]!.event.sequence,
  };
}

/** Every loop of the run, longest first. */
export function findLoops(steps: RunSteps): LoopFact[] {
  const loops: LoopFact[] = [];
  for (const lane of steps.lanes.values()) {
    const actions = lane.filter((r) => roleOf(r) === 'action');
    if (actions.length < LOOP_REPEATS) continue;
    const keys = actions.map(callKey);
    // the shortest cycle wins where two overlap (A,A,A,A is a repetition, not a cycle of A,A)
    const taken: Window[] = [];
    for (const w of windowsOf(actions, keys))
      if (!taken.some((t) => w.start < t.end && t.start < w.end)) taken.push(w);
    for (const w of taken) loops.push(loopOf(actions, w));
  }
  return loops.sort((a, b) => b.calls - a.calls || a.firstSequence - b.firstSequence);
}
