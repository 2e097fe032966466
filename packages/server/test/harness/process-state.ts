import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';

/**
 * The state letter of a process as Linux shows it (`R`, `S`, `Z` for a zombie, ...), or
 * undefined once it is gone (reaped).
 */
export function processState(pid: number): string | undefined {
  try {
    // `pid (comm) S ...`: comm may hold spaces and parentheses, the state follows the last `)`
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return undefined;
  }
}

/** Pids of the live (not zombie) children of `pid` whose command name is `name`. */
export function childrenNamed(pid: number, name: string): number[] {
  let out: string;
  try {
    out = execFileSync('pgrep', ['-P', String(pid), '-x', name], { encoding: 'utf8' });
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
  return out
    .split('\n')
    .filter(Boolean)
    .map(Number)
    .filter((child) => processState(child) !== 'Z');
}

/** Whether `unshare` can make a new pid namespace here (it needs root, as containers do). */
export function canUnsharePid(): boolean {
  try {
    execFileSync('unshare', ['--pid', '--fork', '--mount-proc', 'true'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** A live process unrelated to Flightlog (a `sleep`), whose pid a stale lock file can name. */
export function startUnrelatedProcess(): ChildProcess {
  const sleeper = spawn('sleep', ['600'], { stdio: 'ignore' });
  sleeper.unref();
  return sleeper;
}
