import {
  AgentListSchema,
  AgentStatsSchema,
  IsoDateTime,
  ProblemSchema,
  STATS_WINDOWS,
  StringEnum,
  TRACE_STATUSES,
  Text,
  TraceAnalysisSchema,
  TraceFingerprintsSchema,
  TraceListSchema,
} from '@flightlog/protocol';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { IdentityVerifier } from '../auth/identity.js';
import { FlightlogError, validationFailed } from '../errors/flightlog-error.js';
import { listAgents } from '../read/agent-list.js';
import { readAgentStats } from '../read/agent-stats.js';
import { readAnalysis } from '../read/analysis-reader.js';
import { readFingerprints } from '../read/fingerprint-reader.js';
import { listTraces, readTrace, type CurrentShareToken } from '../read/trace-reader.js';
import type { Store } from '../store/open-store.js';
import { EventPageQuerySchema, TracePageSchema } from './trace-page-schema.js';
import { requireUser, userOf } from './authentication.js';

export interface ReadRoutesOptions {
  store: Store;
  identity: IdentityVerifier;
  /** Shows a shared run's current link in `trace.shareToken`. */
  shareLinks?: CurrentShareToken;
}

const notFound = () =>
  new FlightlogError('not-found', 'No such trace, or you have no access to it.');

/** The dashboard's read API, authenticated by identity JWT; any role on the agent may read. */
export const readRoutes: FastifyPluginAsyncTypebox<ReadRoutesOptions> = async (
  app,
  { store, identity, shareLinks },
) => {
  app.addHook('onRequest', requireUser(identity));

  app.get(
    '/v1/traces/:id',
    {
      schema: {
        summary: 'A trace and one page of its events, ordered by sequence',
        params: Type.Object({ id: Type.String({ maxLength: 1024 }) }),
        querystring: EventPageQuerySchema,
        response: {
          200: TracePageSchema,
          400: ProblemSchema,
          401: ProblemSchema,
          404: ProblemSchema,
        },
      },
    },
    async (request) => {
      const outcome = await readTrace(
        store,
        userOf(request),
        request.params.id,
        request.query,
        shareLinks,
      );
      if (outcome.kind === 'invalid') throw validationFailed(outcome.errors);
      if (outcome.kind === 'not-found') throw notFound();
      const { kind: _kind, ...page } = outcome;
      return page;
    },
  );

  app.get(
    '/v1/traces/:id/analysis',
    {
      schema: {
        summary: "The autopsy of a trace's latest finalisation (completed or errored)",
        params: Type.Object({ id: Type.String({ maxLength: 1024 }) }),
        response: { 200: TraceAnalysisSchema, 401: ProblemSchema, 404: ProblemSchema },
      },
    },
    async (request) => {
      const outcome = await readAnalysis(store, userOf(request), request.params.id);
      if (outcome.kind === 'not-found') throw notFound();
      if (outcome.kind === 'not-finished')
        throw new FlightlogError(
          'not-found',
          `No analysis: the trace is ${outcome.traceStatus} and has not finished. ` +
            'A trace is analysed once it is completed or errored.',
        );
      return outcome.analysis;
    },
  );

  app.get(
    '/v1/traces/:id/fingerprints',
    {
      schema: {
        summary: 'Every fingerprint (traceHash) a run had, oldest first, and its current one',
        params: Type.Object({ id: Type.String({ maxLength: 1024 }) }),
        response: { 200: TraceFingerprintsSchema, 401: ProblemSchema, 404: ProblemSchema },
      },
    },
    async (request) => {
      const outcome = await readFingerprints(store, userOf(request), request.params.id);
      if (outcome.kind === 'not-found') throw notFound();
      return outcome.fingerprints;
    },
  );

  app.get(
    '/v1/agents',
    {
      schema: {
        summary:
          "The caller's agents, by agent id, one page at a time: role, verification, trace count",
        querystring: Type.Object(
          {
            limit: Type.Optional(Type.String({ maxLength: 10 })),
            cursor: Type.Optional(Type.String({ maxLength: 1024 })),
          },
          { additionalProperties: false },
        ),
        response: { 200: AgentListSchema, 400: ProblemSchema, 401: ProblemSchema },
      },
    },
    async (request) => {
      const outcome = await listAgents(store, userOf(request), request.query);
      if (outcome.kind === 'invalid') throw validationFailed(outcome.errors);
      return outcome.page;
    },
  );

  app.get(
    '/v1/agents/:id/traces',
    {
      schema: {
        summary:
          "An agent's traces, newest first, one page at a time; filtered by status, tag, " +
          'start time (from inclusive, to exclusive) and a text search (q). A page with tag or q ' +
          'reads a bounded number of runs: it may hold fewer than limit, even none, with a ' +
          'nextCursor and searchedTo; follow nextCursor until it is null',
        params: Type.Object({ id: Type.String({ maxLength: 1024 }) }),
        querystring: Type.Object(
          {
            status: Type.Optional(StringEnum(TRACE_STATUSES)),
            tag: Type.Optional(Text(256)),
            from: Type.Optional(IsoDateTime),
            to: Type.Optional(IsoDateTime),
            q: Type.Optional(Text(200)),
            limit: Type.Optional(Type.String({ maxLength: 10 })),
            cursor: Type.Optional(Type.String({ maxLength: 1024 })),
          },
          { additionalProperties: false },
        ),
        response: {
          200: TraceListSchema,
          400: ProblemSchema,
          401: ProblemSchema,
          404: ProblemSchema,
        },
      },
    },
    async (request) => {
      const outcome = await listTraces(store, userOf(request), request.params.id, request.query);
      if (outcome.kind === 'invalid') throw validationFailed(outcome.errors);
      if (outcome.kind === 'not-found')
        throw new FlightlogError('not-found', 'No such agent, or you have no access to it.');
      return outcome.page;
    },
  );

  app.get(
    '/v1/agents/:id/stats',
    {
      schema: {
        summary:
          "An agent's runs over the last 24 hours (hourly) or 7 days (daily): counts, errors, " +
          'p50/p95 duration and spend per bucket and in total',
        params: Type.Object({ id: Type.String({ maxLength: 1024 }) }),
        querystring: Type.Object(
          { window: Type.Optional(StringEnum(STATS_WINDOWS)) },
          { additionalProperties: false },
        ),
        response: {
          200: AgentStatsSchema,
          400: ProblemSchema,
          401: ProblemSchema,
          404: ProblemSchema,
        },
      },
    },
    async (request) => {
      const outcome = await readAgentStats(
        store,
        userOf(request),
        request.params.id,
        request.query.window,
      );
      if (outcome.kind === 'not-found')
        throw new FlightlogError('not-found', 'No such agent, or you have no access to it.');
      return outcome.stats;
    },
  );
};
