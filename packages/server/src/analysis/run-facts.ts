import type { StoredRun } from '../analysis/analyzer.js';
import { diagnose, type Diagnosis } from './diagnosis.js';
import { findDominant, type DominantFact } from './dominant-facts.js';
import { collectFailures, type FailureFacts } from './failure-facts.js';
import { findLoops, type LoopFact } from './loop-facts.js';
import { str } from './payload-fields.js';
import { findRetries, type RetryFact } from './retry-facts.js';
import { readRunSteps, stepOf, type ReadEvent, type StepFact } from './run-steps.js';
import { collectSpend, type MovementFacts } from './spend-facts.js';
import { collectTools, type ToolFacts } from './tool-facts.js';

/*
 * The facts of one run that an autopsy states, computed from the stored trace and its events.
 * Both analyzers start here: the heuristic one renders them as Markdown, the LLM one sends them
 * as JSON and writes prose around the computed diagnosis. Payloads are read defensively (the
 * server accepts any object payload), and encrypted ones are opened only when a key is given,
 * in memory, for this computation. Each concept has its module: steps (run-steps), failures,
 * retries, loops, dominant steps, tools, spend, and the diagnosis drawn from them.
 */

export type { PayloadAccess, StepFact } from './run-steps.js';
export type { ContributorFact, ChainTxFact, PaymentFact } from './spend-facts.js';
export type { ToolFact } from './tool-facts.js';
export type { LoopFact } from './loop-facts.js';
export type { RetryFact } from './retry-facts.js';
export type { FailureChain } from './failure-facts.js';
export type { DominantFact } from './dominant-facts.js';
export type { Cause, Diagnosis, Outcome } from './diagnosis.js';
export { formatUsd } from './payload-fields.js';

export type RunFacts = {
  traceId: string;
  status: string;
  /** The computed answer: outcome and most probable causes (first, so a cut never drops it). */
  diagnosis: Diagnosis;
  inputSummary: string;
  outputSummary: string | null;
  errorMessage: string | null;
  startedAt: string;
  endedAt: string | null;
  durationMs: number | null;
  tags: string[];
  events: {
    /** The trace's own count (may exceed what is stored, or what was loaded). */
    reported: number;
    analysed: number;
    /** Left out of a very long run (the middle). */
    omitted: number;
    byType: Record<string, number>;
    /** Names of `custom` events, with counts: the LISTED most frequent. */
    custom: Record<string, number>;
    moreCustomNames: number;
  };
  failures: Omit<FailureFacts, 'primary'>;
  /** Retries, in order (at most LISTED). */
  retries: RetryFact[];
  moreRetries: number;
  /** Loops, the longest first (at most LISTED). */
  loops: LoopFact[];
  moreLoops: number;
  dominant: DominantFact[];
  slowest: StepFact[];
  /** The trace's own de-duplicated tool names (known even when payloads are not), the first LISTED. */
  toolsListed: string[];
  moreToolsListed: number;
  encryption: {
    encrypted: number;
    decrypted: number;
    unreadable: number;
    /** Whether the worker had SERVICE_MASTER_KEY. */
    keyGiven: boolean;
    /** Why payloads could not be read, with counts (`no-key`, `authentication-failed`, ...). */
    reasons: Record<string, number>;
  };
} & ToolFacts &
  MovementFacts;

export interface FactOptions {
  /** SERVICE_MASTER_KEY: opens encrypted payloads for this computation only. */
  masterKey?: Buffer | undefined;
}

/**
 * Every list of the facts stops here: a run may have 20,000 distinct tools, and the facts (for
 * the autopsy and for a model's prompt) must stay small whatever the run.
 */
const LISTED = 20;
/** Failure chains are larger items: fewer of them (the primary one is in the diagnosis). */
const CHAINS_LISTED = 10;

/** Every fact an autopsy states about `run`. */
export function collectRunFacts(run: StoredRun, options: FactOptions = {}): RunFacts {
  const { trace } = run;
  const steps = readRunSteps(run, options.masterKey);
  const { reads } = steps;

  const byType: Record<string, number> = {};
  const custom = new Map<string, number>();
  const reasons: Record<string, number> = {};
  let encrypted = 0;
  let decrypted = 0;
  for (const read of reads) {
    byType[read.event.type] = (byType[read.event.type] ?? 0) + 1;
    if (read.event.type === 'custom') {
      const name = str(read.payload, 'name') ?? '(unnamed)';
      custom.set(name, (custom.get(name) ?? 0) + 1);
    }
    if (read.reason) reasons[read.reason] = (reasons[read.reason] ?? 0) + 1;
    if (read.event.payloadEncrypted) encrypted++;
    if (read.access === 'decrypted') decrypted++;
  }
  const customNames = [...custom].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));

  const retries = findRetries(steps);
  const failures = collectFailures(steps, retries.recovered, CHAINS_LISTED);
  const loops = findLoops(steps);
  const dominant = findDominant(trace, steps);
  const diagnosis = diagnose(trace, steps, { failures, retries, loops, dominant });
  const { primary: _primary, ...failureLists } = failures;

  // the three longest, in one pass (a sort of 20,000 steps for three of them costs more)
  const longest: ReadEvent[] = [];
  for (const read of reads) {
    const ms = read.event.durationMs;
    if (typeof ms !== 'number') continue;
    const at = longest.findIndex((r) => (r.event.durationMs ?? 0) < ms);
    if (at >= 0) longest.splice(at, 0, read);
    else if (longest.length < 3) longest.push(read);
    if (longest.length > 3) longest.pop();
  }
  const slowest = longest.map(stepOf);

  return {
    traceId: trace.id,
    status: trace.status,
    diagnosis,
    inputSummary: trace.inputSummary,
    outputSummary: trace.outputSummary ?? null,
    errorMessage: trace.errorMessage ?? null,
    startedAt: trace.startedAt,
    endedAt: trace.endedAt ?? null,
    durationMs: trace.durationMs ?? null,
    tags: trace.tags,
    events: {
      reported: trace.eventCount,
      analysed: reads.length,
      omitted: run.omittedEvents,
      byType,
      custom: Object.fromEntries(customNames.slice(0, LISTED)),
      moreCustomNames: Math.max(0, customNames.length - LISTED),
    },
    failures: failureLists,
    retries: retries.retries.slice(0, LISTED),
    moreRetries: Math.max(0, retries.retries.length - LISTED),
    loops: loops.slice(0, LISTED),
    moreLoops: Math.max(0, loops.length - LISTED),
    dominant,
    slowest,
    ...collectTools(reads, LISTED),
    ...collectSpend(trace, reads, LISTED),
    toolsListed: trace.toolsCalled.slice(0, LISTED),
    moreToolsListed: Math.max(0, trace.toolsCalled.length - LISTED),
    encryption: {
      encrypted,
      decrypted,
      unreadable: encrypted - decrypted,
      keyGiven: options.masterKey !== undefined,
      reasons,
    },
  };
}
