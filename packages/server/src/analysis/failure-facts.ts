import {
  runsAround,
  stepFailed,
  stepOf,
  type ReadEvent,
  type RunSteps,
  type StepFact,
} from './run-steps.js';

/*
 * The failures of a run, as chains: a step that fails because a step below it failed is a
 * wrapper, and its "child step failed" says less than the child's own error, so a chain is read
 * from the outermost failing step down to the deepest failing one below it — the root.
 *
 * "Below" follows parentEventId, which agents use in two ways: for a step inside another (a
 * wrapper, running around it), and for a step that followed from another (a quote that led to a
 * transaction, ended before it started). Going up from a failure: a failing ancestor failed
 * because of it; an ancestor that succeeded and was running around it handled it; one that had
 * already ended only led there, and the walk goes on above it. Failures a retry made good are
 * left out.
 */

export interface FailureChain {
  /** The deepest failing step: where the failure started. */
  root: StepFact;
  /** The failing steps above the root, nearest first: they failed because it did. */
  above: StepFact[];
  /**
   * The root's error, or when it has none, the nearest message above it (`from` its sequence):
   * a wrapper sometimes says what its silent child could not.
   */
  message: { text: string; from: number } | null;
  /** Steps that succeeded and led to the chain (parents that had ended before it), nearest first. */
  ledBy: StepFact[];
  /** The step around the chain that succeeded: the failure was handled inside it. */
  handledBy: StepFact | null;
  /** A parent id that is not among the analysed events (missing, or left out of a long run). */
  missingParent: string | null;
  /** Whether the failure reached the top of the run: no step around it succeeded. */
  reachedTop: boolean;
  /** For the primary chain's root at the top level: the steps just before it. */
  before: StepFact[];
}

export interface FailureFacts {
  /** Failed steps: status `error`, a failed confirmation or an unsettled payment. */
  failed: number;
  /** Failed steps that a retry made good (and the steps inside them). */
  recovered: number;
  /** Failed steps that were not made good. */
  unrecovered: number;
  /** Chains of failures that were not made good, their roots in order (at most `limit`). */
  chains: FailureChain[];
  moreChains: number;
  /** The failure the run most probably failed of: the first chain that reached the top, else the first. */
  primary: FailureChain | null;
  /** Failed steps (not made good) outside the primary chain, in order (at most 10). */
  others: StepFact[];
  moreOthers: number;
}

const MAX_DEPTH = 64;
/** Parents that led to a failure, named at most. */
const MAX_LED_BY = 5;

/** What lies above a failed step, up to the failure it explains or the step that handled it. */
interface Above {
  /** The nearest failing ancestor: it failed because of this step. */
  failing: ReadEvent | null;
  ledBy: ReadEvent[];
  handledBy: ReadEvent | null;
  missingParent: string | null;
}

function above(read: ReadEvent, steps: RunSteps, open: Set<string>): Above {
  const ledBy: ReadEvent[] = [];
  const seen = new Set([read.event.id]);
  let parentId = read.event.parentEventId ?? null;
  for (let depth = 0; parentId !== null && depth < MAX_DEPTH && !seen.has(parentId); depth++) {
    seen.add(parentId);
    const parent = steps.byId.get(parentId);
    if (!parent) return { failing: null, ledBy, handledBy: null, missingParent: parentId };
    if (open.has(parentId)) return { failing: parent, ledBy, handledBy: null, missingParent: null };
    if (runsAround(parent, read))
      return { failing: null, ledBy, handledBy: parent, missingParent: null };
    ledBy.push(parent);
    parentId = parent.event.parentEventId ?? null;
  }
  return { failing: null, ledBy, handledBy: null, missingParent: null };
}

/** The run's failures as chains, leaving out those in `recovered`. */
export function collectFailures(
  steps: RunSteps,
  recovered: Set<string>,
  limit: number,
): FailureFacts {
  const failed = steps.reads.filter(stepFailed);
  const open = new Set<string>();
  for (const r of failed) if (!recovered.has(r.event.id)) open.add(r.event.id);
  const unrecovered = failed.filter((r) => open.has(r.event.id));

  // who failed because of whom
  const aboveOf = new Map<string, Above>();
  const below = new Map<string, ReadEvent[]>();
  for (const r of unrecovered) {
    const a = above(r, steps, open);
    aboveOf.set(r.event.id, a);
    if (a.failing) {
      const list = below.get(a.failing.event.id);
      if (list) list.push(r);
      else below.set(a.failing.event.id, [r]);
    }
  }

  const chainFrom = (top: ReadEvent): FailureChain & { topLevel: boolean; rootIndex: number } => {
    // down: the earliest failure below, again and again (the failures happened in that order)
    const path: ReadEvent[] = [top];
    for (let depth = 0; depth < MAX_DEPTH; depth++) {
      const next = below.get(path.at(-1)!.event.id)?.[0];
      if (!next || path.includes(next)) break;
      path.push(next);
    }
    const root = path.at(-1)!;
    const upper = path.slice(0, -1).reverse();
    let message: FailureChain['message'] = null;
    for (const r of [root, ...upper])
      if (r.event.errorMessage) {
        message = { text: r.event.errorMessage, from: r.event.sequence };
        break;
      }
    const topAbove = aboveOf.get(top.event.id)!;
    const topLevel = path.length === 1 && top.event.parentEventId == null;
    return {
      root: stepOf(root),
      above: upper.map(stepOf),
      message,
      ledBy: path
        .slice()
        .reverse()
        .flatMap((r) => aboveOf.get(r.event.id)!.ledBy)
        .slice(0, MAX_LED_BY)
        .map(stepOf),
      handledBy: topAbove.handledBy ? stepOf(topAbove.handledBy) : null,
      missingParent: topAbove.missingParent,
      reachedTop: topAbove.handledBy === null,
      // filled in for the primary chain only: the facts stay small whatever the run
      before: [],
      topLevel,
      rootIndex: root.index,
    };
  };

  const found = unrecovered
    .filter((r) => aboveOf.get(r.event.id)!.failing === null)
    .map(chainFrom)
    .sort((a, b) => a.root.sequence - b.root.sequence);
  const chosen = found.find((c) => c.reachedTop) ?? found[0];
  if (chosen?.topLevel)
    chosen.before = steps.reads
      .slice(Math.max(0, chosen.rootIndex - 3), chosen.rootIndex)
      .map(stepOf);
  const chains: FailureChain[] = found.map(({ topLevel: _t, rootIndex: _r, ...chain }) => chain);
  const primary = chosen ? chains[found.indexOf(chosen)]! : null;

  const inPrimary = new Set(
    primary ? [primary.root.eventId, ...primary.above.map((s) => s.eventId)] : [],
  );
  const others = unrecovered.filter((r) => !inPrimary.has(r.event.id));
  return {
    failed: failed.length,
    recovered: failed.length - open.size,
    unrecovered: open.size,
    chains: chains.slice(0, limit),
    moreChains: Math.max(0, chains.length - limit),
    primary,
    others: others.slice(0, 10).map(stepOf),
    moreOthers: Math.max(0, others.length - 10),
  };
}
