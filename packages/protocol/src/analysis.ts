import { Type, type Static } from '@sinclair/typebox';
import { Count, IsoDateTime, Milliseconds, Nullable, StringEnum } from './primitives.js';

/** `pending` covers a job waiting, running, or waiting for a retry. */
export const ANALYSIS_STATUSES = ['pending', 'done', 'failed'] as const;
export type AnalysisStatus = (typeof ANALYSIS_STATUSES)[number];

/**
 * Body of `GET /v1/traces/:id/analysis`: the analysis of the trace's latest finalisation
 * (completed or errored).
 */
export const TraceAnalysisSchema = Type.Object(
  {
    status: StringEnum(ANALYSIS_STATUSES),
    /** Markdown; null until done. */
    autopsy: Nullable(Type.String()),
    /** Which analyzer wrote the autopsy: `heuristic`, or `llm:<model>`; null until done. */
    analyzer: Nullable(Type.String()),
    /** When the analysis was queued (the finalisation). */
    createdAt: IsoDateTime,
    /** Start of the latest attempt; null before the first. */
    startedAt: Nullable(IsoDateTime),
    /** When the job ended (done or failed); null before. */
    finishedAt: Nullable(IsoDateTime),
    /** finishedAt − startedAt of the attempt that ended the job. */
    durationMs: Nullable(Milliseconds),
    /** Attempts started so far. */
    attempts: Count,
    /** Why the last attempt failed: the final error of a failed job, or the one being retried. */
    error: Type.Optional(Type.String()),
    /** Set when the LLM analyzer was configured but the heuristic one wrote the autopsy: why. */
    fallbackReason: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);

export type TraceAnalysis = Static<typeof TraceAnalysisSchema>;
