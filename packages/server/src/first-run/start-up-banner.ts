import { resolve } from 'node:path';
import type { Config } from '../config.js';
import { LOCAL_OPERATOR, type LocalSecret } from './local-secret.js';
import type { AdminApiAccess } from './serve-identity.js';

export interface StartUpFacts {
  config: Config;
  /** Where people open the dashboard (`PUBLIC_URL`, or this machine's port). */
  dashboardUrl: string;
  /** The address and port the server listens on. */
  listening: { host: string; port: number };
  /** The local operator's sign-in link, in the zero-configuration mode. */
  signInLink: string | undefined;
  localSecret: LocalSecret | undefined;
  adminApi: AdminApiAccess;
}

const ADMIN_API: Record<AdminApiAccess, string> = {
  'admin-token': 'on (ADMIN_TOKEN)',
  'local-secret':
    'on, token derived from the local secret (the CLI uses it; ADMIN_TOKEN replaces it)',
  off: 'off (ADMIN_TOKEN turns it on)',
};

/** Where the data lives, without credentials: a database URL's password never shows. */
export function describeStore(config: Config): string {
  if (!config.store.databaseUrl)
    return `PGlite (embedded), data in ${resolve(config.store.dataDir)} (durability ${config.store.dataDirDurability})`;
  const url = new URL(config.store.databaseUrl);
  const database = decodeURIComponent(url.pathname.replace(/^\//, '')) || '(default database)';
  const schema = config.store.databaseSchema ? `, schema ${config.store.databaseSchema}` : '';
  return `PostgreSQL ${database} on ${url.hostname}:${url.port || '5432'}${schema}`;
}

export function describeBus(config: Config): string {
  if (!config.live.redisUrl) return 'in-process (live replay starts empty after a restart)';
  const url = new URL(config.live.redisUrl);
  return `Redis ${url.hostname}:${url.port || '6379'}`;
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.');
}

/**
 * The lines a person reads when `serve` starts in a terminal: where the dashboard is, how to
 * sign in, where the data lives and who can reach the port. Plain text, no secret but the
 * sign-in link (whose token is the point, and expires).
 */
export function startUpBanner(facts: StartUpFacts): string {
  const { config, listening, localSecret } = facts;
  const rows: [string, string][] = [['Dashboard', facts.dashboardUrl]];
  if (facts.signInLink)
    rows.push(['Sign in', `${facts.signInLink}`], ['', `(as ${LOCAL_OPERATOR}, valid 12 h)`]);
  else if (config.auth.jwtSecret)
    rows.push(['Sign in', 'npm run --silent flightlog -- dashboard-link --user <your user id>']);
  else
    rows.push([
      'Sign in',
      `through your identity provider (${config.auth.jwtIssuer ?? 'JWT_ISSUER'})`,
    ]);
  rows.push(['Store', describeStore(config)], ['Live bus', describeBus(config)]);
  rows.push([
    'Listening',
    `${listening.host}:${listening.port}` +
      (isLoopback(listening.host) ? ' (this machine only; HOST=0.0.0.0 opens it)' : ''),
  ]);
  if (localSecret)
    rows.push([
      'Secret',
      `${localSecret.created ? 'made' : 'kept'} in ${localSecret.path} (JWT_SECRET replaces it)`,
    ]);
  rows.push(['Admin API', ADMIN_API[facts.adminApi]]);
  const width = Math.max(...rows.map(([label]) => label.length));
  const body = rows.map(([label, value]) => `  ${label.padEnd(width)}  ${value}`).join('\n');
  return `\nFlightlog is running.\n\n${body}\n\n`;
}
