import type { CompleteTraceBody, FieldError, Trace } from '@flightlog/protocol';
import type { IngestContext } from './ingest-batch.js';

/** What a complete request came to, for its route to answer. */
export type CompleteTraceOutcome =
  | { kind: 'completed'; trace: Trace; analysisQueued: boolean }
  | { kind: 'not-found' }
  | { kind: 'invalid'; errors: FieldError[] };

/**
 * Finalises a trace of the caller's agent: status (default `completed`), end time (default now),
 * duration from start to end, summaries as given. A trace of another agent is "not found".
 */
export async function completeTrace(
  context: IngestContext,
  agentId: string,
  traceId: string,
  body: CompleteTraceBody,
): Promise<CompleteTraceOutcome> {
  const outcome = await context.traces.completeTrace(
    agentId,
    traceId,
    body,
    context.analysisGraceMs,
  );
  if (outcome.kind === 'completed') {
    if (outcome.analysisQueued) context.onAnalysisQueued?.();
    context.live.publish(agentId, [JSON.stringify({ trace: outcome.trace, events: [] })]);
  }
  if (outcome.kind === 'ends-before-start')
    return {
      kind: 'invalid',
      errors: [{ pointer: '/endedAt', detail: 'must not be before the trace startedAt' }],
    };
  return outcome;
}
