import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { checkTraceHash, type Event, type Trace, type TraceHashCheck } from '@flightlog/protocol';

/*
 * `flightlog verify FILE`: checks runs against their fingerprints (`traceHash`) from exported data
 * alone, offline — an export (NDJSON, one `{trace, events}` a line, as `flightlog export` and the
 * export API write it) or one run as the read API answers it (`{trace, events}`, any layout).
 */

/** One run as the read API answers it is read whole: at most this large. */
const MAX_SINGLE_RUN_BYTES = 256 * 1024 * 1024;

/** What was found for one run (or one line that is not a run). */
export type RunVerdict =
  | { kind: 'verified'; traceId: string; traceHash: string }
  | { kind: 'not-fingerprinted'; traceId: string; status: string }
  | { kind: 'failed'; traceId: string | null; line: number; reason: string };

export interface VerifyReport {
  verdicts: RunVerdict[];
  verified: number;
  notFingerprinted: number;
  failed: number;
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
export function verifyRun(value: unknown, line: number): RunVerdict {
  const run = runOf(value);
  if (typeof run === 'string')
    return { kind: 'failed', traceId: null, line, reason: `not a run: ${run}` };
  const traceId = run.trace.id;
  let check: TraceHashCheck;
  try {
    check = checkTraceHash(run.trace, run.events);
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    return { kind: 'failed', traceId, line, reason: `its data cannot be hashed: ${why}` };
  }
  if (check.kind === 'verified') return { kind: 'verified', traceId, traceHash: check.traceHash };
  if (check.kind === 'no-fingerprint')
    return { kind: 'not-fingerprinted', traceId, status: String(run.trace.status) };
  return { kind: 'failed', traceId, line, reason: reasonOf(check) };
}

function tally(verdicts: RunVerdict[]): VerifyReport {
  const count = (kind: RunVerdict['kind']) => verdicts.filter((v) => v.kind === kind).length;
  return {
    verdicts,
    verified: count('verified'),
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
    add(verifyRun(whole, 1));
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
      add({ kind: 'failed', traceId: null, line: n, reason: 'not a run: it is not JSON' });
      continue;
    }
    add(verifyRun(value, n));
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
      return `verified       ${verdict.traceId} ${verdict.traceHash}`;
    case 'not-fingerprinted':
      return `no fingerprint ${verdict.traceId} (status ${verdict.status}: a run gets its traceHash once it finished)`;
    case 'failed':
      return `FAILED         ${verdict.traceId ?? `line ${verdict.line}`}: ${verdict.reason}`;
  }
}
