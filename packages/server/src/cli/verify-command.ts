import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import {
  checkTraceHash,
  type AnchoredRoot,
  type Event,
  type Trace,
  type TraceHashCheck,
} from '@flightlog/protocol';
import {
  checkRunAnchor,
  type AnchorCheck,
  type AnchorStep,
} from '../anchoring/anchor-verification.js';
import type { AnchorReader } from '../anchoring/solana-anchor-reader.js';

/*
 * `flightlog verify FILE`: checks runs against their fingerprints (`traceHash`) from exported data
 * alone, offline — an export (NDJSON, one `{trace, events}` a line, as `flightlog export` and the
 * export API write it) or one run as the read API answers it (`{trace, events}`, any layout) —
 * then an anchored run's audit path to its tree's root, and with an RPC the memo of the
 * transaction that put that root on chain.
 */

/** One run as the read API answers it is read whole: at most this large. */
const MAX_SINGLE_RUN_BYTES = 256 * 1024 * 1024;

/** What was found for one run (or one line that is not a run). */
export type RunVerdict =
  /** The data gives its traceHash; the run is not anchored (yet). */
  | { kind: 'verified'; traceId: string; traceHash: string }
  /** …and its audit path leads to a root; no RPC was given to check the memo. */
  | {
      kind: 'path-verified';
      traceId: string;
      traceHash: string;
      anchored: AnchoredRoot;
      leafIndex: number;
    }
  /** …and that root is the one the transaction at `anchorSignature` anchors. */
  | ({ traceId: string; traceHash: string } & Extract<AnchorCheck, { kind: 'anchored' }>)
  | { kind: 'not-fingerprinted'; traceId: string; status: string }
  | {
      kind: 'failed';
      traceId: string | null;
      line: number;
      /** Which link of the chain broke: the data, the fingerprint, or one past it. */
      step: 'data' | 'traceHash' | AnchorStep;
      reason: string;
    };

export interface VerifyReport {
  verdicts: RunVerdict[];
  /** Runs whose data gives their traceHash (anchored or not). */
  verified: number;
  /** Of those, runs whose anchor was checked too: on chain, or offline as far as the root. */
  anchored: number;
  notFingerprinted: number;
  failed: number;
}

/** How far past the fingerprint to check: with a reader, the transaction on chain. */
export interface VerifyOptions {
  chain?: { reader: AnchorReader; signer?: string };
}

/** The file it cannot read as runs (exit 2). */
export class VerifyUsageError extends Error {
  override name = 'VerifyUsageError';
}

interface RunRecord {
  trace: Trace;
  events: Event[];
}

function runOf(value: unknown): RunRecord | string {
  if (typeof value !== 'object' || value === null) return 'it is not a JSON object';
  const { trace, events } = value as { trace?: unknown; events?: unknown };
  if (typeof trace !== 'object' || trace === null) return 'it has no "trace" object';
  if (typeof (trace as { id?: unknown }).id !== 'string') return 'its trace has no id';
  if (!Array.isArray(events)) return 'it has no "events" array';
  for (const [i, event] of events.entries())
    if (typeof event !== 'object' || event === null || Array.isArray(event))
      return `its event #${i} is not an object`;
  return { trace: trace as Trace, events: events as Event[] };
}

/** Why a check failed, in words that say which step failed. */
function reasonOf(check: Exclude<TraceHashCheck, { kind: 'verified' | 'no-fingerprint' }>): string {
  switch (check.kind) {
    case 'foreign-event':
      return `event ${check.eventId} (#${check.index}) belongs to another run`;
    case 'out-of-order':
      return (
        `event ${check.eventId} (#${check.index}) is out of the run's order (sequence, then ` +
        'id): the events were reordered'
      );
    case 'mismatch':
      return (
        `the run's data does not give its traceHash: a field or an event was changed, added or ` +
        `left out (traceHash ${check.traceHash}, the data gives ${check.computed})`
      );
  }
}

/** The verdict on one run read from `line` of the file (1 for a whole-file run). */
export async function verifyRun(
  value: unknown,
  line: number,
  options: VerifyOptions = {},
): Promise<RunVerdict> {
  const run = runOf(value);
  if (typeof run === 'string')
    return { kind: 'failed', traceId: null, line, step: 'data', reason: `not a run: ${run}` };
  const traceId = run.trace.id;
  let check: TraceHashCheck;
  try {
    check = checkTraceHash(run.trace, run.events);
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    return {
      kind: 'failed',
      traceId,
      line,
      step: 'data',
      reason: `its data cannot be hashed: ${why}`,
    };
  }
  if (check.kind === 'no-fingerprint')
    return { kind: 'not-fingerprinted', traceId, status: String(run.trace.status) };
  if (check.kind !== 'verified')
    return { kind: 'failed', traceId, line, step: 'traceHash', reason: reasonOf(check) };
  const traceHash = check.traceHash;
  const anchor = await checkRunAnchor(run.trace, options.chain);
  switch (anchor.kind) {
    case 'not-anchored':
      return { kind: 'verified', traceId, traceHash };
    case 'path-only':
      return {
        kind: 'path-verified',
        traceId,
        traceHash,
        anchored: anchor.anchored,
        leafIndex: anchor.leafIndex,
      };
    case 'anchored':
      return { ...anchor, traceId, traceHash };
    case 'failed':
      return { kind: 'failed', traceId, line, step: anchor.step, reason: anchor.reason };
  }
}

