import { existsSync, fdatasyncSync, fsyncSync, writeSync } from 'node:fs';
import { open, readdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { isMainThread } from 'node:worker_threads';
import { PGlite, type PGliteOptions } from '@electric-sql/pglite';
import { NodeFS } from '@electric-sql/pglite/nodefs';

/**
 * What an acknowledged commit survives on the embedded engine with a data directory
 * (`DATA_DIR_DURABILITY`). `power-loss`: it is on disk (fsynced) before the call that made it
 * resolves. `process-crash`: it is written to the operating system, which puts it on disk
 * later; a crash of the process keeps it, a crash of the machine or a power cut may not.
 */
export type DataDirDurability = 'power-loss' | 'process-crash';

export const DATA_DIR_DURABILITIES: readonly DataDirDurability[] = ['power-loss', 'process-crash'];

/*
 * How `power-loss` is made. PGlite runs PostgreSQL (single-user, in WASM) over the real data
 * directory through emscripten's NODEFS, and starts it with `-F` (fsync off). Two things stand
 * between it and a durable commit:
 *
 * - `-F`. Without it PostgreSQL does everything a durable PostgreSQL does: it flushes the WAL
 *   at every commit (synchronous_commit is on), fsyncs a new or recycled WAL segment and its
 *   directory, and at a checkpoint fsyncs every data file it wrote before the WAL that covered
 *   them may be removed or recycled (then pg_control). After a crash it fsyncs the whole data
 *   directory before recovering. All of that is in-engine and ordered correctly, for every way
 *   a commit happens (autocommit statement, transaction, plain query), so nothing here has to
 *   know where commits are.
 * - emscripten. Its `fdatasync` is a stub that returns 0, and its `fsync` calls the file
 *   system's `fsync` stream operation, which NODEFS does not have: both are no-ops. So the WAL is
 *   flushed with `wal_sync_method=fsync`, and NODEFS is given an `fsync` operation that syncs
 *   the real file descriptor: fdatasync for a file (its data and size, all a WAL segment or a
 *   data file needs), fsync for a directory (its entries).
 *
 * The sync runs inside the engine's call, so it blocks the event loop for as long as the disk
 * takes, as the engine's own work already does on this engine; each commit syncs once (a
 * single-user engine has no concurrent commits to group).
 *
 * An fsync that fails stops the process, as PostgreSQL stops every backend (PANIC): the
 * operating system may have dropped the pages it could not write, so nothing the engine holds
 * can be trusted, and recovery from the WAL at the next start is the way back. (PGlite's engine
 * after a PANIC also spins on the next query, freezing the event loop.) Every batch
 * acknowledged before was synced; the ones in flight are answered by no one, and clients retry.
 *
 * The engine only syncs what it wrote itself since it started. So the whole data directory is
 * synced, with the directory that holds it, before it is used in this mode for the first time:
 * a new one holds what PGlite's initdb wrote from JavaScript, and one that ran with
 * `process-crash` (or an older Flightlog) may have writes still in the page cache, its last
 * checkpoint among them. A marker file then says the directory is synced; a `process-crash`
 * start removes it first. Not at every start: on ~1,000 files it takes 150–300 ms that a
 * restart under a supervisor should not pay, and a directory only ever written in this mode has
 * nothing unsynced (after a crash the engine itself syncs it before recovering).
 */
/** In a data directory that has been synced whole and since written only with fsync on. */
export const SYNCED_MARKER = 'flightlog.synced';

/**
 * PGlite's start parameters, with the engine's buffer cache cut from PostgreSQL's 128 MB to
 * 32 MB. The buffers live in the WASM memory, which never shrinks, and an idle server on an
 * existing data directory held 389 MB of RSS with 128 MB against 270 MB with 32; under them the
 * operating system caches the data files again (NODEFS reads the real files), and ingest
 * touches recent pages only.
 *
 * And new WAL segments are not filled with zeros: the statement that crossed a segment's end
 * wrote 16 MB of zeros and synced them, ~90 ms on the event loop every 16 MB of WAL (every ~600
 * large batches), which every request then waited on. Durability does not rest on the zeros:
 * each commit syncs the WAL it wrote, the file's unwritten part reads as zeros all the same, and
 * recovery stops at the first record that does not check out (PostgreSQL's `wal_init_zero` is for
 * file systems that must allocate ahead).
 */
export const PGLITE_START_PARAMS: readonly string[] = [
  ...PGlite.defaultStartParams,
  '-c',
  'shared_buffers=32MB',
  '-c',
  'wal_init_zero=off',
];

const SYNCED_START_PARAMS = [
  ...PGLITE_START_PARAMS.filter((param) => param !== '-F'),
  '-c',
  'fsync=on',
  '-c',
  'wal_sync_method=fsync',
  '-c',
  'synchronous_commit=on',
];

/** The parts of emscripten's NODEFS and FS that the `fsync` operation needs. */
interface NodeFsInternals {
  stream_ops: { fsync?: (stream: { nfd: number; node: { mode: number } }) => number };
}
interface FsInternals {
  isDir(mode: number): boolean;
}

type NodeFsInit = NodeFS['init'];

const DIRECTORY_SYNC_UNSUPPORTED = new Set(['EISDIR', 'EBADF', 'EINVAL', 'EPERM', 'EACCES']);

/**
 * The exit code of the engine's own thread (pglite-thread.ts) after a failed fsync: there
 * `process.exit` ends the thread only, and the thread that started it stops the process on it.
 */
export const LOST_WRITE_THREAD_EXIT_CODE = 70;

/** See above: the process cannot go on after a failed fsync. Written as a fatal log line. */
function stopAfterLostWrite(error: unknown): never {
  const line = {
    level: 60,
    time: Date.now(),
    pid: process.pid,
    err: { message: String((error as Error).message ?? error) },
    msg: 'PGlite could not fsync its data directory; stopping (a restart recovers from the WAL)',
  };
  writeSync(2, `${JSON.stringify(line)}\n`);
  process.exit(isMainThread ? 1 : LOST_WRITE_THREAD_EXIT_CODE);
}

/** PGlite's NodeFS, with an `fsync` that reaches the disk. */
class SyncingNodeFS extends NodeFS {
  override async init(...args: Parameters<NodeFsInit>): ReturnType<NodeFsInit> {
    const { emscriptenOpts } = await super.init(...args);
    const addFsync = (mod: { NODEFS: unknown; FS: unknown }) => {
      const nodefs = mod.NODEFS as Partial<NodeFsInternals>;
      const fs = mod.FS as FsInternals;
      if (!nodefs.stream_ops)
        throw new Error(
          'this PGlite build has no NODEFS stream operations to add fsync to: it cannot run with DATA_DIR_DURABILITY=power-loss',
        );
      nodefs.stream_ops.fsync = (stream) => {
        const directory = fs.isDir(stream.node.mode);
        try {
          if (directory) fsyncSync(stream.nfd);
          else fdatasyncSync(stream.nfd);
        } catch (error) {
          // PostgreSQL ignores these for a directory: some file systems cannot sync one
          const code = (error as NodeJS.ErrnoException).code ?? '';
          if (!(directory && DIRECTORY_SYNC_UNSUPPORTED.has(code))) stopAfterLostWrite(error);
        }
        return 0;
      };
    };
    return {
      emscriptenOpts: { ...emscriptenOpts, preRun: [...(emscriptenOpts.preRun ?? []), addFsync] },
    };
  }
}

async function syncPath(path: string, directory: boolean): Promise<void> {
  let handle;
  try {
    handle = await open(path, 'r');
    await (directory ? handle.sync() : handle.datasync());
  } catch (error) {
    // PostgreSQL's fsync_fname makes the same exception: some systems cannot sync a directory
    const code = (error as NodeJS.ErrnoException).code ?? '';
    if (!directory || !DIRECTORY_SYNC_UNSUPPORTED.has(code)) throw error;
  } finally {
    await handle?.close();
  }
}

/** fsyncs every file and directory under `root`, and `root`'s own entry in its parent. */
async function syncTree(root: string): Promise<void> {
  const files: string[] = [];
  const directories: string[] = [];
  const list = async (directory: string) => {
    directories.push(directory);
    for (const entry of await readdir(directory, { withFileTypes: true })) {
      const path = join(directory, entry.name);
      if (entry.isDirectory()) await list(path);
      else if (entry.isFile()) files.push(path);
    }
  };
  await list(root);
  directories.push(dirname(root));
  // a few at a time: the thread pool runs 4, and a data directory holds about a thousand files
  const run = async (paths: string[], directory: boolean) => {
    let next = 0;
    const worker = async () => {
      while (next < paths.length) await syncPath(paths[next++] as string, directory);
    };
    await Promise.all(Array.from({ length: 8 }, worker));
  };
  await run(files, false);
  await run(directories, true);
}

/**
 * Opens PGlite on `dataDir` with the given durability. With `power-loss` (see above) it checks
 * that the engine really runs with fsync on, and syncs the directory, before anything is
 * written through it.
 */
export async function openPgliteDataDir(
  dataDir: string,
  durability: DataDirDurability,
  options: PGliteOptions,
): Promise<PGlite> {
  const marker = join(dataDir, SYNCED_MARKER);
  if (durability === 'process-crash') {
    // what this run writes is not synced: a later durable start must sync it all first
    await rm(marker, { force: true });
    await syncPath(dataDir, true);
    return PGlite.create(dataDir, { ...options, startParams: [...PGLITE_START_PARAMS] });
  }
  const db = await PGlite.create({
    ...options,
    fs: new SyncingNodeFS(dataDir),
    startParams: SYNCED_START_PARAMS,
  });
  try {
    const { rows } = await db.query<{ fsync: string; method: string }>(
      `SELECT current_setting('fsync') AS fsync, current_setting('wal_sync_method') AS method`,
    );
    const settings = rows[0];
    if (settings?.fsync !== 'on' || settings.method !== 'fsync')
      throw new Error(
        `PGlite started with fsync=${settings?.fsync} and wal_sync_method=${settings?.method}, not fsync=on and wal_sync_method=fsync`,
      );
    if (!existsSync(marker)) {
      await syncTree(dataDir);
      await writeFile(marker, 'every write in this directory has been synced\n');
      await syncPath(marker, false);
      await syncPath(dataDir, true);
    }
  } catch (error) {
    await db.close();
    throw error;
  }
  return db;
}
