import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ApiKeyResolver, ResolvedKey } from '../auth/api-key-resolver.js';
import type { IdentityVerifier } from '../auth/identity.js';
import type { KeyGuessLimiter } from '../auth/key-guess-limiter.js';
import { bearerCredential, secretsEqual } from '../auth/secrets.js';
import { FlightlogError } from '../errors/flightlog-error.js';
import { noRoute } from './problem.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The agent of the API key (ingest routes). */
    agent: ResolvedKey | undefined;
    /** The dashboard user of the identity JWT (read routes). */
    userId: string | undefined;
    /** When that JWT expires (ms since the epoch): live streams end then. */
    userExpiresAt: number | undefined;
    /**
     * Whose share of the server the request takes (fair admission): `agent:<id>`, `user:<id>`
     * or `admin`, set once the credentials are checked; the client address when unset.
     */
    tenant: string | undefined;
  }
}

type Hook = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

/**
 * onRequest hook of the write routes: the API key fixes the agent. A request without an
 * `Authorization` header guesses nothing and gets its `401`; with one, a key that is not valid
 * counts against the client address, and past the address's limit the answer is `429` with
 * `Retry-After` (counted in `onRefused`) instead of `401`, without the store being asked. The
 * address is `request.ip`: the socket's peer, or the client as the proxies named in
 * `TRUST_PROXY` forward it, so an `X-Forwarded-For` a guesser could vary at will is not believed.
 */
export function requireApiKey(resolver: ApiKeyResolver, onRefused: () => void = () => {}): Hook {
  return async (request) => {
    const header = request.headers.authorization;
    if (!sendsCredential(header)) throw new FlightlogError('unauthorized', SEND_API_KEY);
    const key = bearerCredential(header);
    const check = await resolver.authenticate(key ?? '', request.ip);
    if (check.kind === 'valid') {
      request.agent = check.key;
      request.tenant = `agent:${check.key.agentId}`;
      return;
    }
    if (check.reason === 'too-many-failures') {
      onRefused();
      throw tooManyGuesses('an API key that is not valid', check.retryAfterSeconds);
    }
    throw new FlightlogError(
      'unauthorized',
      key === undefined ? SEND_API_KEY : 'The API key is unknown or revoked.',
    );
  };
}

const SEND_API_KEY = 'Send the agent API key as Authorization: Bearer <API_KEY>.';

/** A request without an `Authorization` header guesses nothing: it is not counted. */
function sendsCredential(header: string | undefined): header is string {
  return header !== undefined && header.trim() !== '';
}

/** The `429` of an address past its limit of failed authentications. */
function tooManyGuesses(what: string, retryAfterSeconds: number): FlightlogError {
  return new FlightlogError(
    'too-many-requests',
    `Too many requests with ${what} came from this address; try again later.`,
    { retryAfterSeconds },
  );
}

/** onRequest hook of the dashboard routes: an identity JWT names the user. */
export function requireUser(identity: IdentityVerifier): Hook {
  return async (request) => {
    const result = await identity.verify(bearerCredential(request.headers.authorization));
    if (result.kind === 'verified') {
      request.userId = result.userId;
      request.userExpiresAt = result.expiresAt;
      request.tenant = `user:${result.userId}`;
      return;
    }
    const detail = {
      missing: 'Send an identity JWT as Authorization: Bearer <IDENTITY_JWT>.',
      invalid: 'The identity token is not valid.',
      expired: 'The identity token has expired.',
      'not-configured': 'No identity provider is configured (set JWT_SECRET or JWT_JWKS_URL).',
    }[result.reason];
    throw new FlightlogError('unauthorized', detail);
  };
}

/**
 * onRequest hook of the admin routes. A wrong admin token counts against the client address
 * like a wrong API key, in its own `guesses` window; past the limit the address gets `429` with
 * `Retry-After` (counted in `onRefused`) before the token is compared, even when it is right:
 * otherwise the one answer that differs would still tell a guesser when it found the token.
 */
export function requireAdmin(
  adminToken: string,
  guesses: KeyGuessLimiter,
  onRefused: () => void = () => {},
  hidden = false,
): Hook {
  return async (request) => {
    // hidden (a token derived from the local secret): every refusal is the answer to a route
    // that does not exist, so the admin API is not there for anyone without the secret
    const refuse = (error: FlightlogError) => (hidden ? noRoute(request) : error);
    const header = request.headers.authorization;
    if (!sendsCredential(header))
      throw refuse(new FlightlogError('unauthorized', SEND_ADMIN_TOKEN));
    const retryAfterSeconds = guesses.retryAfterSeconds(request.ip);
    if (retryAfterSeconds > 0) {
      onRefused();
      throw refuse(tooManyGuesses('a wrong admin token', retryAfterSeconds));
    }
    const token = bearerCredential(header);
    if (!token || !secretsEqual(token, adminToken)) {
      guesses.recordFailure(request.ip);
      throw refuse(new FlightlogError('unauthorized', SEND_ADMIN_TOKEN));
    }
    // one tenant, whoever holds the token
    request.tenant = 'admin';
  };
}

const SEND_ADMIN_TOKEN = 'Send the admin token as Authorization: Bearer <ADMIN_TOKEN>.';

/** The authenticated agent; only called on routes guarded by requireApiKey. */
export function agentOf(request: FastifyRequest): ResolvedKey {
  if (!request.agent) throw new Error('route is missing the requireApiKey hook');
  return request.agent;
}

export function userOf(request: FastifyRequest): string {
  if (!request.userId) throw new Error('route is missing the requireUser hook');
  return request.userId;
}