function tally(verdicts: RunVerdict[]): VerifyReport {
  const count = (...kinds: RunVerdict['kind'][]) =>
    verdicts.filter((v) => kinds.includes(v.kind)).length;
  return {
    verdicts,
    verified: count('verified', 'path-verified', 'anchored'),
    anchored: count('path-verified', 'anchored'),
    notFingerprinted: count('not-fingerprinted'),
    failed: count('failed'),
  };
}

/**
 * Verifies every run of `path`, calling `onVerdict` as each is checked (an export is read line
 * by line: any size).
 */
export async function verifyFile(
  path: string,
  onVerdict: (verdict: RunVerdict) => void = () => {},
  options: VerifyOptions = {},
): Promise<VerifyReport> {
  let size: number;
  try {
    size = (await stat(path)).size;
  } catch {
    throw new VerifyUsageError(`cannot read ${path}`);
  }
  const verdicts: RunVerdict[] = [];
  const add = (verdict: RunVerdict) => {
    verdicts.push(verdict);
    onVerdict(verdict);
  };
  // An export's first line is a whole run; a pretty-printed read-API answer's is not JSON.
  if (!(await firstLineIsJson(path))) {
    if (size > MAX_SINGLE_RUN_BYTES)
      throw new VerifyUsageError(`${path} is neither NDJSON nor one run of at most 256 MiB`);
    let whole: unknown;
    try {
      whole = JSON.parse(await readFile(path, 'utf8'));
    } catch {
      throw new VerifyUsageError(`${path} is neither NDJSON (one run a line) nor one JSON run`);
    }
    add(await verifyRun(whole, 1, options));
    return tally(verdicts);
  }
  const lines = createInterface({ input: createReadStream(path), crlfDelay: Infinity });
  let n = 0;
  for await (const line of lines) {
    n++;
    if (line.trim() === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      add({
        kind: 'failed',
        traceId: null,
        line: n,
        step: 'data',
        reason: 'not a run: it is not JSON',
      });
      continue;
    }
    add(await verifyRun(value, n, options));
  }
  if (verdicts.length === 0) throw new VerifyUsageError(`${path} holds no run`);
  return tally(verdicts);
}

async function firstLineIsJson(path: string): Promise<boolean> {
  const lines = createInterface({ input: createReadStream(path), crlfDelay: Infinity });
  try {
    for await (const line of lines) {
      if (line.trim() === '') continue;
      try {
        JSON.parse(line);
        return true;
      } catch {
        return false;
      }
    }
    return true; // empty: reported as holding no run
  } finally {
    lines.close();
  }
}

/** One line of the command's output for a verdict. */
export function verdictLine(verdict: RunVerdict): string {
  switch (verdict.kind) {
    case 'verified':
      return `verified       ${verdict.traceId} ${verdict.traceHash} (not anchored)`;
    case 'path-verified':
      return (
        `verified       ${verdict.traceId} ${verdict.traceHash}, leaf ${verdict.leafIndex} of ` +
        `${verdict.anchored.size} under root ${verdict.anchored.root} (pass --rpc to check the ` +
        'transaction)'
      );
    case 'anchored':
      return (
        `anchored       ${verdict.traceId} ${verdict.traceHash}, leaf ${verdict.leafIndex} of ` +
        `${verdict.anchored.size} under root ${verdict.anchored.root}, the memo of ` +
        `${verdict.signature} at slot ${verdict.slot} signed by ${verdict.signer}` +
        // anyone can anchor a root: only the operator's key makes it the operator's
        (verdict.signerChecked ? '' : ' (signer not checked: pass --signer with the anchoring key)')
      );
    case 'not-fingerprinted':
      return `no fingerprint ${verdict.traceId} (status ${verdict.status}: a run gets its traceHash once it finished)`;
    case 'failed':
      // the step that broke, unless the line is no run at all
      return `FAILED         ${verdict.traceId ?? `line ${verdict.line}`}${verdict.step === 'data' ? '' : ` (${verdict.step})`}: ${verdict.reason}`;
  }
}
