import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { PgliteThread } from '../../src/store/sql-client.js';
import { openTestStore } from '../harness/engines.js';

/**
 * The longest the event loop went without running a 5 ms timer while `work` ran, in ms (the
 * stretch up to the end of `work` counted too: a loop blocked throughout never fires at all).
 */
async function longestStall(work: () => Promise<unknown>): Promise<number> {
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 5);
  try {
    await work();
  } finally {
    clearInterval(timer);
  }
  return Math.max(longest, performance.now() - last);
}

describe('PGlite on a thread of its own', () => {
  it.each([
    ['worker', (stall: number) => expect(stall).toBeLessThan(200)],
    // the comparison that shows the measure can fail: on the event loop, the loop waits it out
    ['main', (stall: number) => expect(stall).toBeGreaterThanOrEqual(380)],
  ] as const)(
    'a 0.4 s statement on the %s thread, and how long the event loop stalls meanwhile',
    async (thread: PgliteThread, check: (stall: number) => void) => {
      const t = await openTestStore('pglite', { pgliteThread: thread });
      try {
        const stall = await longestStall(() => t.store.sql.query('SELECT pg_sleep(0.4)'));
        check(stall);
      } finally {
        await t.dispose();
      }
    },
  );

  it('fails only the call whose rows are too deeply nested to reach this thread, and goes on', async () => {
    const t = await openTestStore('pglite', { pgliteThread: 'worker' });
    try {
      // 20,000 levels: the engine's thread parses them, this thread's smaller stack cannot
      // take them in (it used to wait for that answer for ever)
      const deep = t.store.sql.query(
        `SELECT (repeat('[', 20000) || repeat(']', 20000))::json AS j`,
      );
      const beside = t.store.sql.query<{ n: number }>('SELECT 1 AS n');
      await expect(deep).rejects.toThrow(/Maximum call stack size exceeded/);
      await expect(beside).resolves.toEqual([{ n: 1 }]);
      await expect(t.store.sql.query('SELECT 2 AS n')).resolves.toEqual([{ n: 2 }]);
    } finally {
      await t.dispose();
    }
  });

  it('keeps a process alive while a call waits for its answer, and not once it is idle', () => {
    const server = fileURLToPath(new URL('../../dist/index.js', import.meta.url));
    // no other handle of its own: an engine thread that were not held while it answers would
    // let the process end before 'answered'; one held while idle would keep it running forever
    const script = `
      const { openStore } = await import(${JSON.stringify(server)});
      const store = await openStore({});
      store.sql.query('SELECT pg_sleep(0.3)').then(() => console.log('answered'));
    `;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(child.error).toBeUndefined();
    expect(child.stdout.trim()).toBe('answered');
    expect(child.status, child.stderr).toBe(0);
  });
});
