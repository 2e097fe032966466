import { spawn } from 'node:child_process';
import {
  closeSync,
  constants,
  ftruncateSync,
  openSync,
  readFileSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';

/** Another running process holds the data directory. */
export class DataDirInUseError extends Error {
  override name = 'DataDirInUseError';
  constructor(
    readonly dataDir: string,
    /** The holder's pid as it wrote it into the lock file; undefined when not (yet) readable. */
    readonly ownerPid: number | undefined,
    options?: ErrorOptions,
  ) {
    super(
      `DATA_DIR ${dataDir} is in use by ${holderName(ownerPid)}. Stop it, or use the admin API ` +
        'of the running server.',
      options,
    );
  }

  /** `process N`, or `another process` when the holder's pid could not be read. */
  get holder(): string {
    return holderName(this.ownerPid);
  }
}

function holderName(pid: number | undefined): string {
  return pid === undefined ? 'another process' : `process ${pid}`;
}

/**
 * How the lock is held:
 * - `file-lock`: an advisory lock on the lock file taken in this process, through
 *   fs-native-extensions (open-file-description locks on Linux, flock on macOS, LockFileEx on
 *   Windows), whose prebuilt Node-API binaries ship inside its npm package;
 * - `flock-command`: the same kind of lock held by a `flock(1)` child process (util-linux or
 *   BusyBox), for a platform that package has no binary for (Alpine's musl, 32-bit ARM).
 */
export type DataDirLockMechanism = 'file-lock' | 'flock-command';

export interface DataDirLock {
  readonly mechanism: DataDirLockMechanism;
  /** Gives the directory up (idempotent); resolves once nothing of ours holds it any more. */
  release(): Promise<void>;
}

export interface LockDataDirOptions {
  /** Default: `file-lock` where its binary loads, otherwise `flock-command`. */
  mechanism?: DataDirLockMechanism;
}

export const LOCK_FILE = 'flightlog.lock';

interface FileLocks {
  tryLock(fd: number): boolean;
}

let fileLocks: FileLocks | Error | undefined;

/** The native file lock, or why it cannot be had on this platform; loaded once, when needed. */
function loadFileLocks(): FileLocks | Error {
  if (fileLocks === undefined) {
    try {
      fileLocks = createRequire(import.meta.url)('fs-native-extensions') as FileLocks;
    } catch (error) {
      fileLocks = error instanceof Error ? error : new Error(String(error));
    }
  }
  return fileLocks;
}

/** Short waits inside an open that is awaited: kept referenced, so the process waits with it. */
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The pid the holder wrote into the lock file. It writes it right after getting the lock, so a
 * loser that looks in between finds the file empty for a moment: it looks again, briefly.
 */
async function holderPid(path: string): Promise<number | undefined> {
  for (let attempt = 0; attempt < 5; attempt++) {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch {
      // Windows' LockFileEx keeps others from reading a locked file: no pid to show there.
      return undefined;
    }
    const pid = Number.parseInt(text, 10);
    if (Number.isInteger(pid) && pid > 0) return pid;
    await sleep(20);
  }
  return undefined;
}

function lockInProcess(dataDir: string, path: string, locks: FileLocks): DataDirLock {
  // not truncated on open: the holder's pid must stay readable for the loser's message
  const fd = openSync(path, constants.O_RDWR | constants.O_CREAT, 0o644);
  let locked: boolean;
  try {
    locked = locks.tryLock(fd);
  } catch (error) {
    closeSync(fd);
    throw new Error(`could not lock DATA_DIR ${dataDir}: ${(error as Error).message}`, {
      cause: error,
    });
  }
  if (!locked) {
    closeSync(fd);
    throw new DataDirInUseError(dataDir, undefined);
  }
  ftruncateSync(fd, 0);
  writeSync(fd, `${process.pid}\n`, 0);
  let released = false;
  return {
    mechanism: 'file-lock',
    release() {
      if (!released) {
        released = true;
        try {
          // The file stays: a process that opened it just now must lock the same file as the
          // next one will, or two could each lock a file of their own. Closing the descriptor
          // is what releases the lock.
          ftruncateSync(fd, 0);
        } finally {
          closeSync(fd);
        }
      }
      return Promise.resolve();
    },
  };
}

/** Why `flock` did not report the lock taken: it was busy (exit 1), or it could not run. */
class FlockCommandFailed extends Error {
  constructor(
    readonly busy: boolean,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/**
 * `flock -x -n FILE sh -c '...'`: flock takes the lock and runs a shell that says so, then waits
 * for the end of its standard input, which is a pipe only this process writes to. When this
 * process ends, however it ends, the kernel closes that pipe; the shell's `cat` sees its end and
 * exits, and flock with it, which releases the lock. The child is in our process group, so a
 * supervisor's kill of the group ends it at once as well.
 */
async function lockWithFlockCommand(path: string): Promise<DataDirLock> {
  const child = spawn('flock', ['-x', '-n', path, 'sh', '-c', 'echo locked; exec cat >/dev/null'], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const stdin = child.stdin as Writable;
  const stdout = child.stdout as Readable;
  const stderr = child.stderr as Readable;
  const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
  let output = '';
  let errors = '';
  stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()));
  // A write to a pipe whose reader is gone fails asynchronously; the lock is then gone as well.
  stdin.on('error', () => {});
  try {
    await new Promise<void>((resolve, reject) => {
      stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('locked\n')) resolve();
      });
      child.once('error', (error) =>
        reject(
          new FlockCommandFailed(false, `flock could not run: ${error.message}`, { cause: error }),
        ),
      );
      void exited.then((code) =>
        reject(
          new FlockCommandFailed(
            code === 1,
            `flock exited with ${code}${errors ? `: ${errors.trim()}` : ''}`,
          ),
        ),
      );
    });
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  writeFileSync(path, `${process.pid}\n`);
  // The child lives as long as the lock is held, without keeping this process alive; waiting
  // for its exit on release does keep it alive until then.
  const keepAlive = (yes: boolean) => {
    if (yes) child.ref();
    else child.unref();
    for (const stream of [stdin, stdout, stderr]) {
      const handle = stream as Partial<{ ref(): void; unref(): void }>;
      if (yes) handle.ref?.();
      else handle.unref?.();
    }
  };
  keepAlive(false);
  let releasing: Promise<void> | undefined;
  return {
    mechanism: 'flock-command',
    release() {
      releasing ??= (async () => {
        try {
          writeFileSync(path, '');
        } catch {
          // the pid is only for messages; the lock is what counts
        }
        keepAlive(true);
        // cat sees the end of its input and exits, then flock, which waits for it: once flock
        // is gone, so is everything that held the lock
        stdin.end();
        const stuck = setTimeout(() => child.kill('SIGKILL'), 2_000);
        stuck.unref();
        await exited;
        clearTimeout(stuck);
      })();
      return releasing;
    },
  };
}

