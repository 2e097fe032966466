import { ProblemSchema, TraceAnalysisSchema } from '@flightlog/protocol';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import type { IdentityVerifier } from '../auth/identity.js';
import { bearerCredential } from '../auth/secrets.js';
import { FlightlogError, validationFailed } from '../errors/flightlog-error.js';
import type { ShareLinks, ShareOutcome, UnshareOutcome } from '../sharing/share-links.js';
import { EventPageQuerySchema, TracePageSchema } from './trace-page-schema.js';
import { requireUser, userOf } from './authentication.js';

export interface ShareRoutesOptions {
  identity: IdentityVerifier;
  shares: ShareLinks;
}

const TraceParams = Type.Object({ id: Type.String({ maxLength: 1024 }) });
const noTrace = () =>
  new FlightlogError('not-found', 'No such trace, or you have no access to it.');
const notEditor = () =>
  new FlightlogError('forbidden', 'Only owners and editors of this agent share its runs.');

const ShareLinkSchema = Type.Object({
  shareToken: Type.String(),
  /** The public page, below this server's origin: `/shared/<token>`. */
  path: Type.String(),
});

/** The answer to sharing a run, or the problem its outcome stands for. */
function sharedAnswer(outcome: ShareOutcome): {
  created: boolean;
  body: { shareToken: string; path: string };
} {
  if (outcome.kind === 'not-found') throw noTrace();
  if (outcome.kind === 'forbidden') throw notEditor();
  if (outcome.kind === 'unavailable')
    throw new FlightlogError(
      'sharing-unavailable',
      'This server has no secret to keep share links with: set SHARE_SECRET (or JWT_SECRET).',
    );
  return {
    created: outcome.created,
    body: { shareToken: outcome.shareToken, path: outcome.path },
  };
}

function unsharedAnswer(outcome: UnshareOutcome): void {
  if (outcome.kind === 'not-found') throw noTrace();
  if (outcome.kind === 'forbidden') throw notEditor();
}

const shareSchema = (who: string) => ({
  summary:
    "Share a run: its public link (a new one, or the run's current one), which shows this " +
    `one run read-only to anyone who holds it (${who})`,
  params: TraceParams,
  response: {
    200: ShareLinkSchema,
    201: ShareLinkSchema,
    401: ProblemSchema,
    403: ProblemSchema,
    404: ProblemSchema,
    503: ProblemSchema,
  },
});
const unshareSchema = (who: string) => ({
  summary: `End a run's public link at once, on every instance (${who})`,
  params: TraceParams,
  response: { 204: Type.Null(), 401: ProblemSchema, 403: ProblemSchema, 404: ProblemSchema },
});

/**
 * Any agent's run shared or unshared by the admin (the CLI's `flightlog trace share`), behind
 * the admin API's token: registered inside the admin routes.
 */
export const adminShareRoutes: FastifyPluginAsyncTypebox<{ shares: ShareLinks }> = async (
  app,
  { shares },
) => {
  app.post(
    '/admin/v1/traces/:id/share',
    { schema: shareSchema('admin') },
    async (request, reply) => {
      const link = sharedAnswer(await shares.share({ kind: 'admin' }, request.params.id));
      reply.header('cache-control', 'no-store');
      return reply.code(link.created ? 201 : 200).send(link.body);
    },
  );
  app.delete(
    '/admin/v1/traces/:id/share',
    { schema: unshareSchema('admin') },
    async (request, reply) => {
      unsharedAnswer(await shares.unshare({ kind: 'admin' }, request.params.id));
      return reply.code(204).send(null);
    },
  );
};

/**
 * Sharing a run and ending its link (owners and editors, identity JWT). Thin: each route calls
 * one function of sharing/.
 */
export const shareRoutes: FastifyPluginAsyncTypebox<ShareRoutesOptions> = async (
  app,
  { identity, shares },
) => {
  app.addHook('onRequest', requireUser(identity));

  app.post(
    '/v1/traces/:id/share',
    { schema: shareSchema('owners and editors') },
    async (request, reply) => {
      const outcome = await shares.share(
        { kind: 'user', userId: userOf(request) },
        request.params.id,
      );
      const link = sharedAnswer(outcome);
      reply.header('cache-control', 'no-store');
      return reply.code(link.created ? 201 : 200).send(link.body);
    },
  );

  app.delete(
    '/v1/traces/:id/share',
    { schema: unshareSchema('owners and editors') },
    async (request, reply) => {
      const outcome = await shares.unshare(
        { kind: 'user', userId: userOf(request) },
        request.params.id,
      );
      unsharedAnswer(outcome);
      return reply.code(204).send(null);
    },
  );
};

/** The share token of a request to the public routes: `Authorization: Bearer fls_…`. */
function shareTokenOf(request: FastifyRequest): string | undefined {
  return bearerCredential(request.headers.authorization);
}

const noShare = () => new FlightlogError('not-found', 'This link shares nothing.');

/**
 * What the holder of a share link reads, with the token as bearer credential (a header: never
 * in an address a log or a `Referer` would carry): the one shared run, its events page by page,
 * its autopsy. No route takes a trace id, so a token reaches its own run and nothing else. A
 * token that shares nothing — never did, unshared, its run deleted — is a `404` like any other,
 * and counts against the address as a failed API key does.
 */
export const sharedRoutes: FastifyPluginAsyncTypebox<{ shares: ShareLinks }> = async (
  app,
  { shares },
) => {
  const access = async (request: FastifyRequest) => {
    const granted = await shares.access(shareTokenOf(request), request.ip);
    if (granted.kind === 'too-many')
      throw new FlightlogError(
        'too-many-requests',
        'Too many links that share nothing from this address; try again later.',
        { retryAfterSeconds: granted.retryAfterSeconds },
      );
    if (granted.kind === 'not-found') throw noShare();
    return granted;
  };

  app.get(
    '/v1/shared/trace',
    {
      schema: {
        summary: 'The shared run and one page of its events, ordered by sequence (share token)',
        querystring: EventPageQuerySchema,
        response: {
          200: TracePageSchema,
          400: ProblemSchema,
          404: ProblemSchema,
          429: ProblemSchema,
        },
      },
    },
    async (request, reply) => {
      const { tokenHash } = await access(request);
      const outcome = await shares.readTrace(tokenHash, request.query);
      if (outcome.kind === 'invalid') throw validationFailed(outcome.errors);
      if (outcome.kind === 'not-found') throw noShare();
      reply.header('cache-control', 'no-store');
      const { kind: _kind, ...page } = outcome;
      return page;
    },
  );

  app.get(
    '/v1/shared/analysis',
    {
      schema: {
        summary: "The autopsy of the shared run's latest finalisation (share token)",
        response: { 200: TraceAnalysisSchema, 404: ProblemSchema, 429: ProblemSchema },
      },
    },
    async (request, reply) => {
      const outcome = await shares.readAnalysis(await access(request));
      if (outcome.kind === 'not-found') throw noShare();
      if (outcome.kind === 'not-finished')
        throw new FlightlogError(
          'not-found',
          `No analysis: the run is ${outcome.traceStatus} and has not finished.`,
        );
      reply.header('cache-control', 'no-store');
      return outcome.analysis;
    },
  );
};
