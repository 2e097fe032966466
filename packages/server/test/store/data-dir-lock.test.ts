import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  DataDirInUseError,
  LOCK_FILE,
  lockDataDir,
  type DataDirLock,
  type DataDirLockMechanism,
} from '../../src/store/data-dir-lock.js';
import { openPgliteClient } from '../../src/store/pglite-client.js';
import { startLockHolder, type LockHolder } from '../harness/lock-holder.js';
import {
  canUnsharePid,
  childrenNamed,
  processState,
  startUnrelatedProcess,
} from '../harness/process-state.js';
import { waitFor } from '../harness/wait.js';

const MECHANISMS: DataDirLockMechanism[] = ['file-lock', 'flock-command'];

const PID_NAMESPACES = canUnsharePid();
if (!PID_NAMESPACES)
  process.stdout.write(
    '!!! SKIPPED "holds across pid namespaces": unshare --pid does not work here (needs root) !!!\n',
  );

async function refusal(dataDir: string, mechanism: DataDirLockMechanism): Promise<unknown> {
  return lockDataDir(dataDir, { mechanism }).then(
    async (lock) => {
      await lock.release();
      throw new Error('the lock was granted');
    },
    (error: unknown) => error,
  );
}

describe.each(MECHANISMS)('the DATA_DIR lock [%s]', (mechanism) => {
  let dataDir: string;
  const locks: DataDirLock[] = [];
  const holders: LockHolder[] = [];

  beforeEach(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'flightlog-lock-'));
  });
  afterEach(async () => {
    for (const holder of holders.splice(0)) {
      holder.child.kill('SIGKILL');
      await holder.exited;
    }
    await Promise.all(locks.splice(0).map((lock) => lock.release()));
    rmSync(dataDir, { recursive: true, force: true });
  });

  const lock = async () => {
    const taken = await lockDataDir(dataDir, { mechanism });
    locks.push(taken);
    return taken;
  };
  const holder = async (options?: Parameters<typeof startLockHolder>[2]) => {
    const started = await startLockHolder(dataDir, mechanism, options);
    holders.push(started);
    return started;
  };

  it('is held by one holder at a time, in one process too, and is free again on release', async () => {
    const first = await lock();
    expect(first.mechanism).toBe(mechanism);
    expect(readFileSync(join(dataDir, LOCK_FILE), 'utf8').trim()).toBe(String(process.pid));
    const refused = await refusal(dataDir, mechanism);
    expect(refused).toBeInstanceOf(DataDirInUseError);
    expect((refused as DataDirInUseError).message).toBe(
      `DATA_DIR ${dataDir} is in use by process ${process.pid}. Stop it, or use the admin API of the running server.`,
    );
    await first.release();
    await first.release(); // idempotent
    const second = await lock();
    await second.release();
  });

  it("refuses while another process holds it, naming that process, and is free once it's SIGKILLed", async () => {
    const other = await holder();
    expect(other.line).toBe(`held ${other.pid}`);
    const refused = await refusal(dataDir, mechanism);
    expect((refused as DataDirInUseError).ownerPid).toBe(other.pid);
    expect((refused as Error).message).toContain(`is in use by process ${other.pid}`);

    other.child.kill('SIGKILL');
    await other.exited;
    const killedAt = Date.now();
    await lock();
    // the kernel let go with the process (flock-command: once its child saw our pipe close)
    expect(Date.now() - killedAt).toBeLessThan(1_000);
  });

  it('is not held by a killed holder that its parent has not reaped yet (a zombie)', async () => {
    const other = await holder({ wrapper: 'unreaping-parent' });
    expect(other.line).toBe(`held ${other.pid}`);
    process.kill(other.pid, 'SIGKILL');
    // the pid still exists, as a zombie, for as long as its parent (sleep) lives
    await waitFor(() => (processState(other.pid) === 'Z' ? true : undefined), 'a zombie');
    const killedAt = Date.now();
    await lock();
    expect(Date.now() - killedAt).toBeLessThan(1_000);
    expect(processState(other.pid)).toBe('Z');
  });

  it('is not held by a lock file that names a live process which is not holding it (a reused pid)', async () => {
    const sleeper = startUnrelatedProcess();
    try {
      for (const pid of [sleeper.pid as number, process.pid, 1]) {
        writeFileSync(join(dataDir, LOCK_FILE), `${pid}\n`);
        const taken = await lockDataDir(dataDir, { mechanism });
        expect(readFileSync(join(dataDir, LOCK_FILE), 'utf8').trim()).toBe(String(process.pid));
        await taken.release();
      }
      // another process, too
      writeFileSync(join(dataDir, LOCK_FILE), `${sleeper.pid}\n`);
      const other = await holder();
      expect(other.line).toMatch(/^held \d+$/);
    } finally {
      sleeper.kill('SIGKILL');
    }
  });

  // Two containers sharing a volume: each holder is pid 1 of its own pid namespace.
  it.skipIf(!PID_NAMESPACES)(
    'holds across pid namespaces, where both holders are pid 1 (two containers, one volume)',
    async () => {
      const first = await holder({ wrapper: 'own-pid-namespace' });
      expect(first.line).toBe('held 1');
      const second = await holder({ wrapper: 'own-pid-namespace' });
      expect(second.line).toBe(
        `refused DATA_DIR ${dataDir} is in use by process 1. Stop it, or use the admin API of the running server.`,
      );
      expect(await second.exited).toBe(3);
      // from here, pid 1 is another process (init) and the message names the pid it can see
      expect(((await refusal(dataDir, mechanism)) as DataDirInUseError).ownerPid).toBe(1);

      first.child.kill('SIGKILL');
      await first.exited;
      const third = await holder({ wrapper: 'own-pid-namespace' });
      expect(third.line).toBe('held 1');
    },
  );
});

