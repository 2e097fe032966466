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

const NOTHING_ABOVE: Above = { failing: null, ledBy: [], handledBy: null, missingParent: null };

function above(read: ReadEvent, steps: RunSteps, open: Set<string>): Above {
  let parentId = read.event.parentEventId ?? null;
  if (parentId === null) return NOTHING_ABOVE;
  const ledBy: ReadEvent[] = [];
  // the depth bound also ends a cycle of parent ids
  for (let depth = 0; parentId !== null && depth < MAX_DEPTH; depth++) {
    const parent = steps.byId.get(parentId);
    if (!parent) return { failing: null, ledBy, handledBy: null, missingParent: parentId };
    if (parent === read) break;
    if (open.has(parentId)) return { failing: parent, ledBy, handledBy: null, missingParent: null };
    if (runsAround(parent, read))
      return { failing: null, ledBy, handledBy: parent, missingParent: null };
    ledBy.push(parent);
    parentId = parent.event.parentEventId ?? null;
  }
  return { failing: null, ledBy, handledBy: null, missingParent: null };
}

/** One chain, found: the failing steps from its top down to its root. */
interface Path {
  steps: ReadEvent[];
  root: ReadEvent;
  top: Above;
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

  // down from each top: the earliest failure below, again and again (they happened in that order)
  const paths: Path[] = [];
  for (const top of unrecovered) {
    const topAbove = aboveOf.get(top.event.id)!;
    if (topAbove.failing !== null) continue;
    const path = [top];
    for (let depth = 0; depth < MAX_DEPTH; depth++) {
      const next = below.get(path.at(-1)!.event.id)?.[0];
      if (!next || path.includes(next)) break;
      path.push(next);
    }
    paths.push({ steps: path, root: path.at(-1)!, top: topAbove });
  }
  paths.sort((a, b) => a.root.event.sequence - b.root.event.sequence);
  const chosen = paths.find((p) => p.top.handledBy === null) ?? paths[0];

  // the facts of a chain, made only for those listed (a run may hold thousands)
  const chainOf = (path: Path): FailureChain => {
    const { root, top } = path;
    const upper = path.steps.slice(0, -1).reverse();
    let message: FailureChain['message'] = null;
    for (const r of [root, ...upper])
      if (r.event.errorMessage) {
        message = { text: r.event.errorMessage, from: r.event.sequence };
        break;
      }
    const topLevel = path.steps.length === 1 && root.event.parentEventId == null;
    return {
      root: stepOf(root),
      above: upper.map(stepOf),
      message,
      ledBy: [root, ...upper]
        .flatMap((r) => aboveOf.get(r.event.id)!.ledBy)
        .slice(0, MAX_LED_BY)
        .map(stepOf),
      handledBy: top.handledBy ? stepOf(top.handledBy) : null,
      missingParent: top.missingParent,
      reachedTop: top.handledBy === null,
      // for the primary chain only: the facts stay small whatever the run
      before:
        path === chosen && topLevel
          ? steps.reads.slice(Math.max(0, root.index - 3), root.index).map(stepOf)
          : [],
    };
  };
  const chains = paths.slice(0, limit).map(chainOf);
  const listed = chosen ? paths.indexOf(chosen) : -1;
  const primary = !chosen ? null : listed < limit ? chains[listed]! : chainOf(chosen);

  const inPrimary = new Set(chosen?.steps.map((r) => r.event.id) ?? []);
  const others = unrecovered.filter((r) => !inPrimary.has(r.event.id));
  return {
    failed: failed.length,
    recovered: failed.length - open.size,
    unrecovered: open.size,
    chains,
    moreChains: Math.max(0, paths.length - limit),
    primary,
    others: others.slice(0, 10).map(stepOf),
    moreOthers: Math.max(0, others.length - 10),
  };
}
