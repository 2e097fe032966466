import type { TraceAnalysis } from '@flightlog/protocol';
import type { LatestAnalysisLookup } from '../store/analysis-store.js';
import type { Store } from '../store/open-store.js';
import { isoOrNullFromRow } from '../store/row-dates.js';

export type AnalysisLookup =
  | { kind: 'analysis'; analysis: TraceAnalysis }
  /** No such trace, or the user has no role on its agent. */
  | { kind: 'not-found' }
  /** A trace the user may see that was never completed or errored, so never queued. */
  | { kind: 'not-finished'; traceStatus: string };

/** The analysis of a trace's latest finalisation, when the user has a role on its agent. */
export async function readAnalysis(
  store: Store,
  userId: string,
  traceId: string,
): Promise<AnalysisLookup> {
  return toAnalysisLookup(await store.analysis.latestForMember(userId, traceId));
}

/** What a reader is told of a trace's latest analysis job, as the store found it. */
export function toAnalysisLookup(found: LatestAnalysisLookup): AnalysisLookup {
  if (found.kind === 'invisible') return { kind: 'not-found' };
  if (found.kind === 'never-queued')
    return { kind: 'not-finished', traceStatus: found.traceStatus };
  const { job } = found;
  // Running is still pending to a reader. A superseded job is never the latest (the job that
  // superseded it is newer), so it is reported as what it is for a reader: not done.
  const status =
    job.state === 'done'
      ? 'done'
      : job.state === 'pending' || job.state === 'running'
        ? 'pending'
        : 'failed';
  const ended = status !== 'pending';
  return {
    kind: 'analysis',
    analysis: {
      status,
      autopsy: status === 'done' ? job.autopsy : null,
      analyzer: status === 'done' ? job.analyzer : null,
      createdAt: job.createdAt.toISOString(),
      startedAt: isoOrNullFromRow(job.startedAt),
      finishedAt: ended ? isoOrNullFromRow(job.finishedAt) : null,
      durationMs: ended && job.durationMs !== null ? Math.max(0, job.durationMs) : null,
      attempts: job.attempts,
      ...(status !== 'done' && job.lastError !== null ? { error: job.lastError } : {}),
      ...(status === 'done' && job.fallbackReason !== null
        ? { fallbackReason: job.fallbackReason }
        : {}),
    },
  };
}
