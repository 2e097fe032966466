import { DIRECT_FAILURES } from './direct-failures.js';
import { ENCRYPTED } from './encrypted.js';
import type { LabelledRun } from './labelled-run.js';
import { LARGE_RUNS } from './large-runs.js';
import { LOOPS } from './loops.js';
import { NESTED_FAILURES } from './nested-failures.js';
import { PROMPT_INJECTION } from './prompt-injection.js';
import { RETRIES } from './retries.js';
import { SUCCESSES } from './successes.js';
import { TIMEOUTS_AND_PARTIAL } from './timeouts-and-partial.js';

/*
 * The labelled set (issue 21): runs of every event type and failure shape, each with the cause a
 * careful engineer would name and what the top of its autopsy must and must not say. Scored by
 * test/analysis/labelled-runs.test.ts (heuristic and LLM analyzers) and by bench/analysis.mjs.
 */
export const LABELLED_RUNS: readonly LabelledRun[] = [
  ...DIRECT_FAILURES,
  ...NESTED_FAILURES,
  ...RETRIES,
  ...LOOPS,
  ...TIMEOUTS_AND_PARTIAL,
  ...SUCCESSES,
  ...ENCRYPTED,
  ...LARGE_RUNS,
  ...PROMPT_INJECTION,
];

export { LABELLED_KEY, LABELLED_SECRETS } from './encrypted.js';
export { LARGE_RUN_EVENTS } from './large-runs.js';
export {
  TOP_CHARS,
  describeMisses,
  plainText,
  scoreAutopsy,
  topBlock,
  type CaseScore,
  type LabelledRun,
  type Shape,
} from './labelled-run.js';
