import type { Trace } from '@flightlog/protocol';
import type { DominantFact } from './dominant-facts.js';
import type { FailureChain, FailureFacts } from './failure-facts.js';
import type { LoopFact } from './loop-facts.js';
import type { RetryFact, RetryFindings } from './retry-facts.js';
import {
  startMs,
  stepOf,
  stepUnfinished,
  type ReadEvent,
  type RunSteps,
  type StepFact,
} from './run-steps.js';
import { chainTxOf, paymentOf, type ChainTxFact, type PaymentFact } from './spend-facts.js';

/*
 * The answer on top of every autopsy: how the run ended and, when something went wrong, the most
 * probable causes, computed from the facts alone. Both analyzers state it as it is (a model
 * writes prose around it, never in its place), so text inside the agent's payloads cannot
 * change it.
 */

export type Outcome =
  | 'succeeded'
  /** Completed, and every failure was made good by a retry. */
  | 'succeeded-after-retries'
  /** Completed, with failures that were not made good, or a loop. */
  | 'completed-with-problems'
  | 'failed'
  | 'timed-out'
  | 'running';

export type Cause =
  | {
      kind: 'failure';
      chain: FailureChain;
      /** When the root is an attempt of a retry that gave up. */
      retry: RetryFact | null;
      /** The root's own identifiers when it is a chain transaction or a payment. */
      chainTx: ChainTxFact | null;
      payment: PaymentFact | null;
    }
  | { kind: 'loop'; loop: LoopFact }
  /** A step that never ended, in a run that did. */
  | { kind: 'unfinished'; step: StepFact; startedAfterMs: number | null }
  /** No step explains it: what the run itself reported, and where its time went. */
  | { kind: 'run-error'; message: string | null; dominant: DominantFact | null };

export interface Diagnosis {
  outcome: Outcome;
  /** Failed steps, those a retry made good included. */
  failedSteps: number;
  /** Failed steps that a retry made good. */
  recoveredFailures: number;
  /** The most probable causes, the most probable first (at most 2). */
  causes: Cause[];
  /** Retries that recovered, the costliest in time first (at most 3). */
  recoveredRetries: RetryFact[];
  /** The steps that took most of the run's time or model cost. */
  dominant: DominantFact[];
}

const MAX_CAUSES = 2;

/** What a guard that stops a loop says. */
const GUARD = /\b(?:loop|repeat|limit|max(?:imum)?|budget|too many|iterations?)\b/i;

function failureCause(chain: FailureChain, steps: RunSteps, retries: RetryFindings): Cause {
  const root = steps.byId.get(chain.root.eventId);
  const retry = retries.byAttempt.get(chain.root.eventId);
  return {
    kind: 'failure',
    chain,
    retry: retry && !retry.recovered ? retry : null,
    chainTx: root?.event.type === 'chain_tx' ? chainTxOf(root) : null,
    payment: root?.event.type === 'x402_payment' ? paymentOf(root) : null,
  };
}

/** The innermost step that never ended (its children ended, or it has none). */
function unfinishedStep(steps: RunSteps, trace: Trace): Cause | null {
  const open = steps.reads.filter(stepUnfinished);
  const innermost = open.find(
    (r) => !(steps.children.get(r.event.id) ?? []).some((c: ReadEvent) => stepUnfinished(c)),
  );
  if (!innermost) return null;
  const runStart = Date.parse(trace.startedAt);
  return {
    kind: 'unfinished',
    step: stepOf(innermost),
    startedAfterMs: Number.isFinite(runStart) ? Math.max(0, startMs(innermost) - runStart) : null,
  };
}

function outcomeOf(trace: Trace, failures: FailureFacts, loops: LoopFact[]): Outcome {
  switch (trace.status) {
    case 'errored':
      return 'failed';
    case 'timeout':
      return 'timed-out';
    case 'completed':
      if (failures.unrecovered > 0 || loops.length > 0) return 'completed-with-problems';
      return failures.recovered > 0 ? 'succeeded-after-retries' : 'succeeded';
    default:
      return 'running';
  }
}

export function diagnose(
  trace: Trace,
  steps: RunSteps,
  facts: {
    failures: FailureFacts;
    retries: RetryFindings;
    loops: LoopFact[];
    dominant: DominantFact[];
  },
): Diagnosis {
  const { failures, retries, loops, dominant } = facts;
  const outcome = outcomeOf(trace, failures, loops);
  const causes: Cause[] = [];
  const primary = failures.primary;
  const failure = primary ? failureCause(primary, steps, retries) : null;
  const loop = loops[0];
  if (failure) causes.push(failure);
  if (loop) {
    // a loop stopped by a guard (a step saying a limit was reached) is what that failure ended
    const guard =
      primary !== null &&
      loop.firstSequence < primary.root.sequence &&
      (primary.root.type === 'custom' || GUARD.test(primary.message?.text ?? ''));
    causes.splice(guard ? 0 : causes.length, 0, { kind: 'loop', loop });
  }
  if (outcome === 'failed' || outcome === 'timed-out') {
    const unfinished = unfinishedStep(steps, trace);
    if (unfinished) causes.push(unfinished);
    if (causes.length === 0)
      causes.push({
        kind: 'run-error',
        message: trace.errorMessage ?? null,
        dominant: dominant.find((d) => d.kind === 'time') ?? null,
      });
  }
  const recoveredRetries = retries.retries
    .filter((r) => r.recovered)
    .sort((a, b) => (b.spentMs ?? 0) - (a.spentMs ?? 0))
    .slice(0, 3);
  return {
    outcome,
    failedSteps: failures.failed,
    recoveredFailures: failures.recovered,
    causes: causes.slice(0, MAX_CAUSES),
    recoveredRetries,
    dominant,
  };
}
