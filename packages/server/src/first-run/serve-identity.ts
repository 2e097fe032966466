import { changeConfig, ConfigError, type Config } from '../config.js';
import { localAdminToken } from './local-admin-token.js';
import { loadOrCreateLocalSecret, type LocalSecret } from './local-secret.js';

/**
 * Whose token the admin API takes: `ADMIN_TOKEN`'s, the one derived from the local secret (the
 * zero-configuration mode), or none (identity configured without `ADMIN_TOKEN`: off).
 */
export type AdminApiAccess = 'admin-token' | 'local-secret' | 'off';

export interface ServeIdentity {
  /**
   * The configuration to serve with: the local secret as `jwtSecret` when it is in use, and the
   * token derived from it as `adminToken` unless `ADMIN_TOKEN` is set.
   */
  config: Config;
  /** The zero-configuration mode's secret; undefined when identity is configured. */
  localSecret: LocalSecret | undefined;
  adminApi: AdminApiAccess;
}

/** The message of a production start without identity configuration: what to set. */
export const PRODUCTION_NEEDS_IDENTITY =
  'NODE_ENV=production needs identity configuration: set JWT_SECRET (32 or more random ' +
  'characters), or JWT_JWKS_URL with JWT_ISSUER and JWT_AUDIENCE';

/**
 * How `serve` verifies identity tokens and admin requests. Explicit configuration wins; without
 * any, a secret kept in the data directory (made on the first start) signs the local operator in,
 * and the admin API takes a token derived from it, so that the CLI's commands work while the
 * server runs. A production deployment must say which identities it trusts: a secret on one
 * machine's disk is not that.
 */
export function serveIdentity(config: Config): ServeIdentity {
  const explicitAdmin = config.auth.adminToken !== undefined;
  if (config.auth.jwtSecret !== undefined || config.auth.jwtJwksUrl !== undefined)
    return { config, localSecret: undefined, adminApi: explicitAdmin ? 'admin-token' : 'off' };
  if (config.process.production) throw new ConfigError(PRODUCTION_NEEDS_IDENTITY);
  const localSecret = loadOrCreateLocalSecret(config.store.dataDir);
  return {
    config: changeConfig(config, {
      auth: {
        jwtSecret: localSecret.secret,
        adminToken: config.auth.adminToken ?? localAdminToken(localSecret.secret),
        adminApiHidden: !explicitAdmin,
      },
    }),
    localSecret,
    adminApi: explicitAdmin ? 'admin-token' : 'local-secret',
  };
}
