import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/open-store.js';
import type { DataDirDurability } from '../../src/store/pglite-durability.js';
import { llmCallEvent, runBatch, traceSnapshot } from '../fixtures/batches.js';
import { runCli, startServeProcess, type ServeProcess } from '../harness/cli-process.js';
import { postBatch } from '../harness/http.js';

/*
 * "A 202 means durable" on the embedded engine, watched from outside the process: `flightlog
 * serve` on PGlite with a DATA_DIR runs under strace, which records every write, every fsync
 * and fdatasync, and every answer the process writes to a socket, in order (all three happen
 * on the process's main thread). Batches are posted one after another, alternately one
 * snapshot (one autocommit statement) and two snapshots of a trace (one transaction). For
 * each 202 the WAL written since the answer before must have been synced, file by file, after
 * its last write and before the 202 was written. With DATA_DIR_DURABILITY=process-crash the
 * same trace must show the WAL written but never synced: the test can tell the two apart.
 */

const BATCHES = 20;

/** Why strace cannot watch a process here, or undefined when it can. */
function straceMissing(): string | undefined {
  const probe = spawnSync('strace', ['-f', '-o', '/dev/null', '-e', 'trace=fsync', 'true'], {
    encoding: 'utf8',
  });
  if (probe.error) return `strace is not installed (${probe.error.message})`;
  if (probe.status !== 0) return `strace cannot trace processes here: ${probe.stderr.trim()}`;
  return undefined;
}

function describeWithStrace(title: string, body: () => void): void {
  const missing = straceMissing();
  if (missing === undefined) describe(title, body);
  else if (process.env.CI === 'true')
    describe(title, () => {
      it('has strace', () => {
        throw new Error(`${missing}: CI must run this test (.ci/run installs strace)`);
      });
    });
  else {
    process.stdout.write(`!!! SKIPPED "${title}": ${missing} !!!\n`);
    describe.skip(title, body);
  }
}

type TraceOp =
  | { kind: 'wal-write'; line: number; path: string }
  | { kind: 'sync'; line: number; path: string; ok: boolean }
  | { kind: 'answer-202'; line: number };

const SYNCS = new Set(['fsync', 'fdatasync']);
const WRITES = new Set(['write', 'writev', 'pwrite64', 'pwritev', 'pwritev2', 'sendto', 'sendmsg']);
const WAL_SEGMENT = /\/pg_wal\/[0-9A-F]{24}$/;

/**
 * The WAL writes, syncs and 202 answers of an `strace -f -y` log, in the order they happened.
 * A call another thread interrupted is split in two lines (`<unfinished ...>`, then `<...
 * resumed>`); a sync counts from the line that has its result.
 */
