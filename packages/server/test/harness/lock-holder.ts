import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { DataDirLockMechanism } from '../../src/store/data-dir-lock.js';

/** The built lock module (`npm test` builds before running tests), for other processes. */
const LOCK_MODULE = fileURLToPath(new URL('../../dist/store/data-dir-lock.js', import.meta.url));

/**
 * A process that takes the DATA_DIR lock and holds it until SIGTERM (then releases it and exits
 * 0), prints `held <pid>` once it holds it, `refused <message>` (exit 3) when another holder has
 * it, or `failed <message>` (exit 4) on any other error.
 */
const HOLDER = `
const [dataDir, mechanism] = process.argv.slice(1);
const { lockDataDir, DataDirInUseError } = await import(process.env.LOCK_MODULE);
try {
  const lock = await lockDataDir(dataDir, { mechanism });
  process.stdout.write('held ' + process.pid + '\\n');
  setInterval(() => {}, 60_000);
  process.once('SIGTERM', () => lock.release().then(() => process.exit(0)));
} catch (error) {
  const refused = error instanceof DataDirInUseError;
  process.stdout.write((refused ? 'refused ' : 'failed ') + error.message.split('\\n')[0] + '\\n');
  process.exit(refused ? 3 : 4);
}
`;

/** How the holder is started: directly, or under a wrapper that changes what its pid means. */
export type HolderWrapper =
  /** a child of this process */
  | 'none'
  /** the child of a parent that never reaps it (`sleep`), so that once killed it stays a zombie */
  | 'unreaping-parent'
  /** pid 1 of a pid namespace of its own, as in a container */
  | 'own-pid-namespace';

export interface LockHolder {
  /** The process started (the wrapper, when there is one). */
  child: ChildProcess;
  /** The line the holder printed: `held <pid>`, `refused ...` or `failed ...`. */
  line: string;
  /**
   * The holder's pid; for a namespace, the pid of `unshare`, whose death takes the namespace
   * (and the holder) down with it.
   */
  pid: number;
  exited: Promise<number | null>;
}

/** Starts a lock holder for `dataDir` and waits for its first line. */
export async function startLockHolder(
  dataDir: string,
  mechanism: DataDirLockMechanism,
  options: {
    wrapper?: HolderWrapper;
    env?: Record<string, string>;
    /** Leads a process group of its own (with its children), as under a supervisor. */
    detached?: boolean;
  } = {},
): Promise<LockHolder> {
  const node = [process.execPath, '--input-type=module', '-e', HOLDER, dataDir, mechanism];
  const wrapper = options.wrapper ?? 'none';
  const [command, ...args] =
    wrapper === 'unreaping-parent'
      ? // sh starts the holder in the background, says its pid, and becomes `sleep`
        ['sh', '-c', '"$@" & echo "pid $!"; exec sleep 600', 'sh', ...node]
      : wrapper === 'own-pid-namespace'
        ? ['unshare', '--pid', '--fork', '--kill-child', '--mount-proc', ...node]
        : node;
  const child = spawn(command as string, args, {
    env: { PATH: process.env.PATH ?? '', LOCK_MODULE, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.detached ?? false,
  });
  let output = '';
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  const line = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`lock holder silent: ${output}`)), 30_000);
    const onData = (d: Buffer) => {
      output += d.toString();
      const found = /^(held|refused|failed) .*$/m.exec(output);
      if (found && (wrapper !== 'unreaping-parent' || /^pid \d+$/m.test(output))) {
        clearTimeout(timer);
        resolve(found[0]);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`lock holder exited with ${code}: ${output}`));
    });
  });
  const wrapped = /^pid (\d+)$/m.exec(output)?.[1];
  const held = /^held (\d+)$/m.exec(line)?.[1];
  const pid =
    wrapper === 'unreaping-parent'
      ? Number(wrapped)
      : wrapper === 'own-pid-namespace'
        ? (child.pid as number)
        : Number(held ?? child.pid);
  return { child, line, pid, exited };
}
