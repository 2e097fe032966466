import {
  CompleteTraceBodySchema,
  ProblemSchema,
  TraceIdResponseSchema,
  TransportBatchPayloadSchema,
  type CompleteTraceBody,
} from '@flightlog/protocol';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { ApiKeyResolver } from '../auth/api-key-resolver.js';
import { FlightlogError, validationFailed } from '../errors/flightlog-error.js';
import { completeTrace } from '../ingest/complete-trace.js';
import { ingestBatch, type IngestContext } from '../ingest/ingest-batch.js';
import type { Metrics } from '../observability/metrics.js';
import { agentOf, requireApiKey } from './authentication.js';

export interface IngestRoutesOptions {
  ingest: IngestContext;
  apiKeys: ApiKeyResolver;
  metrics: Metrics;
}

const errors = {
  400: ProblemSchema,
  401: ProblemSchema,
  409: ProblemSchema,
  413: ProblemSchema,
  415: ProblemSchema,
  429: ProblemSchema,
  503: ProblemSchema,
};

const idConflict = (pointer: string) =>
  new FlightlogError('id-conflict', 'An id in this batch is already used by another trace.', {
    fieldErrors: [{ pointer, detail: 'is already in use' }],
  });

/** The agent-facing write API: batches and finalisation, authenticated by API key. */
export const ingestRoutes: FastifyPluginAsyncTypebox<IngestRoutesOptions> = async (
  app,
  options,
) => {
  const { ingest, metrics } = options;
  app.addHook(
    'onRequest',
    requireApiKey(options.apiKeys, () => metrics.apiKeyGuessesRefused.inc()),
  );

  app.post(
    '/v1/traces/batch',
    {
      // Event payloads are the agent's data: a tool output parsed from the web may hold a
      // `__proto__` key, and is stored as it came (json-body.ts).
      config: { jsonDataPaths: [['items', '*', 'events', '*', 'payload']] },
      schema: {
        summary: 'Write a batch of trace snapshots and events',
        headers: Type.Object({ authorization: Type.String() }),
        body: TransportBatchPayloadSchema,
        response: { 202: TraceIdResponseSchema, ...errors },
      },
    },
    async (request, reply) => {
      const outcome = await ingestBatch(ingest, agentOf(request).agentId, request.body);
      if (outcome.kind === 'invalid') throw validationFailed(outcome.errors);
      if (outcome.kind === 'id-conflict') throw idConflict(outcome.pointer);
      if (outcome.kind === 'busy')
        throw new FlightlogError(
          'too-many-requests',
          'Too many large batches of this agent are waiting to be written; send it again later.',
          { retryAfterSeconds: 1 },
        );
      metrics.batches.inc({ outcome: outcome.kind });
      if (outcome.kind === 'accepted') metrics.events.inc(outcome.eventCount);
      else reply.header('idempotent-replayed', 'true');
      if (outcome.verify) reply.header('flightlog-verify', outcome.verify);
      return reply.code(202).send({ traceId: outcome.traceId });
    },
  );

  app.post(
    '/v1/traces/:id/complete',
    {
      schema: {
        summary: 'Finalise a trace',
        params: Type.Object({ id: Type.String({ maxLength: 1024 }) }),
        body: CompleteTraceBodySchema,
        response: { 200: TraceIdResponseSchema, 404: ProblemSchema, ...errors },
      },
      // No body means "completed, now": validate it as an empty object.
      preValidation: async (request) => {
        if (request.body === undefined || request.body === null) request.body = {};
      },
    },
    async (request) => {
      const outcome = await completeTrace(
        ingest,
        agentOf(request).agentId,
        request.params.id,
        request.body as CompleteTraceBody,
      );
      if (outcome.kind === 'not-found')
        throw new FlightlogError('not-found', 'No trace with this id belongs to this agent.');
      if (outcome.kind === 'invalid') throw validationFailed(outcome.errors);
      return { traceId: outcome.trace.id };
    },
  );
};
