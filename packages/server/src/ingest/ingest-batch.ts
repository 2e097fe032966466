import type { FieldError, TransportBatchPayload } from '@flightlog/protocol';
import { hashSecret } from '../auth/secrets.js';
import { itemDocument, jsonBytes, toItemJson } from '../store/batch-json.js';
import type { BatchWrite, TraceStore, VerifyOutcome } from '../store/trace-store.js';
import type { LivePublisher } from '../live/publish.js';
import type { AgentWriteTurns } from './agent-write-turns.js';
import type { KeyedTurns } from './keyed-turns.js';
import type { RecentIds } from './recent-ids.js';
import { payloadFlaw } from './payload-shape.js';

/** Batches of at least this many events are looked through for id conflicts first. */
const CONFLICT_LOOK_EVENTS = 1_000;

/** Payloads may nest this deep; deeper ones are refused with a 400. */
export const MAX_PAYLOAD_DEPTH = 64;

export interface IngestContext {
  traces: TraceStore;
  analysisGraceMs: number;
  /** Where stored items are published for live streams (after the commit, not awaited). */
  live: Pick<LivePublisher, 'publish'>;
  /** Told after a commit that queued an analysis (wakes a worker in this process). */
  onAnalysisQueued?: () => void;
  /** Batches of at least `minBytes` of JSON are written in their agent's turn. */
  largeWrites?: { turns: AgentWriteTurns; minBytes: number };
  /** OTLP exports of one trace take turns in this process (see keyed-turns.ts). */
  traceTurns?: KeyedTurns;
  /** Traces this process wrote OTLP exports of lately: their next export reads them first. */
  recentOtlpTraces?: RecentIds;
}

export type IngestOutcome =
  | {
      kind: 'accepted' | 'duplicate';
      traceId: string;
      /** What became of a verify token in the body; null when none was sent. */
      verify: VerifyOutcome | null;
      eventCount: number;
    }
  | { kind: 'invalid'; errors: FieldError[] }
  | { kind: 'id-conflict'; pointer: string }
  /** Too many large batches of this agent wait for their turn already: send it again later. */
  | { kind: 'busy' };

/** Rules of a batch that a JSON schema cannot say. */
export function checkBatch(payload: TransportBatchPayload): FieldError[] {
  const errors: FieldError[] = [];
  const seen = new Set<string>();
  payload.items.forEach((item, i) => {
    item.events.forEach((event, j) => {
      const at = `/items/${i}/events/${j}`;
      if (event.traceId !== item.trace.id)
        errors.push({
          pointer: `${at}/traceId`,
          detail: 'must equal the id of the trace in the same item',
        });
      if (seen.has(event.id))
        errors.push({ pointer: `${at}/id`, detail: 'appears more than once in this batch' });
      seen.add(event.id);
      const flaw = payloadFlaw(event.payload, MAX_PAYLOAD_DEPTH);
      if (flaw)
        errors.push({
          pointer: `${at}/payload`,
          detail:
            flaw === 'too-deep'
              ? `must not nest deeper than ${MAX_PAYLOAD_DEPTH} levels`
              : 'must not hold a number too large for a double (it would be stored as null)',
        });
    });
  });
  return errors;
}

/**
 * Stores one batch for the agent its API key belongs to. The agent id in the body never
 * decides ownership: it only has to match a verify token.
 */
export async function ingestBatch(
  context: IngestContext,
  agentId: string,
  payload: TransportBatchPayload,
  options: Pick<BatchWrite, 'newTraces'> = {},
): Promise<IngestOutcome> {
  const errors = checkBatch(payload);
  if (errors.length > 0) return { kind: 'invalid', errors };

  const items = payload.items.map((item) => ({
    trace: { ...item.trace, agentId },
    events: item.events,
  }));
  const eventCount = items.reduce((n, item) => n + item.events.length, 0);
  // A batch of many events is first looked through for ids of others in short statements (see
  // findIdConflict), before it is serialised: a batch of re-sent ids never costs its long
  // statement, and other agents' statements run in between.
  if (eventCount >= CONFLICT_LOOK_EVENTS) {
    const pointer = await context.traces.findIdConflict(agentId, payload.batchId, items);
    if (pointer !== null) return { kind: 'id-conflict', pointer };
  }
  // serialised once, for the statement and the live stream alike
  const json = items.map(toItemJson);
  const bytes = jsonBytes(json);
  const token = payload.verifyToken;
  const claimed = payload.agentId;
  const write = () =>
    context.traces.writeBatch({
      agentId,
      batchId: payload.batchId,
      items,
      json,
      jsonBytes: bytes,
      ...(token !== undefined && claimed !== undefined
        ? { verify: { tokenHash: hashSecret(token), claimedAgentId: claimed } }
        : {}),
      analysisGraceMs: context.analysisGraceMs,
      ...(options.newTraces ? { newTraces: true } : {}),
    });
  const large = context.largeWrites;
  const outcome =
    large && bytes >= large.minBytes ? await large.turns.inTurn(agentId, write) : await write();
  if (outcome === undefined) return { kind: 'busy' };
  if (outcome.kind === 'id-conflict') return outcome;
  if (outcome.kind === 'accepted') {
    if (outcome.analysisQueued) context.onAnalysisQueued?.();
    // items of deleted runs were not written: they are not shown either
    const dropped = new Set(outcome.droppedTraceIds);
    const shown =
      dropped.size === 0 ? json : json.filter((_, i) => !dropped.has(items[i]!.trace.id));
    context.live.publish(agentId, shown.map(itemDocument));
  }

  // A token without the agent id it belongs to cannot be matched, so it is ignored.
  const verify = token === undefined ? null : claimed === undefined ? 'ignored' : outcome.verify;
  return {
    kind: outcome.kind,
    traceId: outcome.traceId,
    verify,
    eventCount,
  };
}
