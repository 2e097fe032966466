import { mintDevToken } from './dev-token.js';

/**
 * Lifetime of a sign-in link's token unless asked otherwise: a working day, so a link printed
 * in the morning still opens the dashboard in the afternoon, and one left in a terminal's
 * scroll-back is dead by the next day.
 */
export const DASHBOARD_LINK_TTL_SECONDS = 12 * 3600;

/** Where people reach the dashboard: `PUBLIC_URL` when set, else this machine's port. */
export function dashboardBaseUrl(config: { publicUrl: string | undefined; port: number }): string {
  return config.publicUrl ?? `http://localhost:${config.port}`;
}

/**
 * The dashboard sign-in link of an identity token: `<base>/#token=<jwt>`. The token rides in
 * the URL fragment, which browsers never send to a server, so it stays out of request lines,
 * access logs, proxies and Referer headers; never in a query string.
 */
export function signInLink(base: string, token: string): string {
  return `${base.replace(/\/+$/, '')}/#token=${token}`;
}

/** A sign-in link for `userId` with a fresh HS256 identity token (`flightlog dashboard-link`). */
export async function dashboardLink(
  secret: string,
  userId: string,
  base: string,
  ttlSeconds = DASHBOARD_LINK_TTL_SECONDS,
): Promise<string> {
  return signInLink(base, await mintDevToken(secret, userId, ttlSeconds));
}