function readTrace(file: string): TraceOp[] {
  const ops: TraceOp[] = [];
  const unfinishedSyncs = new Map<string, string>();
  readFileSync(file, 'utf8')
    .split('\n')
    .forEach((text, line) => {
      const [, pid = '', rest = ''] = /^(\d+)\s+\S+\s+(.*)$/.exec(text) ?? [];
      const resumed = /^<\.\.\. (\w+) resumed>.*= (-?\d+)/.exec(rest);
      if (resumed) {
        const path = unfinishedSyncs.get(pid);
        if (path !== undefined && SYNCS.has(resumed[1] ?? ''))
          ops.push({ kind: 'sync', line, path, ok: resumed[2] === '0' });
        unfinishedSyncs.delete(pid);
        return;
      }
      const [, syscall = '', path = ''] = /^(\w+)\(\d+<([^>]*)>/.exec(rest) ?? [];
      if (SYNCS.has(syscall)) {
        if (rest.endsWith('<unfinished ...>')) unfinishedSyncs.set(pid, path);
        else ops.push({ kind: 'sync', line, path, ok: / = 0$/.test(rest) });
      } else if (WRITES.has(syscall)) {
        if (WAL_SEGMENT.test(path)) ops.push({ kind: 'wal-write', line, path });
        else if (/^(socket|TCP)/.test(path) && rest.includes('HTTP/1.1 202 '))
          ops.push({ kind: 'answer-202', line });
      }
    });
  return ops;
}

interface AnswerCheck {
  /** WAL segments written since the answer before. */
  walWritten: number;
  /** Of those, the ones not synced after their last write and before this answer. */
  unsynced: string[];
  /** Syncs of WAL segments since the answer before. */
  walSyncs: number;
}

/** For each 202 in the trace, what happened to the WAL between it and the answer before. */
function checkAnswers(ops: TraceOp[]): AnswerCheck[] {
  const checks: AnswerCheck[] = [];
  let window: TraceOp[] = [];
  for (const op of ops) {
    if (op.kind !== 'answer-202') {
      window.push(op);
      continue;
    }
    const lastWrite = new Map<string, number>();
    for (const w of window) if (w.kind === 'wal-write') lastWrite.set(w.path, w.line);
    const synced = (path: string, after: number) =>
      window.some((s) => s.kind === 'sync' && s.ok && s.path === path && s.line > after);
    checks.push({
      walWritten: lastWrite.size,
      unsynced: [...lastWrite].filter(([path, at]) => !synced(path, at)).map(([path]) => path),
      walSyncs: window.filter((s) => s.kind === 'sync' && WAL_SEGMENT.test(s.path)).length,
    });
    window = [];
  }
  return checks;
}

/** The batches of the run: odd ones carry two snapshots of one trace (a transaction). */
function batchesToPost() {
  return Array.from({ length: BATCHES }, (_, i) => {
    if (i % 2 === 0) return runBatch({ events: 3 }).body;
    const first = runBatch({ events: 1 });
    const trace = first.trace;
    const later = traceSnapshot({ ...trace, eventCount: 2 });
    return {
      ...first.body,
      items: [...first.body.items, { trace: later, events: [llmCallEvent(trace.id, 1)] }],
    };
  });
}

describeWithStrace('a 202 on PGlite follows the fsync of its commit (strace)', () => {
  const root = mkdtempSync(join(tmpdir(), 'flightlog-fsync-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  /**
   * Runs the server under strace on a fresh data directory in `durability`, posts the batches,
   * stops it, and returns the checks of each 202 and what a reopened store holds.
   */
  async function tracedRun(durability: DataDirDurability) {
    const dataDir = join(root, durability);
    const traceFile = join(root, `${durability}.strace`);
    const env = { DATA_DIR: dataDir, DATA_DIR_DURABILITY: durability };
    const created = await runCli(['agent', 'create', '--id', `fsync-${durability}`], env);
    expect(created.code, created.stderr).toBe(0);
    const { agentId, apiKey } = JSON.parse(created.stdout) as { agentId: string; apiKey: string };

    const strace = ['strace', '-f', '-tt', '-y', '-s', '64', '-o', traceFile];
    const syscalls = `trace=${[...SYNCS, ...WRITES].join(',')}`;
    let server: ServeProcess | undefined = await startServeProcess(
      { ...env, ANALYSIS_WORKER: 'off' },
      [...strace, '--seccomp-bpf', '-e', syscalls],
    );
    try {
      const batches = batchesToPost();
      for (const batch of batches) {
        const answer = await postBatch(server.url, apiKey, batch, { timeoutMs: 30_000 });
        expect(answer.status, answer.text).toBe(202);
      }
      // SIGTERM to the server itself (the child is strace), which exits once it has
      const pid = Number(/"pid":(\d+)/.exec(server.output())?.[1]);
      process.kill(pid, 'SIGTERM');
      expect(await server.exited).toBe(0);
      server = undefined;

      const store = await openStore({ dataDir, dataDirDurability: durability });
      let stored: number;
      try {
        const [row] = await store.sql.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM accepted_batches WHERE agent_id = $1',
          [agentId],
        );
        stored = row?.n ?? 0;
      } finally {
        await store.close();
      }
      return { checks: checkAnswers(readTrace(traceFile)), stored };
    } finally {
      if (server?.child.exitCode === null) server.child.kill('SIGKILL');
    }
  }

  let durable: Awaited<ReturnType<typeof tracedRun>>;
  let fast: Awaited<ReturnType<typeof tracedRun>>;
  beforeAll(async () => {
    durable = await tracedRun('power-loss');
    fast = await tracedRun('process-crash');
  }, 170_000);

  it('DATA_DIR_DURABILITY=power-loss (the default): every 202 after its WAL reached the disk', () => {
    expect(durable.checks).toHaveLength(BATCHES);
    for (const [i, check] of durable.checks.entries()) {
      // each batch committed: its WAL was written before its answer...
      expect(check.walWritten, `batch ${i}`).toBeGreaterThan(0);
      // ...and synced after that write, before the answer
      expect(check.unsynced, `batch ${i}`).toEqual([]);
    }
    expect(durable.stored).toBe(BATCHES);
  });

  it('DATA_DIR_DURABILITY=process-crash: the WAL is written before each 202, never synced', () => {
    expect(fast.checks).toHaveLength(BATCHES);
    for (const [i, check] of fast.checks.entries()) {
      expect(check.walWritten, `batch ${i}`).toBeGreaterThan(0);
      expect(check.walSyncs, `batch ${i}`).toBe(0);
      expect(check.unsynced, `batch ${i}`).toHaveLength(check.walWritten);
    }
    // what a clean stop leaves is all there
    expect(fast.stored).toBe(BATCHES);
  });
});

describeWithStrace('a durable start syncs what was written unsynced, once (strace)', () => {
  const root = mkdtempSync(join(tmpdir(), 'flightlog-start-sync-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const dataDir = join(root, 'data');
  const OPEN_STORE = new URL('../../dist/store/open-store.js', import.meta.url).href;

  /** fsync + fdatasync calls of a process that opens the store on `dataDir` and closes it. */
  function syncsOfOneStart(durability: DataDirDurability): number {
    const script = `const { openStore } = await import(${JSON.stringify(OPEN_STORE)});
      const store = await openStore({ dataDir: process.argv[1], dataDirDurability: process.argv[2] });
      await store.close();`;
    const traceFile = join(root, `${durability}-${Date.now()}.strace`);
    const traced = spawnSync(
      'strace',
      [
        '-f',
        '-o',
        traceFile,
        '-e',
        'trace=fsync,fdatasync',
        process.execPath,
        '--input-type=module',
        '-e',
        script,
        dataDir,
        durability,
      ],
      { encoding: 'utf8', timeout: 60_000 },
    );
    expect(traced.status, traced.stderr).toBe(0);
    return readFileSync(traceFile, 'utf8')
      .split('\n')
      .filter((line) => /\b(fsync|fdatasync)\(/.test(line)).length;
  }

  it('the first durable start of a directory syncs it whole; the next ones do not; after a process-crash run, it does again', () => {
    const first = syncsOfOneStart('power-loss'); // a new directory: initdb's files
    const second = syncsOfOneStart('power-loss');
    syncsOfOneStart('process-crash');
    const afterFast = syncsOfOneStart('power-loss');
    console.log(
      `[start syncs] new directory ${first}, restart ${second}, after a process-crash run ${afterFast}`,
    );
    // a data directory holds about a thousand files
    expect(first).toBeGreaterThan(500);
    expect(afterFast).toBeGreaterThan(500);
    expect(second).toBeLessThan(first / 5);
  });
});
