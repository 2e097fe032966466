import * as oauth from 'oauth4webapi';
import { getJson } from './api.js';
import { signIn } from './session.js';

/**
 * Signing in through the OpenID Connect provider the server trusts: the authorization code flow
 * with PKCE, done in this page by oauth4webapi (discovery, the code exchange, and the checks of
 * the token response and of the ID token's claims: issuer, audience, nonce, expiry). The server
 * verifies the ID token's signature against the provider's JWKS on every request it carries.
 *
 * What this tab keeps between leaving for the provider and coming back (the PKCE verifier, the
 * state, the nonce, where the user was) lives in its sessionStorage, read once and removed, so a
 * callback opened twice or in another tab finds nothing to complete.
 */
export type DashboardSignIn =
  { signIn: 'token' } | { signIn: 'oidc'; issuer: string; clientId: string; scope: string };

export const CALLBACK_PATH = '/auth/callback';
const PENDING_KEY = 'flightlog.oidc-pending';

export interface PendingSignIn {
  verifier: string;
  state: string;
  nonce: string;
  returnTo: string;
}

/** A sign-in that did not complete, with what to tell the user. */
export class SignInError extends Error {}

/** What `/v1/dashboard/config` says besides how to sign in: the cluster runs are anchored on. */
export interface DashboardConfig {
  anchoring?: { cluster: string; address: string } | null;
}

export const loadSignInConfig = (signal?: AbortSignal) =>
  getJson<DashboardSignIn & DashboardConfig>('/v1/dashboard/config', signal);

type OidcConfig = Extract<DashboardSignIn, { signIn: 'oidc' }>;

/** The provider's host as people know it: what the sign-in button names. */
export const issuerHost = (config: OidcConfig) => new URL(config.issuer).host;

/**
 * Plain http only to a provider on this machine (development, tests): anywhere else a code and
 * a token would cross the network in clear, so oauth4webapi's https-only rule stands.
 */
function insecureAllowed(issuer: URL): boolean {
  return (
    issuer.protocol === 'http:' && ['localhost', '127.0.0.1', '[::1]'].includes(issuer.hostname)
  );
}

async function discover(config: OidcConfig): Promise<{
  as: oauth.AuthorizationServer;
  client: oauth.Client;
  options: { [oauth.allowInsecureRequests]?: boolean };
}> {
  const issuer = new URL(config.issuer);
  const options = insecureAllowed(issuer) ? { [oauth.allowInsecureRequests]: true } : {};
  let as: oauth.AuthorizationServer;
  try {
    as = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { ...options, algorithm: 'oidc' }),
    );
  } catch (error) {
    throw new SignInError(
      `Could not reach the identity provider at ${issuer.host}: ${reason(error)}`,
    );
  }
  return { as, client: { client_id: config.clientId }, options };
}

function reason(error: unknown): string {
  if (error instanceof oauth.AuthorizationResponseError || error instanceof oauth.ResponseBodyError)
    return error.error_description ?? error.error;
  return error instanceof Error ? error.message : String(error);
}

/** Leaves for the provider's sign-in page; the browser comes back to CALLBACK_PATH. */
export async function startOidcSignIn(config: OidcConfig, returnTo: string): Promise<void> {
  const { as } = await discover(config);
  if (!as.authorization_endpoint)
    throw new SignInError('The identity provider has no authorization endpoint');
  const pending: PendingSignIn = {
    verifier: oauth.generateRandomCodeVerifier(),
    state: oauth.generateRandomState(),
    nonce: oauth.generateRandomNonce(),
    returnTo: safeReturnPath(returnTo),
  };
  const url = new URL(as.authorization_endpoint);
  url.search = new URLSearchParams({
    client_id: config.clientId,
    redirect_uri: redirectUri(),
    response_type: 'code',
    scope: config.scope,
    code_challenge: await oauth.calculatePKCECodeChallenge(pending.verifier),
    code_challenge_method: 'S256',
    state: pending.state,
    nonce: pending.nonce,
  }).toString();
  sessionStorage.setItem(PENDING_KEY, JSON.stringify(pending));
  location.assign(url.href);
}

/** The provider's answer, taken out of the address bar and out of this tab's storage at once. */
export interface CallbackAnswer {
  url: URL;
  pending: PendingSignIn | undefined;
}

/**
 * Takes the code and state out of the address (whatever happens next, they do not stay in the
 * history) and the pending sign-in out of sessionStorage (an answer is used once).
 */
export function takeCallbackAnswer(): CallbackAnswer {
  const url = new URL(location.href);
  history.replaceState(null, '', CALLBACK_PATH);
  const pending = parsePending(sessionStorage.getItem(PENDING_KEY));
  sessionStorage.removeItem(PENDING_KEY);
  return { url, pending };
}

/**
 * Completes the sign-in the provider sent the browser back from: checks the answer belongs to
 * the sign-in this tab started (state), exchanges the code (with the PKCE verifier), keeps the
 * ID token as the session's token, and answers where to go.
 */
export async function finishOidcSignIn(
  config: DashboardSignIn,
  { url: callback, pending }: CallbackAnswer,
): Promise<string> {
  if (config.signIn !== 'oidc')
    throw new SignInError('This server does not sign in through an identity provider.');
  if (!pending)
    throw new SignInError(
      'No sign-in was started in this tab, so this answer from the identity provider was not used.',
    );
  // said plainly here; oauth4webapi checks it again below
  if (callback.searchParams.get('state') !== pending.state && !callback.searchParams.has('error'))
    throw new SignInError(
      'This answer does not belong to the sign-in started in this tab (its state does not match), so it was refused.',
    );
  const { as, client, options } = await discover(config);
  try {
    const parameters = oauth.validateAuthResponse(as, client, callback, pending.state);
    const response = await oauth.authorizationCodeGrantRequest(
      as,
      client,
      oauth.None(),
      parameters,
      redirectUri(),
      pending.verifier,
      options,
    );
    const tokens = await oauth.processAuthorizationCodeResponse(as, client, response, {
      expectedNonce: pending.nonce,
      requireIdToken: true,
    });
    // the ID token: always a JWT, its `aud` the dashboard's client id (JWT_AUDIENCE), its `sub`
    // the user. An access token may be opaque, or meant for another audience.
    if (!tokens.id_token) throw new SignInError('The identity provider sent no ID token');
    signIn(tokens.id_token);
  } catch (error) {
    if (error instanceof SignInError) throw error;
    throw new SignInError(`The identity provider did not sign you in: ${reason(error)}`);
  }
  return pending.returnTo;
}

const redirectUri = () => `${location.origin}${CALLBACK_PATH}`;

/** A path on this origin only: never a way to send the signed-in user elsewhere. */
function safeReturnPath(path: string): string {
  return path.startsWith('/') && !path.startsWith('//') && !path.startsWith(CALLBACK_PATH)
    ? path
    : '/';
}

function parsePending(raw: string | null): PendingSignIn | undefined {
  if (!raw) return undefined;
  try {
    const value = JSON.parse(raw) as Partial<PendingSignIn>;
    if (
      typeof value.verifier === 'string' &&
      typeof value.state === 'string' &&
      typeof value.nonce === 'string' &&
      typeof value.returnTo === 'string'
    )
      return { ...value, returnTo: safeReturnPath(value.returnTo) } as PendingSignIn;
  } catch {
    // not ours: nothing to complete
  }
  return undefined;
}
