import { FlightlogError } from '../errors/flightlog-error.js';
import { pooledUlids } from '../ids/pooled-ulids.js';
import { exportBatch, type ExportBatch } from '../otlp/export-batch.js';
import type { ExportTraceServiceRequest } from '../otlp/otlp-json.js';
import { mapExport, type SpanRejection } from '../otlp/span-mapping.js';
import type { TraceStore, VerifyOutcome } from '../store/trace-store.js';
import { ingestBatch, type IngestContext } from './ingest-batch.js';

/**
 * An OTLP trace export, stored as the Flightlog batch it amounts to, through the batch path
 * itself (ingestBatch): the same statement, so the same ownership checks, the same
 * never-older snapshot rule, the same analysis queueing when a run ends, the same live messages.
 * What the batch path cannot know by itself, an export's place among the exports of its traces,
 * is read under a lock per trace (TraceStore.withTraceLocks) in the transaction that writes it:
 * concurrent exports of one trace, to any instance, take turns, so none loses or repeats another's
 * spans or totals. The first export of a run needs no read: it is written as new, in one
 * statement that takes the same locks and writes nothing if a trace exists (see writeFirst).
 * The mapping is in ../otlp (span-mapping.ts, export-batch.ts).
 */

export type OtlpOutcome =
  | {
      kind: 'stored';
      /** Spans stored as new events. */
      accepted: number;
      /** Spans stored before (exporter retries), skipped. */
      duplicates: number;
      /** Spans refused one by one, the number the OTLP answer reports. */
      rejected: number;
      /** Why they were refused, for that answer's message; null when none was. */
      message: string | null;
      /** What became of the verify token sent with the export; null when none was (or nothing
       * was written: the token is looked at only by a write). */
      verify: VerifyOutcome | null;
    }
  /** Too many large exports of this agent wait for their turn already: send it again later. */
  | { kind: 'busy' };

/** Exports of at least this many spans are written in their agent's turn (see ingest-batch.ts). */
const LARGE_EXPORT_SPANS = 1_000;

/** How often an export is read and written again when another write took one of its ids. */
const MAX_ATTEMPTS = 3;

const batchIds = pooledUlids();

const REASONS: Record<SpanRejection, string> = {
  'invalid-trace-id': 'a trace id that is not 32 hex digits (or is all zeros)',
  'invalid-span-id': 'a span id that is not 16 hex digits (or is all zeros)',
  'invalid-parent-span-id': 'a parent span id that is not 16 hex digits',
  'invalid-start-time': 'no start time',
  'trace-id-in-use': 'a trace id already used by another trace',
  'span-id-in-use': 'a span id already used by another event',
  'too-many-spans': 'more than 10,000 new spans of one trace in one export',
};

function rejectionMessage(rejected: ReadonlyMap<SpanRejection, number>): string | null {
  const parts = [...rejected].map(([reason, n]) => `${n} with ${REASONS[reason]}`);
  if (parts.length === 0) return null;
  const total = [...rejected.values()].reduce((a, b) => a + b, 0);
  return `${total} span${total === 1 ? ' was' : 's were'} refused: ${parts.join('; ')}.`;
}

/** An id of the export was taken by another write between the read and the write. */
class RaceLost extends Error {}

/** What one write of an export did, published and queued by the caller once it committed. */
interface ExportWrite {
  batch: ExportBatch;
  published: string[][];
  analysisQueued: boolean;
  verify: VerifyOutcome | null;
}

/**
 * Writes `batch` as one Flightlog batch through `traces` (a store, or one transaction of it);
 * what it publishes and queues is held back for the caller. Null when the store refused it for
 * an id (taken by another write, or, with `newTraces`, a trace that exists).
 */
