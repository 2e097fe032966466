import { spawn } from 'node:child_process';

/** How a child `node` process ended, and how long it lived (wall clock, start-up included). */
export interface ChildResult {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/**
 * Runs an ES module source in a fresh `node` (with `nodeArgs`) (a host program of its own, with its own event loop
 * and exit), killing it past `timeoutMs` so that a process held forever fails the test instead of
 * hanging it.
 */
export function runNode(
  source: string,
  env: Record<string, string>,
  timeoutMs = 30_000,
  nodeArgs: string[] = [],
): Promise<ChildResult> {
  return new Promise<ChildResult>((resolve, reject) => {
    const started = Date.now();
    const child = spawn(process.execPath, [...nodeArgs, '--input-type=module', '-e', source], {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`child did not exit within ${timeoutMs} ms: ${stderr}`));
    }, timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    });
  });
}
