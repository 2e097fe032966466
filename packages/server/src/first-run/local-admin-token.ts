import { createHmac } from 'node:crypto';

/** What the derived token is for: a key derived for one purpose is useless for any other. */
const PURPOSE = 'flightlog admin api';

/**
 * The admin token of the zero-configuration mode: HMAC-SHA256 of a fixed purpose under the local
 * secret, base64url. `serve` and the CLI derive it from the same file, so the CLI's commands
 * reach a running server's admin API with nothing configured, and no token is ever written or
 * shown. It is no wider than the secret: whoever reads that file may sign in as anyone anyway.
 */
export function localAdminToken(secret: string): string {
  return createHmac('sha256', secret).update(PURPOSE).digest('base64url');
}
