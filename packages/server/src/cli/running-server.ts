import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config.js';
import { localAdminToken } from '../first-run/local-admin-token.js';
import { readLocalSecret } from '../first-run/local-secret.js';
import type { AdminApiAccess } from '../first-run/serve-identity.js';
import type { DataDirInUseError } from '../store/data-dir-lock.js';
import type { AdminCredential } from './admin-api-client.js';

/**
 * The file in the data directory where `serve` on the embedded engine says where it listens,
 * so that CLI commands, which cannot open a held `DATA_DIR`, send their work to it instead.
 */
export const SERVER_FILE = 'flightlog.server.json';

export interface ServerFile {
  /** Where the server listens, as this machine reaches it (loopback for a wildcard address). */
  url: string;
  pid: number;
  /** Which token its admin API takes; never the token itself. */
  adminApi: AdminApiAccess;
}

/** A command cannot go through the running server: what to do instead (exit 2). */
export class RunningServerError extends Error {
  override name = 'RunningServerError';
}

/**
 * Writes the server file (mode 0600, replaced whole so that no reader sees half of it) and
 * returns its removal. The server removes it while it still holds the lock: a file removed
 * later could be the next server's.
 */
export function writeServerFile(dataDir: string, server: ServerFile): () => void {
  const path = join(dataDir, SERVER_FILE);
  const next = `${path}.${process.pid}`;
  writeFileSync(next, `${JSON.stringify(server)}\n`, { mode: 0o600 });
  renameSync(next, path);
  return () => rmSync(path, { force: true });
}

function readServerFile(dataDir: string): ServerFile | undefined {
  let parsed: Partial<ServerFile>;
  try {
    parsed = JSON.parse(readFileSync(join(dataDir, SERVER_FILE), 'utf8')) as Partial<ServerFile>;
  } catch {
    return undefined;
  }
  const { url, pid, adminApi } = parsed;
  if (typeof url !== 'string' || typeof pid !== 'number') return undefined;
  if (adminApi !== 'admin-token' && adminApi !== 'local-secret' && adminApi !== 'off')
    return undefined;
  return { url, pid, adminApi };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * How long a command waits for the holder of `DATA_DIR` to write the server file: a server
 * takes the lock before it opens the database and migrates, and writes the file once it
 * listens (seconds on a fresh data directory on a busy machine).
 */
const SERVER_FILE_WAIT_MS = 10_000;

/**
 * The server holding `DATA_DIR`, from the file it wrote. The lock says whether it is live; the
 * file only where it is. A file left by a server that was killed names another pid than the
 * lock's holder, and is ignored: the admin token goes only to the process holding the lock.
 */
export async function findRunningServer(
  inUse: DataDirInUseError,
  waitMs = SERVER_FILE_WAIT_MS,
): Promise<ServerFile> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const server = readServerFile(inUse.dataDir);
    // the holder's pid is unreadable only on Windows; a live pid is the best sign there
    if (
      server &&
      (inUse.ownerPid === undefined ? alive(server.pid) : server.pid === inUse.ownerPid)
    )
      return server;
    if (Date.now() >= deadline)
      throw new RunningServerError(
        `DATA_DIR ${inUse.dataDir} is in use by ${inUse.holder}, which is not a running server ` +
          `(no ${SERVER_FILE} names it): stop it, or wait until it ends`,
        { cause: inUse },
      );
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** `the server running on DATA_DIR … (process N)`, for messages. */
export function describeServer(dataDir: string, server: ServerFile): string {
  return `the server running on DATA_DIR ${dataDir} (process ${server.pid})`;
}

/**
 * The token to send to the server's admin API: the one it takes, as its file says. The token
 * derived from the local secret is derived here from the same file; `ADMIN_TOKEN` must be given
 * to this command as to the server.
 */
export function adminCredential(
  dataDir: string,
  server: ServerFile,
  config: Config,
): AdminCredential {
  const inUse = `DATA_DIR ${dataDir} is in use by the server running on it (process ${server.pid})`;
  if (server.adminApi === 'off')
    throw new RunningServerError(
      `${inUse}, which has no admin API: stop the server, or restart it with ADMIN_TOKEN set`,
    );
  if (server.adminApi === 'admin-token') {
    if (config.auth.adminToken) return { token: config.auth.adminToken, source: 'admin-token' };
    throw new RunningServerError(
      `${inUse}, whose admin API needs its ADMIN_TOKEN: set ADMIN_TOKEN to it, or stop the server`,
    );
  }
  let secret: string | undefined;
  try {
    secret = readLocalSecret(dataDir);
  } catch (error) {
    throw new RunningServerError(
      `${inUse}, whose admin API takes a token derived from the local secret, which this ` +
        `command cannot read (${(error as Error).message}): run it as the server's user, or ` +
        'stop the server',
      { cause: error },
    );
  }
  if (secret === undefined)
    throw new RunningServerError(
      `${inUse}, but its local secret is gone from DATA_DIR: restart the server`,
    );
  return { token: localAdminToken(secret), source: 'local-secret' };
}
