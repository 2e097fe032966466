import { labelOf, startMs, stepFailed, type ReadEvent, type RunSteps } from './run-steps.js';
import { operationOf, roleOf, type Operation, type StepRole } from './step-operation.js';

/*
 * Retries: one operation tried again right after it failed, beside the same parent. A retry that
 * ends in a success recovered (its failures are not the run's problem, and not a loop); one whose
 * every attempt failed gave up. "Right after" means no other operation of the same role (action
 * or model call) in between: a model call between two tool attempts is the agent deciding to
 * try again. With the same input each time it is a retry whatever the outcome; with a changed
 * input (a bumped fee, an attempt counter) only when it ends in a success, since failing calls
 * with different inputs may as well be different work (five payouts, two of them failing).
 */

export interface RetryFact {
  /** The step's label, e.g. `tool_call jupiter.quote`. */
  label: string;
  attempts: number;
  failedAttempts: number;
  /** Whether the last attempt worked. */
  recovered: boolean;
  sameInput: boolean;
  /** Sequences of the attempts (at most 12). */
  sequences: number[];
  /** Distinct error messages of the failed attempts (at most 3). */
  errors: string[];
  /**
   * Time it cost: from the first attempt's start to the start of the one that worked, or to the
   * end of the last one for a retry that gave up; null when the times are unknown.
   */
  spentMs: number | null;
}

export interface RetryFindings {
  /** Every retry, in the order of its first attempt. */
  retries: RetryFact[];
  /** Failed steps that a later attempt made good, with every step inside them. */
  recovered: Set<string>;
  /** The retry each attempt belongs to, by event id. */
  byAttempt: Map<string, RetryFact>;
}

interface Streak {
  operation: Operation;
  items: ReadEvent[];
}

function retryOf(group: ReadEvent[]): RetryFact | null {
  if (group.length < 2) return null;
  const failed = group.filter(stepFailed);
  if (failed.length === 0) return null;
  const last = group.at(-1)!;
  const recovered = !stepFailed(last);
  const input = operationOf(group[0]!)?.input;
  const sameInput = group.every((r) => operationOf(r)?.input === input);
  if (!sameInput && !recovered) return null;
  const errors: string[] = [];
  for (const r of failed) {
    const message = r.event.errorMessage ?? null;
    if (message !== null && errors.length < 3 && !errors.includes(message)) errors.push(message);
  }
  const first = startMs(group[0]!);
  const lastEnd = last.event.durationMs == null ? null : startMs(last) + last.event.durationMs;
  const spent = recovered ? startMs(last) - first : lastEnd === null ? null : lastEnd - first;
  return {
    label: labelOf(group[0]!),
    attempts: group.length,
    failedAttempts: failed.length,
    recovered,
    sameInput,
    sequences: group.slice(0, 12).map((r) => r.event.sequence),
    errors,
    spentMs: spent === null || spent < 0 ? null : spent,
  };
}

/** The retries of the run, and which failures they made good. */
export function findRetries(steps: RunSteps): RetryFindings {
  const found: { first: number; fact: RetryFact; group: ReadEvent[] }[] = [];

  const settle = (streak: Streak) => {
    // a streak splits after each success: [failed…, ok] groups, and failures at the end
    let group: ReadEvent[] = [];
    const consider = () => {
      const fact = retryOf(group);
      if (fact) found.push({ first: group[0]!.event.sequence, fact, group });
      group = [];
    };
    for (const read of streak.items) {
      group.push(read);
      if (!stepFailed(read)) consider();
    }
    consider();
  };

  for (const lane of steps.lanes.values()) {
    const open = new Map<StepRole, Streak>();
    for (const read of lane) {
      const role = roleOf(read);
      const operation = operationOf(read);
      const streak = open.get(role);
      if (streak && operation && streak.operation.key === operation.key) {
        streak.items.push(read);
        continue;
      }
      if (streak) settle(streak);
      if (operation) open.set(role, { operation, items: [read] });
      else open.delete(role);
    }
    for (const streak of open.values()) settle(streak);
  }

  found.sort((a, b) => a.first - b.first);
  const recovered = new Set<string>();
  const byAttempt = new Map<string, RetryFact>();
  const markInside = (read: ReadEvent) => {
    const stack = [read];
    while (stack.length > 0) {
      const next = stack.pop()!;
      if (recovered.has(next.event.id)) continue;
      recovered.add(next.event.id);
      stack.push(...(steps.children.get(next.event.id) ?? []));
    }
  };
  for (const { fact, group } of found) {
    for (const read of group) byAttempt.set(read.event.id, fact);
    if (fact.recovered) for (const read of group.slice(0, -1)) markInside(read);
  }
  return { retries: found.map((f) => f.fact), recovered, byAttempt };
}