async function writeExportBatch(
  context: IngestContext,
  traces: TraceStore,
  agentId: string,
  batch: ExportBatch,
  options: { verifyToken?: string; newTraces?: boolean },
): Promise<ExportWrite | null> {
  const write: ExportWrite = { batch, published: [], analysisQueued: false, verify: null };
  if (batch.items.length === 0) return write;
  const outcome = await ingestBatch(
    {
      traces,
      analysisGraceMs: context.analysisGraceMs,
      live: { publish: (_agent, documents) => write.published.push(documents) },
      onAnalysisQueued: () => (write.analysisQueued = true),
    },
    agentId,
    {
      batchId: batchIds(),
      items: batch.items,
      // the key decides the agent: a token is matched against that agent alone
      ...(options.verifyToken === undefined ? {} : { verifyToken: options.verifyToken, agentId }),
    },
    options.newTraces ? { newTraces: true } : {},
  );
  if (outcome.kind === 'id-conflict') return null;
  if (outcome.kind !== 'accepted')
    throw new Error(`an OTLP export mapped to a batch the store answered ${outcome.kind}`);
  write.verify = outcome.verify;
  return write;
}

/** Stores an export for the agent its API key belongs to. */
export async function ingestOtlpExport(
  context: IngestContext,
  agentId: string,
  request: ExportTraceServiceRequest,
  options: { verifyToken?: string } = {},
): Promise<OtlpOutcome> {
  const mapped = mapExport(request);
  const traceIds = [...new Set(mapped.spans.map((span) => span.traceId))];
  const eventIds = mapped.spans.map((span) => span.event.id);

  const writeLocked = () =>
    context.traces.withTraceLocks(traceIds, async (traces) => {
      const stored = await traces.otlpState(traceIds, eventIds);
      const batch = exportBatch(agentId, mapped.spans, stored.traces, stored.events);
      const write = await writeExportBatch(context, traces, agentId, batch, options);
      // the next attempt reads the id that was taken, and refuses that span alone
      if (!write) throw new RaceLost();
      return write;
    });

  // The first export of a run (its traces not written by this process lately) is written as
  // new: one statement like a batch's, without the transaction that locks and reads. If one of
  // its traces exists after all (another instance, an exporter's retry) or one of its ids is
  // taken, that statement writes nothing and the export is written the locked way.
  const recent = context.recentOtlpTraces;
  const writeFirst = async () => {
    if (options.verifyToken === undefined && !recent?.hasAny(traceIds)) {
      const batch = exportBatch(agentId, mapped.spans, new Map(), new Map());
      if (batch.rejected.size === 0) {
        const write = await writeExportBatch(context, context.traces, agentId, batch, {
          newTraces: true,
        });
        if (write) return write;
      }
    }
    return writeLocked();
  };
  const turns = context.traceTurns;
  const inTurn = (work: () => Promise<ExportWrite>) => (turns ? turns.run(traceIds, work) : work());

  const write = async () => {
    for (let attempt = 1; ; attempt++) {
      try {
        const written = await inTurn(attempt === 1 ? writeFirst : writeLocked);
        recent?.add(traceIds);
        return written;
      } catch (error) {
        if (!(error instanceof RaceLost)) throw error;
        if (attempt < MAX_ATTEMPTS) continue;
        throw new FlightlogError(
          'store-unavailable',
          'Other writes kept taking ids of this export; send it again.',
          { retryAfterSeconds: 1 },
        );
      }
    }
  };

  const large = context.largeWrites;
  const result =
    traceIds.length === 0
      ? undefined
      : large && mapped.spans.length >= LARGE_EXPORT_SPANS
        ? await large.turns.inTurn(agentId, write)
        : await write();
  if (traceIds.length > 0 && result === undefined) return { kind: 'busy' };

  const rejected = new Map(mapped.rejected);
  for (const [reason, n] of result?.batch.rejected ?? [])
    rejected.set(reason, (rejected.get(reason) ?? 0) + n);
  if (result) {
    for (const documents of result.published) context.live.publish(agentId, documents);
    if (result.analysisQueued) context.onAnalysisQueued?.();
  }
  return {
    kind: 'stored',
    accepted: result?.batch.accepted ?? 0,
    duplicates: result?.batch.duplicates ?? 0,
    rejected: [...rejected.values()].reduce((a, b) => a + b, 0),
    message: rejectionMessage(rejected),
    verify: result?.verify ?? null,
  };
}
