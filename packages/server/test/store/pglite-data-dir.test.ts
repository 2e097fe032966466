import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/store/open-store.js';
import type { DataDirDurability } from '../../src/store/pglite-durability.js';

/*
 * PGlite on a data directory (not in memory, as the other store tests run it), in both
 * durabilities: the engine runs with the settings each promises, and what any of the three
 * ways a commit happens wrote is there after a close and a reopen, also in the other mode; an
 * fsync that fails stops the process, and the next start recovers. That each commit is on disk
 * before its call resolves is watched from outside the process by
 * reliability/fsync-before-202.test.ts; that a SIGKILL keeps it, by reliability/crash.test.ts.
 */

const root = mkdtempSync(join(tmpdir(), 'flightlog-data-dir-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const SETTINGS = `SELECT current_setting('fsync') AS fsync,
  current_setting('wal_sync_method') AS "walSyncMethod",
  current_setting('synchronous_commit') AS "synchronousCommit",
  current_setting('shared_buffers') AS "sharedBuffers",
  current_setting('wal_init_zero') AS "walInitZero"`;

/** The WAL segment file the engine writes to now. */
async function currentWalSegment(store: Store): Promise<string> {
  const [row] = await store.sql.query<{ segment: string }>(
    `SELECT pg_walfile_name(pg_current_wal_lsn()) AS segment`,
  );
  if (row === undefined) throw new Error('no WAL position');
  return row.segment;
}

async function agentIds(store: Store): Promise<string[]> {
  const rows = await store.sql.query<{ id: string }>(
    `SELECT id FROM agents WHERE id LIKE 'dir-%' ORDER BY id`,
  );
  return rows.map((row) => row.id);
}

describe('PGlite in memory (tests, and a server without DATA_DIR)', () => {
  it('runs with the same 32 MB buffer cache', async () => {
    const store = await openStore({});
    try {
      const [row] = await store.sql.query<{ sharedBuffers: string }>(
        `SELECT current_setting('shared_buffers') AS "sharedBuffers"`,
      );
      expect(row?.sharedBuffers).toBe('32MB');
    } finally {
      await store.close();
    }
  });
});

describe.each<[DataDirDurability, DataDirDurability, object]>([
  // A buffer cache of 32 MB, not PostgreSQL's 128: the WASM memory holding it never shrinks.
  [
    'power-loss',
    'process-crash',
    {
      fsync: 'on',
      walSyncMethod: 'fsync',
      synchronousCommit: 'on',
      sharedBuffers: '32MB',
      walInitZero: 'off',
    },
  ],
  [
    'process-crash',
    'power-loss',
    { fsync: 'off', synchronousCommit: 'on', sharedBuffers: '32MB', walInitZero: 'off' },
  ],
])('PGlite on a data directory, DATA_DIR_DURABILITY=%s', (durability, other, settings) => {
  const dataDir = join(root, durability);

  it('runs the engine with the settings that durability needs', async () => {
    const store = await openStore({ dataDir, dataDirDurability: durability });
    try {
      const [row] = await store.sql.query(SETTINGS);
      expect(row).toMatchObject(settings);
    } finally {
      await store.close();
    }
  });

  // A new 16 MB segment was written whole with zeros (and synced) by the statement that needed
  // it: ~90 ms of one ingest statement on the event loop every 16 MB of WAL, the p99 at half rate.
  it('starts a new WAL segment without writing it whole first', async () => {
    const store = await openStore({ dataDir, dataDirDurability: durability });
    try {
      const first = await currentWalSegment(store);
      let segment = first;
      // commits of ~1 MB of WAL until the WAL has moved into a new segment, ~1 MB in at most
      await store.sql.query(`CREATE TABLE wal_filler (text text)`);
      for (let commits = 0; segment === first && commits < 40; commits++) {
        await store.sql.query(
          `INSERT INTO wal_filler
           SELECT md5(n::text) || repeat(chr(65 + n % 26), 990) FROM generate_series(1, 1000) n`,
        );
        segment = await currentWalSegment(store);
      }
      await store.sql.query(`DROP TABLE wal_filler`);
      expect(segment).not.toBe(first);
      const { size, blocks } = statSync(join(dataDir, 'pg_wal', segment));
      expect(size).toBe(16 * 1024 * 1024);
      // what the file holds on disk: what was written to it, not 16 MB of zeros
      expect(blocks * 512).toBeLessThan(8 * 1024 * 1024);
    } finally {
      await store.close();
    }
  });

  it('keeps what each kind of commit wrote across a close and a reopen, in either mode', async () => {
    const store = await openStore({ dataDir, dataDirDurability: durability });
    try {
      // a single statement outside a transaction: prepared, autocommit (the ingest hot path)
      await store.sql.query(`INSERT INTO agents (id, name) VALUES ($1, $2)`, ['dir-1', 'one']);
      // a transaction
      await store.sql.transaction(async (tx) => {
        await tx.query(`INSERT INTO agents (id, name) VALUES ($1, $2)`, ['dir-2', 'two']);
        await tx.query(`INSERT INTO agents (id, name) VALUES ($1, $2)`, ['dir-3', 'three']);
      });
      // a statement PGlite runs itself, unprepared (the leading comment keeps it from being
      // prepared, as DDL and utility statements are not)
      await store.sql.query(`/* unprepared */ INSERT INTO agents (id, name) VALUES ($1, $2)`, [
        'dir-4',
        'four',
      ]);
    } finally {
      await store.close();
    }
    const expected = ['dir-1', 'dir-2', 'dir-3', 'dir-4'];
    for (const mode of [durability, other, durability]) {
      const reopened = await openStore({ dataDir, dataDirDurability: mode });
      try {
        expect(await agentIds(reopened), `reopened with ${mode}`).toEqual(expected);
      } finally {
        await reopened.close();
      }
    }
  });
});

/**
 * A disk that fails a write-back: the process's fdatasync made to fail with EIO (as the kernel
 * reports a lost write) once a marker file exists, in every thread of a child process (loaded
 * with `--import`, which the engine's own thread inherits), that opens the data directory
 * through the built package, commits one row, then tries a second.
 */
const FAILING_FSYNC = `
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
const fdatasyncSync = fs.fdatasyncSync;
fs.fdatasyncSync = (fd) => {
  if (!fs.existsSync(process.env.FAILING_DISK_MARKER)) return fdatasyncSync(fd);
  throw Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' });
};
syncBuiltinESMExports();
`;
const FAILING_DISK = `
import { writeFileSync } from 'node:fs';
const [dataDir, server, pgliteThread] = process.argv.slice(1);
const { openStore } = await import(server);
const store = await openStore({ dataDir, dataDirDurability: 'power-loss', pgliteThread });
await store.sql.query('INSERT INTO agents (id, name) VALUES ($1, $2)', ['dir-acked', 'acked']);
writeFileSync(process.env.FAILING_DISK_MARKER, '');
await store.sql
  .query('INSERT INTO agents (id, name) VALUES ($1, $2)', ['dir-lost', 'lost'])
  .then(() => console.log('the second commit resolved'), (e) => console.log('the second commit failed', e.message));
console.log('still running');
`;

describe.each(['worker', 'main'] as const)(
  'PGlite on its %s thread, on a data directory whose fsync fails',
  (thread) => {
    it('stops the process with a fatal log line; the next start recovers what was acknowledged', async () => {
      const dataDir = join(root, `failing-disk-${thread}`);
      const server = fileURLToPath(new URL('../../dist/index.js', import.meta.url));
      const patch = join(root, 'failing-fsync.mjs');
      writeFileSync(patch, FAILING_FSYNC);
      const child = spawnSync(
        process.execPath,
        [
          '--import',
          pathToFileURL(patch).href,
          '--input-type=module',
          '-e',
          FAILING_DISK,
          dataDir,
          server,
          thread,
        ],
        {
          encoding: 'utf8',
          timeout: 60_000,
          env: { ...process.env, FAILING_DISK_MARKER: join(root, `failing-disk-${thread}.marker`) },
        },
      );
      expect(child.status, child.stderr).toBe(1);
      // it neither answered the second commit nor carried on
      expect(child.stdout).toBe('');
      const fatal = JSON.parse(child.stderr.trim().split('\n').at(-1) ?? '{}');
      expect(fatal).toMatchObject({ level: 60, err: { message: expect.stringContaining('EIO') } });
      expect(fatal.msg).toContain('could not fsync');

      const reopened = await openStore({ dataDir });
      try {
        expect(await agentIds(reopened)).toContain('dir-acked');
      } finally {
        await reopened.close();
      }
    });
  },
);
