import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';

/** A real OpenID Connect provider (`oidc-provider`) on a loopback port, for the dashboard's sign-in. */
export interface TestOidcProvider {
  /** Its issuer identifier (no trailing slash): `JWT_ISSUER`. */
  issuer: string;
  /** Its JWKS: `JWT_JWKS_URL`. */
  jwksUrl: string;
  /** The dashboard's public client: `DASHBOARD_OIDC_CLIENT_ID` and `JWT_AUDIENCE`. */
  clientId: string;
  /**
   * Registers the dashboard at `dashboardOrigin` (known once its server listens, which needs the
   * issuer first); until then every request is answered 503.
   */
  registerDashboard(dashboardOrigin: string): void;
  /** Seconds the ID tokens issued from now on live (one hour at first). */
  setIdTokenTtl(seconds: number): void;
  close(): Promise<void>;
}

/**
 * The provider as an operator would set it up for the dashboard: one public client (no secret,
 * `token_endpoint_auth_method: none`), PKCE required, the dashboard's callback as its one
 * redirect URI, CORS for the dashboard's origin only (the page fetches the token endpoint), its
 * own signing key. People sign in on its development login page (any login and password; the
 * login becomes the `sub`).
 */
export async function startOidcProvider(): Promise<TestOidcProvider> {
  let idTokenTtl = 3600;
  let handle: ReturnType<Provider['callback']> | undefined;
  const server: Server = createServer((request, response) => {
    if (handle) return void handle(request, response);
    response.writeHead(503).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const clientId = `flightlog-dashboard-${randomBytes(3).toString('hex')}`;
  const signingKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
    format: 'jwk',
  });

  const provide = (dashboardOrigin: string) =>
    new Provider(issuer, {
      clients: [
        {
          client_id: clientId,
          token_endpoint_auth_method: 'none',
          application_type: 'web',
          grant_types: ['authorization_code'],
          response_types: ['code'],
          redirect_uris: [`${dashboardOrigin}/auth/callback`],
        },
      ],
      pkce: { required: () => true },
      clientBasedCORS: (_ctx, origin, client) =>
        client.clientId === clientId && origin === dashboardOrigin,
      findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
      features: { devInteractions: { enabled: true } },
      cookies: { keys: [randomBytes(32).toString('hex')] },
      jwks: { keys: [{ ...signingKey, kid: 'test-key', use: 'sig', alg: 'RS256' }] },
      ttl: {
        IdToken: () => idTokenTtl,
        AccessToken: 3600,
        Interaction: 600,
        Session: 3600,
        Grant: 3600,
      },
    });

  return {
    issuer,
    jwksUrl: `${issuer}/jwks`,
    clientId,
    setIdTokenTtl(seconds) {
      idTokenTtl = seconds;
    },
    registerDashboard(dashboardOrigin) {
      handle = provide(dashboardOrigin).callback();
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
