import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The built CLI (`npm test` builds before running tests). */
export const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `flightlog <args>` to completion with only the given environment (plus PATH). */
export function runCli(
  args: string[],
  env: Record<string, string>,
  timeoutMs = 60_000,
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`flightlog ${args.join(' ')} timed out; stderr: ${stderr}`));
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

export interface ServeProcess {
  child: ChildProcess;
  url: string;
  /** Every log line printed so far. */
  output: () => string;
  exited: Promise<number | null>;
}

export interface WorkerProcess {
  child: ChildProcess;
  /** The id the worker claims jobs under (from its start-up log line). */
  workerId: string;
  output: () => string;
  exited: Promise<number | null>;
}

/**
 * Starts `flightlog <command>` and waits for the first match of `ready` in its output (the
 * first capture group is returned); fails if it exits or does not get there within a minute.
 * `wrapper` runs it under another program (e.g. `['strace', ...options]`): the child is then
 * the wrapper, which must pass the output through.
 */
async function startCliProcess(
  command: string,
  env: Record<string, string>,
  ready: RegExp,
  wrapper: string[] = [],
): Promise<{
  child: ChildProcess;
  match: string;
  output: () => string;
  exited: Promise<number | null>;
}> {
  const [program = process.execPath, ...args] = [...wrapper, process.execPath, CLI, command];
  const child = spawn(program, args, {
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  const match = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${command} did not start: ${output}`)),
      60_000,
    );
    const onData = (d: Buffer) => {
      output += d.toString();
      const found = ready.exec(output);
      if (found?.[1]) {
        clearTimeout(timer);
        resolve(found[1]);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${command} exited with ${code}: ${output}`));
    });
  });
  return { child, match, output: () => output, exited };
}

/**
 * Starts `flightlog serve` on a free port and waits until it listens; under `wrapper` when
 * given (see startCliProcess).
 */
export async function startServeProcess(
  env: Record<string, string>,
  wrapper: string[] = [],
): Promise<ServeProcess> {
  const { match, ...started } = await startCliProcess(
    'serve',
    { PORT: '0', HOST: '127.0.0.1', ...env },
    /"url":"(http:\/\/[^"]+)"/,
    wrapper,
  );
  return { ...started, url: match };
}

/** Starts `flightlog worker` and waits for its start-up log line. */
export async function startWorkerProcess(env: Record<string, string>): Promise<WorkerProcess> {
  const { match, ...started } = await startCliProcess(
    'worker',
    env,
    /"workerId":"([^"]+)","msg":"analysis worker started"/,
  );
  return { ...started, workerId: match };
}
