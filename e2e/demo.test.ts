import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runNodeFile } from '@flightlog/test-support';

/**
 * The `flightlog` command, as the server package's `bin` names it (`npm test` builds it first;
 * `npm ci` links no bin whose file is not built yet, so it is found through the package).
 */
const SERVER_PACKAGE = dirname(
  createRequire(import.meta.url).resolve('@flightlog/server/package.json'),
);
const CLI = join(
  SERVER_PACKAGE,
  (
    JSON.parse(readFileSync(join(SERVER_PACKAGE, 'package.json'), 'utf8')) as {
      bin: { flightlog: string };
    }
  ).bin.flightlog,
);
/** The repository's example agent, which `npm run demo` hands to the command. */
const EXAMPLE_AGENT = fileURLToPath(new URL('../examples/swap-agent.mjs', import.meta.url));

function runDemo(args: string[], timeoutMs: number) {
  return runNodeFile(CLI, ['demo', '--once', ...args], { PORT: '0', HOST: '127.0.0.1' }, timeoutMs);
}

describe('flightlog demo, end to end (a child process)', () => {
  it('runs the example agent through four runs, tails them live, prints where to read them, and exits 0', async () => {
    const { code, stdout, stderr } = await runDemo(['--agent-script', EXAMPLE_AGENT], 150_000);
    expect(stderr).toBe('');
    expect(code, stdout).toBe(0);

    const runs = [
      ...stdout.matchAll(/^agent {2}((?:encrypted )?[\w-]+) run (\w+): trace (\w+)$/gm),
    ].map((m) => ({ scenario: m[1], status: m[2], traceId: m[3] as string }));
    expect(runs.map((r) => [r.scenario, r.status])).toEqual([
      ['swap', 'completed'],
      ['failed-tx', 'errored'],
      ['tool-loop', 'errored'],
      ['encrypted swap', 'completed'],
    ]);
    for (const run of runs) {
      // the live tail saw each run reach its final status
      expect(stdout).toMatch(new RegExp(`^live {3}${run.traceId.slice(-8)} ${run.status}`, 'm'));
      expect(stdout).toContain(`/v1/traces/${run.traceId} -H 'Authorization: Bearer `);
      expect(stdout).toContain(`/v1/traces/${run.traceId}/analysis`);
    }
    expect(stdout).toMatch(/error: Transaction simulation failed: insufficient funds/);
    expect(stdout).toMatch(/error: Tool loop: dex\.getPrice called 6 times/);
    expect(stdout).toMatch(
      /completed "Swap 1 SOL for USDC" .*lamports=1000000000 \(payloads encrypted\)/,
    );
    expect(stdout).toContain('Agent verified by its first batch: yes');
    expect(stdout).toContain('Done (--once).');
    // the temporary data directory is gone
    const dataDir = /data in (\S+)\)/.exec(stdout)?.[1];
    expect(dataDir).toBeDefined();
    expect(existsSync(dataDir as string)).toBe(false);
  }, 160_000);

  it('without an example agent, stores a sample run itself and shows it live', async () => {
    const { code, stdout, stderr } = await runDemo([], 60_000);
    expect(stderr).toBe('');
    expect(code, stdout).toBe(0);
    expect(stdout).toContain(
      'No example agent given (--agent-script FILE); storing one sample run instead.',
    );
    const traceId = /^ {2}sample \(stored \(202\)\):$\n.*\/v1\/traces\/(\w+) /m.exec(stdout)?.[1];
    expect(traceId, stdout).toBeDefined();
    expect(stdout).toMatch(new RegExp(`^live {3}${(traceId as string).slice(-8)} completed`, 'm'));
    expect(stdout).toContain('Done (--once).');
  }, 70_000);

  it('refuses an example agent that is not there, naming it', async () => {
    const { code, stderr } = await runDemo(['--agent-script', 'no/such/agent.mjs'], 30_000);
    expect(code).toBe(2);
    expect(stderr).toContain('--agent-script no/such/agent.mjs: no such file');
  });
});
