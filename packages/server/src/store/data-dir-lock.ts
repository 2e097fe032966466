import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Another live process holds the data directory. */
export class DataDirInUseError extends Error {
  override name = 'DataDirInUseError';
  constructor(
    readonly dataDir: string,
    readonly ownerPid: number,
    options?: ErrorOptions,
  ) {
    super(
      `DATA_DIR ${dataDir} is in use by process ${ownerPid}. Stop it, or use the admin API of the running server.`,
      options,
    );
  }
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
 * PGlite is single-process: two processes on one data directory would corrupt it. The lock is a
 * file holding the owner's pid; a lock left by a dead process is taken over.
 * Returns the release function.
 */
export function lockDataDir(dataDir: string): () => void {
  const path = join(dataDir, 'flightlog.lock');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(path, String(process.pid), { flag: 'wx' });
      let released = false;
      return () => {
        if (released) return;
        released = true;
        rmSync(path, { force: true });
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const owner = Number.parseInt(readFileSync(path, 'utf8'), 10);
      if (Number.isInteger(owner) && owner !== process.pid && alive(owner))
        throw new DataDirInUseError(dataDir, owner, { cause: error });
      rmSync(path, { force: true });
    }
  }
  throw new Error(`could not lock DATA_DIR ${dataDir}`);
}
