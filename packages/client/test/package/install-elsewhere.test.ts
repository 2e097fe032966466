import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';

/*
 * Issue 17: `import … from '@flightlog/client'` in a user's own project. The README's way: pack
 * the client and the protocol package, install both tarballs in a fresh directory (npm takes
 * their one registry dependency from its cache), and the client imports, runs and closes there.
 */
const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'flightlog-install-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const npm = (args: string[], cwd: string) =>
  execFileSync('npm', args, {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 120_000,
  });

it('installs from the packed tarballs into an empty project and records a run there, its instrumentations importable without their SDKs', () => {
  const packed = join(work, 'packed');
  mkdirSync(packed);
  npm(
    [
      'pack',
      '--silent',
      '-w',
      '@flightlog/protocol',
      '-w',
      '@flightlog/client',
      '--pack-destination',
      packed,
    ],
    ROOT,
  );
  const tarballs = readdirSync(packed).map((name) => join(packed, name));
  expect(tarballs.map((t) => t.replace(/.*\//, '')).sort()).toEqual([
    'flightlog-client-0.1.0.tgz',
    'flightlog-protocol-0.1.0.tgz',
  ]);

  const project = join(work, 'my-agent');
  mkdirSync(project);
  npm(['init', '-y'], project);
  npm(['install', '--prefer-offline', '--no-audit', '--no-fund', ...tarballs], project);
  writeFileSync(
    join(project, 'agent.mjs'),
    `import { FlightlogClient } from '@flightlog/client';
// Every instrumentation entry point imports without its SDK (optional peers, none installed here).
import { observeOpenAI } from '@flightlog/client/openai';
import { observeAnthropic } from '@flightlog/client/anthropic';
import { flightlogMiddleware } from '@flightlog/client/ai-sdk';
import { observeMcpClient } from '@flightlog/client/mcp';
import { observeSolanaConnection } from '@flightlog/client/solana';
import { observeX402Fetch } from '@flightlog/client/x402';
const wrappers = [observeOpenAI, observeAnthropic, flightlogMiddleware, observeMcpClient, observeSolanaConnection, observeX402Fetch];
if (!wrappers.every((w) => typeof w === 'function')) throw new Error('an instrumentation is missing');
const client = new FlightlogClient({ apiKey: 'flk_example', ingestUrl: 'http://127.0.0.1:9' });
const session = client.startSession({ inputSummary: 'Swap 1 SOL for USDC' });
const id = session.toolCall({ name: 'jupiter.quote', input: { amount: '1' } });
session.end({ outputSummary: 'done' });
await client.close();
console.log(typeof id === 'string' && id.length > 0 ? 'recorded' : 'no id');
`,
  );
  const output = execFileSync(process.execPath, ['agent.mjs'], {
    cwd: project,
    encoding: 'utf8',
    timeout: 60_000,
  });
  expect(output.trim().split('\n').pop()).toBe('recorded');
}, 180_000);