describe('the DATA_DIR lock held by a flock child process', () => {
  let dataDir: string;
  beforeEach(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'flightlog-lock-'));
  });
  afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

  it('leaves no process behind after release', async () => {
    const lock = await lockDataDir(dataDir, { mechanism: 'flock-command' });
    const [flock] = childrenNamed(process.pid, 'flock');
    // flock runs the shell that became `cat`, and both hold the lock
    const [cat] = childrenNamed(flock as number, 'cat');
    expect(cat).toBeDefined();
    await lock.release();
    expect(processState(flock as number)).toBeUndefined();
    expect(processState(cat as number)).toBeUndefined();
    await lockDataDir(dataDir, { mechanism: 'file-lock' }).then((again) => again.release());
  });

  it.each(['the holder alone', 'its whole process group'])(
    'is free at once when %s is SIGKILLed',
    async (what) => {
      // detached: the holder leads a process group of its own, with its flock child in it
      const other = await startLockHolder(dataDir, 'flock-command', { detached: true });
      const [child] = childrenNamed(other.pid, 'flock');
      expect(child).toBeDefined();
      process.kill(what === 'the holder alone' ? other.pid : -other.pid, 'SIGKILL');
      await other.exited;
      const killedAt = Date.now();
      const lock = await lockDataDir(dataDir, { mechanism: 'flock-command' });
      const waitedMs = Date.now() - killedAt;
      await lock.release();
      expect(waitedMs).toBeLessThan(1_000);
      await waitFor(
        () => (processState(child as number) === undefined ? true : undefined),
        'the flock child gone',
      );
    },
  );

  it('refuses to open, saying what to do, where flock cannot run', async () => {
    const holder = await startLockHolder(dataDir, 'flock-command', {
      env: { PATH: join(dataDir, 'no-such-bin') },
    });
    expect(await holder.exited).toBe(4);
    expect(holder.line).toMatch(
      /^failed cannot lock DATA_DIR .*flock could not run: spawn flock ENOENT.*Install flock \(util-linux or BusyBox\), or use PostgreSQL \(DATABASE_URL\)\.$/,
    );
  });
});

describe('the embedded engine on a locked DATA_DIR', () => {
  it('opens a data directory once at a time in one process, and again after close', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'flightlog-lock-'));
    try {
      const first = await openPgliteClient(dataDir);
      await expect(openPgliteClient(dataDir)).rejects.toThrow(
        `DATA_DIR ${dataDir} is in use by process ${process.pid}`,
      );
      await first.close();
      const second = await openPgliteClient(dataDir);
      expect(await second.query('SELECT 1 AS one')).toEqual([{ one: 1 }]);
      await second.close();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 120_000);
});
