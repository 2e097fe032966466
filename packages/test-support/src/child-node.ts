import { spawn } from 'node:child_process';

/** How a child `node` process ended, and how long it lived (wall clock, start-up included). */
export interface ChildResult {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/**
 * Runs `node <argv>` with only `env` (plus PATH) to its end, killing it past `timeoutMs` so that
 * a process held forever fails the test instead of hanging it.
 */
function runChild(argv: string[], env: Record<string, string>, timeoutMs: number) {
  return new Promise<ChildResult>((resolve, reject) => {
    const started = Date.now();
    const child = spawn(process.execPath, argv, {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`node did not exit within ${timeoutMs} ms:\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    });
  });
}

/**
 * Runs an ES module source in a fresh `node` (with `nodeArgs`): a host program of its own, with
 * its own event loop and exit.
 */
export function runNode(
  source: string,
  env: Record<string, string>,
  timeoutMs = 30_000,
  nodeArgs: string[] = [],
): Promise<ChildResult> {
  return runChild([...nodeArgs, '--input-type=module', '-e', source], env, timeoutMs);
}

/** Runs the script `file` with `args` in a fresh `node`, as a command is run. */
export function runNodeFile(
  file: string,
  args: string[],
  env: Record<string, string>,
  timeoutMs = 60_000,
): Promise<ChildResult> {
  return runChild([file, ...args], env, timeoutMs);
}
