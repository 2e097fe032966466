import { ProblemSchema } from '@flightlog/protocol';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { ApiKeyResolver } from '../auth/api-key-resolver.js';
import { FlightlogError } from '../errors/flightlog-error.js';
import type { IngestContext } from '../ingest/ingest-batch.js';
import { ingestOtlpExport } from '../ingest/ingest-otlp.js';
import type { Metrics } from '../observability/metrics.js';
import {
  ExportTraceServiceRequestSchema,
  ExportTraceServiceResponseSchema,
  exportResponseJson,
  type ExportTraceServiceRequest,
  type ExportTraceServiceResponse,
} from '../otlp/otlp-json.js';
import { encodeExportResponse } from '../otlp/otlp-protobuf.js';
import { agentOf, requireApiKey } from './authentication.js';
import { registerOtlpProtobufBody, type BodyLimits, type LargeBodies } from './json-body.js';

export interface OtlpRoutesOptions {
  ingest: IngestContext;
  apiKeys: ApiKeyResolver;
  metrics: Metrics;
  limits: BodyLimits;
  largeBodies: LargeBodies | undefined;
}

/** Where standard exporters send traces when OTEL_EXPORTER_OTLP_ENDPOINT is `…/v1/otlp`. */
export const OTLP_TRACES_PATH = '/v1/otlp/v1/traces';

const PROTOBUF = 'application/x-protobuf';

/**
 * OpenTelemetry's OTLP/HTTP trace export, authenticated by the agent API key like the batch
 * endpoint and bound by the same limits (body size, gzip, key guessing, timeouts, fair turns);
 * refusals are the same problem+json answers. A success is an ExportTraceServiceResponse in the
 * request's encoding, with `partialSuccess` when spans were refused one by one. An agent's verify
 * token may come along as a `Flightlog-Verify-Token` header (OTEL_EXPORTER_OTLP_HEADERS): it
 * verifies the agent as the token in a batch does, answered in `Flightlog-Verify`.
 */
export const otlpRoutes: FastifyPluginAsyncTypebox<OtlpRoutesOptions> = async (app, options) => {
  const { ingest, metrics } = options;
  app.addHook(
    'onRequest',
    requireApiKey(options.apiKeys, () => metrics.apiKeyGuessesRefused.inc()),
  );
  registerOtlpProtobufBody(app, options.limits, options.largeBodies);

  app.post(
    OTLP_TRACES_PATH,
    {
      schema: {
        summary: 'Export OpenTelemetry traces (OTLP/HTTP, protobuf or JSON)',
        consumes: [PROTOBUF, 'application/json'],
        produces: [PROTOBUF, 'application/json'],
        headers: Type.Object({ authorization: Type.String() }),
        body: ExportTraceServiceRequestSchema,
        response: {
          200: ExportTraceServiceResponseSchema,
          400: ProblemSchema,
          401: ProblemSchema,
          413: ProblemSchema,
          415: ProblemSchema,
          429: ProblemSchema,
          503: ProblemSchema,
        },
      },
      // an empty body is an export of nothing (protobuf encodes an empty message as no bytes)
      preValidation: async (request) => {
        if (request.body === undefined || request.body === null) request.body = {};
      },
    },
    async (request, reply) => {
      const verifyToken = request.headers['flightlog-verify-token'];
      const outcome = await ingestOtlpExport(
        ingest,
        agentOf(request).agentId,
        request.body as ExportTraceServiceRequest,
        typeof verifyToken === 'string' && verifyToken !== '' ? { verifyToken } : {},
      );
      if (outcome.kind === 'busy')
        throw new FlightlogError(
          'too-many-requests',
          'Too many large exports of this agent are waiting to be written; send it again later.',
          { retryAfterSeconds: 1 },
        );
      metrics.otlpSpans.inc({ outcome: 'accepted' }, outcome.accepted);
      metrics.otlpSpans.inc({ outcome: 'duplicate' }, outcome.duplicates);
      metrics.otlpSpans.inc({ outcome: 'rejected' }, outcome.rejected);
      metrics.events.inc(outcome.accepted);
      if (outcome.verify) reply.header('flightlog-verify', outcome.verify);
      const response: ExportTraceServiceResponse =
        outcome.rejected > 0
          ? {
              partialSuccess: {
                rejectedSpans: outcome.rejected,
                errorMessage: outcome.message ?? '',
              },
            }
          : {};
      const protobuf = (request.headers['content-type'] ?? '').toLowerCase().startsWith(PROTOBUF);
      // sent as encoded here (Fastify sends bytes and text as they are): the schema above
      // documents the JSON form
      if (protobuf)
        return reply
          .code(200)
          .type(PROTOBUF)
          .send(Buffer.from(encodeExportResponse(response)) as never);
      return reply
        .code(200)
        .type('application/json')
        .send(exportResponseJson(response) as never);
    },
  );
};
