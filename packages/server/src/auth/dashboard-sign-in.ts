/**
 * How the dashboard signs people in, as the page learns it from `GET /v1/dashboard/config`:
 * only public facts (a public OIDC client has no secret; the issuer is in every token it signs).
 */
export type DashboardSignIn =
  { signIn: 'token' } | { signIn: 'oidc'; issuer: string; clientId: string; scope: string };

/** The ID token needs only `openid`; the server reads nothing but `sub` from it. */
const OIDC_SCOPE = 'openid';

export function dashboardSignIn(config: {
  jwtJwksUrl: string | undefined;
  jwtIssuer: string | undefined;
  dashboardOidcClientId: string | undefined;
}): DashboardSignIn {
  // loadConfig refuses a client id without a provider; a config built by hand may still lack one
  if (config.dashboardOidcClientId && config.jwtJwksUrl && config.jwtIssuer)
    return {
      signIn: 'oidc',
      issuer: config.jwtIssuer,
      clientId: config.dashboardOidcClientId,
      scope: OIDC_SCOPE,
    };
  return { signIn: 'token' };
}
