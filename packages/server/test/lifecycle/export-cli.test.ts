import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable, Writable } from 'node:stream';
import type { Event } from '@flightlog/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintDevToken } from '../../src/auth/dev-token.js';
import { ExportInterruptedError, writeExport } from '../../src/cli/export-command.js';
import { at, llmCallEvent, newId, runBatch, traceSnapshot } from '../fixtures/batches.js';
import { newMasterKey, seal } from '../fixtures/runs.js';
import { runCli, startServeProcess, type ServeProcess } from '../harness/cli-process.js';
import { describeEngines } from '../harness/engines.js';
import { postBatch, send } from '../harness/http.js';
import { freshServiceLocation, type ServiceLocation } from '../harness/service-location.js';

const JWT_SECRET = 'export-cli-jwt-secret-0123456789abcdef';
const ADMIN_TOKEN = 'export-cli-admin-token-0123456789abcdef';

describeEngines('flightlog export [%s]', (engine) => {
  let service: ServiceLocation;
  let env: Record<string, string>;
  let dir: string;
  let server: ServeProcess | undefined;
  const agentId = 'export-cli';
  let viewer: string;

  beforeAll(async () => {
    service = freshServiceLocation(engine);
    dir = mkdtempSync(join(tmpdir(), 'flightlog-export-cli-'));
    env = { ...service.env, JWT_SECRET, ADMIN_TOKEN };
    const created = await runCli(['agent', 'create', '--id', agentId], env);
    expect(created.code, created.stderr).toBe(0);
    const { apiKey } = JSON.parse(created.stdout) as { apiKey: string };
    const granted = await runCli(
      ['member', 'grant', '--agent', agentId, '--user', 'viewer', '--role', 'viewer'],
      env,
    );
    expect(granted.code, granted.stderr).toBe(0);
    viewer = await mintDevToken(JWT_SECRET, 'viewer');

    server = await startServeProcess({ ...env, ANALYSIS_WORKER: 'off' });
    const key = newMasterKey();
    const decimals = runBatch({
      events: 2,
      trace: {
        startedAt: at(0),
        totalCostUsd: '0.10',
        totalLamports: '123456789012345678901234567890',
        anchorSlot: '18446744073709551617',
      },
    });
    const sealed = traceSnapshot({ startedAt: at(1_000), eventCount: 1 });
    const envelope: Event = {
      ...llmCallEvent(sealed.id, 0),
      payloadEncrypted: true,
      payload: seal({ secret: 'SEED-1' }, key),
    };
    const long = runBatch({ events: 1_500, trace: { startedAt: at(2_000) } });
    const late = runBatch({ trace: { startedAt: at(3_000), tags: ['late', 'café ✓'] } });
    for (const body of [
      decimals.body,
      { batchId: newId(), items: [{ trace: sealed, events: [envelope] }] },
      long.body,
      late.body,
    ]) {
      const res = await postBatch(server.url, apiKey, body);
      expect(res.status, res.text).toBe(202);
    }
  }, 180_000);

  afterAll(async () => {
    server?.child.kill('SIGKILL');
    await server?.exited;
    await service?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  const api = async (query = '') => {
    const res = await send(server!.url, `/v1/agents/${agentId}/export${query}`, undefined, {
      token: viewer,
    });
    expect(res.status, res.text).toBe(200);
    return res.text;
  };
  const cli = (args: string[]) => runCli(['export', '--agent', agentId, ...args], env, 120_000);

  it('writes the file the export route answers, line for line, with progress on stderr; also through the running server', async () => {
    const whole = await api();
    expect(whole.split('\n')).toHaveLength(5);

    // on PGlite the server holds DATA_DIR: the command goes through its admin API
    const out = join(dir, 'while-serving.ndjson');
    const served = await cli(['--out', out]);
    expect(served.code, served.stderr).toBe(0);
    expect(readFileSync(out, 'utf8')).toBe(whole);
    expect(served.stderr).toMatch(/^exported 4 runs, [\d.]+ MB in [\d.]+ s \([\d,]+ runs\/s\)$/m);
    expect(served.stdout).toBe('');

    const range = `?since=${at(1_000)}&until=${at(3_000)}`;
    const ranged = await cli(['--since', at(1_000), '--until', at(3_000), '--out', out]);
    expect(ranged.code, ranged.stderr).toBe(0);
    expect(readFileSync(out, 'utf8')).toBe(await api(range));
    expect(readFileSync(out, 'utf8').split('\n')).toHaveLength(3);

    const second = JSON.parse(whole.split('\n')[1] as string) as { cursor: string };
    const resumed = await cli(['--cursor', second.cursor]);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toBe(whole.split('\n').slice(2).join('\n'));

    // stopped: the command opens the store itself, and writes the same
    server!.child.kill('SIGTERM');
    expect(await server!.exited).toBe(0);
    server = undefined;
    const direct = join(dir, 'direct.ndjson');
    const alone = await cli(['--out', direct]);
    expect(alone.code, alone.stderr).toBe(0);
    expect(readFileSync(direct, 'utf8')).toBe(whole);
    expect(alone.stderr).toMatch(/^exported 4 runs/m);
    const toStdout = await cli([]);
    expect(toStdout.code, toStdout.stderr).toBe(0);
    expect(toStdout.stdout).toBe(whole);
  }, 180_000);

  it('refuses bad flags and unknown agents (exit 2, naming them)', async () => {
    const cases: [string[], RegExp][] = [
      [['--since', 'yesterday'], /--since must be an RFC 3339 date-time/],
      [['--until', '2026-02-30T00:00:00Z'], /--until must be an RFC 3339 date-time/],
      [['--since', at(2_000), '--until', at(1_000)], /--until must not be earlier than since/],
      [['--cursor', 'nope'], /--cursor is not a cursor/],
    ];
    for (const [args, message] of cases) {
      const refused = await cli(args);
      expect(refused.code, args.join(' ')).toBe(2);
      expect(refused.stderr).toMatch(message);
    }
    const unknown = await runCli(['export', '--agent', 'nobody'], env);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('no agent nobody');
    const missing = await runCli(['export'], env);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('missing --agent');
  }, 120_000);
});

describe('flightlog export: writing the file', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'flightlog-export-write-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const line = (n: number) => `{"trace":{"id":"r${n}"},"events":[],"cursor":"c${n}_x-${n}"}\n`;

  it('shows progress in place on a terminal', async () => {
    const shown: string[] = [];
    const tty = Object.assign(
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          shown.push(chunk.toString());
          done();
        },
      }),
      { isTTY: true },
    );
    const out = join(dir, 'tty.ndjson');
    const lines = Array.from({ length: 3 }, (_, i) => line(i + 1));
    const written = await writeExport(Readable.from(lines), { agentId: 'a', out }, { stream: tty });
    expect(written).toEqual({ runs: 3, bytes: lines.join('').length });
    expect(readFileSync(out, 'utf8')).toBe(lines.join(''));
    const text = shown.join('');
    // one line, rewritten in place (\r, clear), ended once the export is done
    expect(text.startsWith('\r\x1b[K')).toBe(true);
    expect(text.indexOf('\n')).toBe(text.length - 1);
    const CLEAR = '\r\x1b[K';
    expect(text.slice(text.lastIndexOf(CLEAR) + CLEAR.length)).toMatch(
      /^exported 3 runs, 0\.0 MB in [\d.]+ s \([\d,]+ runs\/s\)\n$/,
    );
  });

  it('cut short, keeps the whole lines and says which cursor resumes after them', async () => {
    const out = join(dir, 'cut.ndjson');
    // a connection that breaks after two lines and a half
    const source = Readable.from(
      (async function* () {
        yield line(1) + line(2).slice(0, 20);
        yield line(2).slice(20) + line(3).slice(0, 30);
        await new Promise((resolve) => setTimeout(resolve, 20));
        throw new Error('terminated');
      })(),
    );
    const stderr = new PassThrough();
    const failure = await writeExport(source, { agentId: 'a', out }, { stream: stderr }).catch(
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(ExportInterruptedError);
    expect((failure as Error).message).toBe(
      `the export stopped after 2 runs (terminated); the 2 runs are kept in ${out}, whole; ` +
        'resume after them with --cursor c2_x-2 (and the same --since/--until)',
    );
    expect(readFileSync(out, 'utf8')).toBe(line(1) + line(2));
  });
});
