import type { Event } from '@flightlog/protocol';
import { stepName } from './waterfall-layout.js';

/** One line of two runs side by side: the same step in both, or a step only one of them took. */
export interface AlignedStep {
  left: Event | null;
  right: Event | null;
  /** The same step but a different outcome (status), or a step only one run took. */
  differs: boolean;
}

/** Runs longer than this are compared on their first steps (the alignment is quadratic). */
export const MAX_ALIGNED_STEPS = 2000;

const signature = (event: Event) => `${event.type}\u0000${stepName(event)}`;

/**
 * Lines two runs' steps up in order (a longest common subsequence of "type + name"), so that a
 * step one run inserted or skipped shows as a gap instead of shifting every later line.
 */
export function alignRuns(left: readonly Event[], right: readonly Event[]): AlignedStep[] {
  const a = [...left].sort((x, y) => x.sequence - y.sequence).slice(0, MAX_ALIGNED_STEPS);
  const b = [...right].sort((x, y) => x.sequence - y.sequence).slice(0, MAX_ALIGNED_STEPS);
  const sa = a.map(signature);
  const sb = b.map(signature);
  const width = b.length + 1;
  const table = new Uint16Array((a.length + 1) * width);
  for (let i = a.length - 1; i >= 0; i--)
    for (let j = b.length - 1; j >= 0; j--)
      table[i * width + j] =
        sa[i] === sb[j]
          ? table[(i + 1) * width + j + 1]! + 1
          : Math.max(table[(i + 1) * width + j]!, table[i * width + j + 1]!);
  const steps: AlignedStep[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && sa[i] === sb[j]) {
      steps.push({ left: a[i]!, right: b[j]!, differs: a[i]!.status !== b[j]!.status });
      i++;
      j++;
    } else if (
      j >= b.length ||
      (i < a.length && table[(i + 1) * width + j]! >= table[i * width + j + 1]!)
    ) {
      steps.push({ left: a[i]!, right: null, differs: true });
      i++;
    } else {
      steps.push({ left: null, right: b[j]!, differs: true });
      j++;
    }
  }
  return steps;
}

/** Where two runs part ways: the index of the first aligned line that differs, or -1. */
export const firstDivergence = (steps: readonly AlignedStep[]): number =>
  steps.findIndex((s) => s.differs);
