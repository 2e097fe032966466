import { openPayloadEnvelope, type Event } from '@flightlog/protocol';
import type { StoredRun } from '../analysis/analyzer.js';
import { bool, shorten, str, type Payload } from './payload-fields.js';
import type { Operation } from './step-operation.js';

/*
 * The steps of one run as every fact reads them: each event with its payload opened (when it
 * can be), its name as the autopsy writes it, and the run's shape (who is inside whom, who runs
 * beside whom). Built once per analysis; every fact module walks it.
 */

/** How an event's payload could be read. */
export type PayloadAccess = 'plain' | 'decrypted' | 'unreadable';

/** One step of the run, as the autopsy names it. */
export interface StepFact {
  sequence: number;
  eventId: string;
  type: string;
  /** e.g. `tool_call dex.getPrice`, `llm_call gpt-4o-mini`, `chain_tx delegateStake`. */
  label: string;
  status: string;
  durationMs: number | null;
  errorMessage: string | null;
  payload: PayloadAccess;
}

export interface ReadEvent {
  event: Event;
  payload: Payload | undefined;
  access: PayloadAccess;
  /** Why the payload could not be read (`no-key`, `authentication-failed`, ...). */
  reason: string | null;
  /** Position among the loaded events. */
  index: number;
  /** Whether the step failed (see stepFailed), decided once when read. */
  failed: boolean;
  /** What the step did, once computed (step-operation.ts); null when it cannot be compared. */
  operation?: Operation | null;
}

export interface RunSteps {
  reads: ReadEvent[];
  byId: Map<string, ReadEvent>;
  /** The loaded children of each event id, in order. */
  children: Map<string, ReadEvent[]>;
  /**
   * Steps that run side by side: the events under one parent, in order; top-level events under
   * the empty string, and events whose parent was not loaded under that parent's id.
   */
  lanes: Map<string, ReadEvent[]>;
}

function readPayload(event: Event, index: number, key: Buffer | undefined): ReadEvent {
  const read = (payload: Payload | undefined, access: PayloadAccess, reason: string | null) => {
    const r: ReadEvent = { event, payload, access, reason, index, failed: false };
    r.failed = failedStep(r);
    return r;
  };
  if (!event.payloadEncrypted) return read(event.payload, 'plain', null);
  if (!key) return read(undefined, 'unreadable', 'no-key');
  const opened = openPayloadEnvelope(event.payload, key);
  return opened.kind === 'opened'
    ? read(opened.payload, 'decrypted', null)
    : read(undefined, 'unreadable', opened.reason);
}

/** The run's events read once: payloads opened with `masterKey` (in memory, for this only). */
export function readRunSteps(run: StoredRun, masterKey: Buffer | undefined): RunSteps {
  const reads = run.events.map((event, index) => readPayload(event, index, masterKey));
  const byId = new Map<string, ReadEvent>();
  for (const read of reads) byId.set(read.event.id, read);
  const children = new Map<string, ReadEvent[]>();
  const lanes = new Map<string, ReadEvent[]>();
  const push = (map: Map<string, ReadEvent[]>, key: string, read: ReadEvent) => {
    const list = map.get(key);
    if (list) list.push(read);
    else map.set(key, [read]);
  };
  for (const read of reads) {
    const parent = read.event.parentEventId ?? null;
    if (parent !== null && byId.has(parent)) push(children, parent, read);
    push(lanes, parent ?? '', read);
  }
  return { reads, byId, children, lanes };
}

/** The tool an event called, for tool_call and mcp_call (`server/tool` for MCP). */
export function toolOf(read: ReadEvent): string | null {
  const { event, payload } = read;
  if (event.type === 'tool_call') return str(payload, 'name');
  if (event.type === 'mcp_call') {
    const server = str(payload, 'server');
    const tool = str(payload, 'tool') ?? str(payload, 'method');
    return server && tool ? `${server}/${tool}` : (tool ?? server);
  }
  return null;
}

/** What the step did, without its type: a tool, model, instruction, resource or name. */
export function subjectOf(read: ReadEvent): string | null {
  const { event, payload } = read;
  switch (event.type) {
    case 'llm_call':
      return str(payload, 'model');
    case 'tool_call':
    case 'mcp_call':
      return toolOf(read);
    case 'chain_tx':
      return str(payload, 'instruction') ?? str(payload, 'programId');
    case 'x402_payment':
      return str(payload, 'resource');
    case 'custom':
      return str(payload, 'name');
    default:
      return null;
  }
}

export function labelOf(read: ReadEvent): string {
  let detail = subjectOf(read);
  if (detail === null && read.access === 'unreadable') detail = '(encrypted)';
  return detail === null ? read.event.type : `${read.event.type} ${shorten(detail, 80)}`;
}

export function stepOf(read: ReadEvent): StepFact {
  const { event } = read;
  return {
    sequence: event.sequence,
    eventId: event.id,
    type: event.type,
    label: labelOf(read),
    status: event.status,
    durationMs: event.durationMs ?? null,
    errorMessage: event.errorMessage ?? null,
    payload: read.access,
  };
}

/**
 * Whether the step failed: its status says so, or what it reports does (a chain transaction
 * whose confirmation failed, an x402 payment that was not settled), whatever its status.
 */
export const stepFailed = (read: ReadEvent): boolean => read.failed;

function failedStep(read: ReadEvent): boolean {
  if (read.event.status === 'error') return true;
  if (read.event.type === 'chain_tx') return str(read.payload, 'confirmation') === 'failed';
  if (read.event.type === 'x402_payment') return bool(read.payload, 'settled') === false;
  return false;
}

/** A step that started and never ended: no end time and no duration. */
export function stepUnfinished(read: ReadEvent): boolean {
  return (read.event.endedAt ?? null) === null && (read.event.durationMs ?? null) === null;
}

/** Milliseconds since the epoch of the step's start (NaN never: 0 for an unreadable date). */
export function startMs(read: ReadEvent): number {
  const t = Date.parse(read.event.startedAt);
  return Number.isFinite(t) ? t : 0;
}

/**
 * Whether `parent` was still running when `child` started: a wrapper around it, rather than a
 * step that led to it and had ended before (agents use parentEventId for both). A parent whose
 * duration is unknown is taken to run around everything after its start.
 */
export function runsAround(parent: ReadEvent, child: ReadEvent): boolean {
  const duration = parent.event.durationMs;
  if (duration == null) return true;
  return startMs(parent) + duration > startMs(child);
}

/** The nearest ancestor that runs around `read` (its wrapper in time), if one was loaded. */
export function containerOf(read: ReadEvent, steps: RunSteps): ReadEvent | undefined {
  let parentId = read.event.parentEventId ?? null;
  for (let depth = 0; parentId !== null && depth < 64; depth++) {
    const parent = steps.byId.get(parentId);
    if (!parent || parent === read) return undefined;
    if (runsAround(parent, read)) return parent;
    parentId = parent.event.parentEventId ?? null;
  }
  return undefined;
}
