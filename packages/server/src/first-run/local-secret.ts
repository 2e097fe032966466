import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** The user the zero-configuration mode signs in through the link `serve` prints. */
export const LOCAL_OPERATOR = 'local-operator';

/** The file in the data directory that keeps the generated identity secret. */
export const LOCAL_SECRET_FILE = 'flightlog.secret';

export interface LocalSecret {
  secret: string;
  /** Absolute path of the secret file. */
  path: string;
  /** Whether this start made it (the first start on this data directory). */
  created: boolean;
  /** Whether others than its owner may read it (mode beyond 0600): worth a warning. */
  readableByOthers: boolean;
}

/** A secret read from its file, if it is one (sign-in tokens need 32 characters or more). */
function parse(path: string): string {
  const secret = readFileSync(path, 'utf8').trim();
  if (secret.length < 32)
    throw new Error(`${path} holds no usable secret (fewer than 32 characters): delete it`);
  return secret;
}

function describe(path: string, secret: string, created: boolean): LocalSecret {
  return {
    secret,
    path,
    created,
    readableByOthers: (statSync(path).mode & 0o077) !== 0,
  };
}

/**
 * The secret in `dir`, made on first use: 32 random bytes (base64url), in a file only its owner
 * may read (0600), so that sign-in links stay valid across restarts. Two processes starting at
 * once agree: the file is created exclusively, and the loser reads the winner's.
 */
export function loadOrCreateLocalSecret(dir: string): LocalSecret {
  const path = resolve(join(dir, LOCAL_SECRET_FILE));
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const secret = randomBytes(32).toString('base64url');
  try {
    writeFileSync(path, `${secret}\n`, { mode: 0o600, flag: 'wx' });
    return describe(path, secret, true);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  return describe(path, parse(path), false);
}

/** The secret kept in `dir`, or undefined before the first start (the CLI's token commands). */
export function readLocalSecret(dir: string): string | undefined {
  const path = resolve(join(dir, LOCAL_SECRET_FILE));
  try {
    return parse(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}