/**
 * How long a start waits for a holder that is on its way out: a SIGKILL is delivered, and the
 * files of the process closed, a moment after `kill` returns (longer on a busy machine), and a
 * `flock-command` child lets go only once it saw the end of its pipe. A holder still there
 * after this is running.
 */
const HOLDER_EXIT_WAIT_MS = 1_000;

/**
 * PGlite is single-process: two processes on one data directory would corrupt it. So the data
 * directory is locked with an advisory file lock on `DATA_DIR/flightlog.lock`, which the kernel
 * drops the moment the holder's process ends, whatever ends it: a process that was killed,
 * even one not yet reaped by its parent (a zombie), holds nothing, and a pid that was reused
 * after a reboot or in another container means nothing. Two containers sharing the volume see
 * the same lock, since the lock belongs to the file, not to a pid. The holder writes its pid
 * into the file only so that the refusal can name it.
 *
 * Where the native lock has no binary, a `flock(1)` child holds the lock instead. Where neither
 * exists, the directory is not opened at all.
 */
export async function lockDataDir(
  dataDir: string,
  options: LockDataDirOptions = {},
): Promise<DataDirLock> {
  const path = join(dataDir, LOCK_FILE);
  const locks = options.mechanism === 'flock-command' ? undefined : loadFileLocks();
  if (locks instanceof Error && options.mechanism === 'file-lock') throw locks;
  const attempt =
    locks !== undefined && !(locks instanceof Error)
      ? () => Promise.resolve(lockInProcess(dataDir, path, locks))
      : () => lockWithFlockCommandOnce(dataDir, path, locks);
  const deadline = Date.now() + HOLDER_EXIT_WAIT_MS;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (!(error instanceof DataDirInUseError)) throw error;
      if (Date.now() >= deadline)
        throw new DataDirInUseError(dataDir, await holderPid(path), { cause: error });
      await sleep(10);
    }
  }
}

/** One try of the `flock-command` lock; a busy lock is a `DataDirInUseError`. */
async function lockWithFlockCommandOnce(
  dataDir: string,
  path: string,
  whyNotInProcess: Error | undefined,
): Promise<DataDirLock> {
  try {
    return await lockWithFlockCommand(path);
  } catch (error) {
    if (!(error instanceof FlockCommandFailed)) throw error;
    if (error.busy) throw new DataDirInUseError(dataDir, undefined, { cause: error });
    throw new Error(
      `cannot lock DATA_DIR ${dataDir}: the file lock of fs-native-extensions does not ` +
        `load on ${process.platform}-${process.arch}${whyNotInProcess ? ` (${whyNotInProcess.message.split('\n')[0]})` : ''}, ` +
        `and the flock command did not work (${error.message}). Install flock (util-linux ` +
        'or BusyBox), or use PostgreSQL (DATABASE_URL).',
      { cause: error },
    );
  }
}
