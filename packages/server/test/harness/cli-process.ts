import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { runNodeFile, type ChildResult } from '@flightlog/test-support';

/** The built CLI (`npm test` builds before running tests). */
export const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

export type CliResult = ChildResult;

/** Runs `flightlog <args>` to completion with only the given environment (plus PATH). */
export function runCli(
  args: string[],
  env: Record<string, string>,
  timeoutMs = 60_000,
): Promise<CliResult> {
  return runNodeFile(CLI, args, env, timeoutMs);
}

export interface ServeProcess {
  /** The process started: `flightlog serve` itself, or the shell it runs under. */
  child: ChildProcess;
  /** The pid of `flightlog serve` itself (from its log). */
  pid: number;
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
 * How a process is started:
 * - `none`: as a child of this process;
 * - `supervisor-shell`: under a shell that waits for it, the two of them a process group of their
 *   own, as under a supervisor (which kills the group); the shell exits with the process's code;
 * - `unreaping-parent`: under a parent (`sleep`) that never reaps it, in a group of their own, so
 *   that a killed process stays a zombie;
 * - a command (`['strace', '-f', …]`): run with `node cli.js <command>` appended to it.
 */
export type CliWrapper = 'none' | 'supervisor-shell' | 'unreaping-parent' | string[];

function spawnCli(command: string, env: Record<string, string>, wrapper: CliWrapper): ChildProcess {
  const options: SpawnOptions = { env, stdio: ['ignore', 'pipe', 'pipe'] };
  if (wrapper === 'none') return spawn(process.execPath, [CLI, command], options);
  if (Array.isArray(wrapper)) {
    const [program = process.execPath, ...args] = [...wrapper, process.execPath, CLI, command];
    return spawn(program, args, options);
  }
  const script =
    wrapper === 'supervisor-shell'
      ? '"$@"; code=$?; echo "flightlog exited with $code"; exit $code'
      : '"$@" & exec sleep 600';
  return spawn('sh', ['-c', script, 'sh', process.execPath, CLI, command], {
    ...options,
    detached: true,
  });
}

/**
 * Starts `flightlog <command>` and waits for the first match of `ready` in its output (the
 * first capture group is returned); fails if it exits or does not get there within a minute.
 */
async function startCliProcess(
  command: string,
  env: Record<string, string>,
  ready: RegExp,
  wrapper: CliWrapper = 'none',
): Promise<{
  child: ChildProcess;
  match: string;
  output: () => string;
  exited: Promise<number | null>;
}> {
  const child = spawnCli(
    command,
    { PATH: process.env.PATH ?? '', LOG_LEVEL: 'info', ...env },
    wrapper,
  );
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
    // an unreaping parent outlives its child: the child's death shows as its message alone
    if (wrapper === 'unreaping-parent')
      child.stderr?.on('data', () => {
        if (/^flightlog: /m.test(output)) {
          clearTimeout(timer);
          reject(new Error(`${command} failed: ${output}`));
        }
      });
  });
  return { child, match, output: () => output, exited };
}

/**
 * Starts `flightlog serve` on a free port (unless `PORT` says which) and waits until it
 * listens; `wrapper` as for `CliWrapper`.
 */
export async function startServeProcess(
  env: Record<string, string>,
  wrapper: CliWrapper = 'none',
): Promise<ServeProcess> {
  const { match, ...started } = await startCliProcess(
    'serve',
    { PORT: '0', HOST: '127.0.0.1', ...env },
    /"url":"(http:\/\/[^"]+)"/,
    wrapper,
  );
  const pid = Number(/"pid":(\d+)[^\n]*"url":"http/.exec(started.output())?.[1]);
  return { ...started, pid, url: match };
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
