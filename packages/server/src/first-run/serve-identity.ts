import { ConfigError, type Config } from '../config.js';
import { loadOrCreateLocalSecret, type LocalSecret } from './local-secret.js';

export interface ServeIdentity {
  /** The configuration to serve with: the local secret as `jwtSecret` when it is in use. */
  config: Config;
  /** The zero-configuration mode's secret; undefined when identity is configured. */
  localSecret: LocalSecret | undefined;
}

/** The message of a production start without identity configuration: what to set. */
export const PRODUCTION_NEEDS_IDENTITY =
  'NODE_ENV=production needs identity configuration: set JWT_SECRET (32 or more random ' +
  'characters), or JWT_JWKS_URL with JWT_ISSUER and JWT_AUDIENCE';

/**
 * How `serve` verifies identity tokens. Explicit configuration wins; without any, a secret kept
 * in the data directory (made on the first start) signs the local operator in. A production
 * deployment must say which identities it trusts: a secret on one machine's disk is not that.
 */
export function serveIdentity(config: Config): ServeIdentity {
  if (config.jwtSecret !== undefined || config.jwtJwksUrl !== undefined)
    return { config, localSecret: undefined };
  if (config.production) throw new ConfigError(PRODUCTION_NEEDS_IDENTITY);
  const localSecret = loadOrCreateLocalSecret(config.dataDir);
  return { config: { ...config, jwtSecret: localSecret.secret }, localSecret };
}
