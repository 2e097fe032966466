import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { lockPgliteDataDir } from './pglite-client.js';
import { LOST_WRITE_THREAD_EXIT_CODE, type DataDirDurability } from './pglite-durability.js';
import type {
  CrossedError,
  PgliteReply,
  PgliteRequest,
  PgliteRows,
  PgliteThreadData,
} from './pglite-thread.js';
import type { SqlClient, SqlExecutor } from './sql-client.js';
import { translateDriverError } from './store-unavailable.js';

/** The longest `close` waits for the engine to shut down cleanly before its thread is ended. */
const CLOSE_DEADLINE_MS = 10_000;

/**
 * The compiled thread: next to this module when running the build; when this module runs from
 * the TypeScript sources (the tests), the build's copy (`npm test` builds first).
 */
function threadFile(): URL {
  const here = new URL('./pglite-thread.js', import.meta.url);
  if (existsSync(fileURLToPath(here))) return here;
  return new URL('../../dist/store/pglite-thread.js', import.meta.url);
}

function restored(crossed: CrossedError): Error {
  const error = new Error(crossed.message);
  error.name = crossed.name;
  return Object.assign(error, crossed.fields);
}

interface Call {
  resolve: (rows: unknown[] | undefined) => void;
  reject: (error: Error) => void;
}

/**
 * The embedded engine on a thread of its own (pglite-thread.ts), behind the same SqlClient as
 * in this thread (pglite-client.ts); `PGLITE_THREAD=worker`. PGlite runs every statement, and
 * each commit's fsync, on the thread that calls it: on the event loop, a long statement holds
 * every other request (health checks, live streams, the parsing of the next bodies) for as long
 * as it runs. On its own thread the engine can work on another core while this one parses,
 * validates and answers, as with PostgreSQL. The data directory is locked by this thread, so
 * the lock's errors are the same as in-process; driver errors come back as they were and are
 * translated here.
 */
export async function openPgliteThreadClient(
  dataDir: string | undefined,
  durability: DataDirDurability = 'power-loss',
): Promise<SqlClient> {
  const unlock = await lockPgliteDataDir(dataDir);
  let worker: Worker;
  try {
    worker = new Worker(threadFile(), {
      workerData: { dataDir, durability } satisfies PgliteThreadData,
      // the process's flags but for those of its entry (`--input-type` of an `-e` script)
      execArgv: process.execArgv.filter((flag) => !flag.startsWith('--input-type')),
    });
  } catch (error) {
    await unlock();
    throw error;
  }
  const calls = new Map<number, Call>();
  let nextCall = 1;
  let nextTransaction = 1;
  /** Set once the thread cannot answer any more: every call then fails with it. */
  let closedWith: Error | undefined;
  let opened: Call | undefined;
  const ready = new Promise<unknown>((resolve, reject) => {
    opened = { resolve, reject };
  });

  /** The call whose rows are the next message (see PgliteReply). */
  let rowsOf: number | undefined;
  const settle = (id: number, outcome: { rows: unknown[] | undefined } | { error: Error }) => {
    const call = id === 0 ? opened : calls.get(id);
    if (call === undefined) return;
    calls.delete(id);
    // An idle engine does not keep the process alive; one that is answering a call does.
    if (calls.size === 0) worker.unref();
    if ('error' in outcome) call.reject(outcome.error);
    else call.resolve(outcome.rows);
  };
  worker.on('message', (message: PgliteReply | PgliteRows) => {
    if (rowsOf !== undefined) {
      const id = rowsOf;
      rowsOf = undefined;
      const rows = message as PgliteRows;
      settle(id, 'rows' in rows ? { rows: rows.rows } : { error: restored(rows.error) });
      return;
    }
    const reply = message as PgliteReply;
    if (!reply.ok) settle(reply.id, { error: restored(reply.error) });
    else if (reply.rowsFollow) rowsOf = reply.id;
    else settle(reply.id, { rows: undefined });
  });
  // Rows this thread cannot take in: that call fails, the others go on.
  worker.on('messageerror', (error) => {
    if (rowsOf === undefined) return;
    const id = rowsOf;
    rowsOf = undefined;
    settle(id, { error: new Error(`rows that cannot reach this thread: ${error.message}`) });
  });
  const gone = (why: string) => {
    closedWith ??= new Error(`PGlite is closed: its thread ${why}`);
    const waiting = [...calls.values()];
    calls.clear();
    opened?.reject(closedWith);
    for (const call of waiting) call.reject(closedWith);
  };
  worker.on('error', (error) => gone(`failed: ${error.message}`));
  worker.on('exit', (code) => {
    // A lost write: the process stops as it does with the engine in this thread, before a
    // waiting request is answered (pglite-durability.ts).
    if (code === LOST_WRITE_THREAD_EXIT_CODE) process.exit(1);
    gone(`exited with code ${code}`);
  });

  function call(request: PgliteRequest): Promise<unknown[] | undefined> {
    if (closedWith !== undefined) return Promise.reject(closedWith);
    return new Promise((resolve, reject) => {
      calls.set(request.id, { resolve, reject });
      if (calls.size === 1) worker.ref();
      try {
        worker.postMessage(request);
      } catch (error) {
        // a parameter that cannot be copied to the engine's thread (a bug of the caller's)
        calls.delete(request.id);
        reject(error as Error);
      }
    });
  }

  async function query<Row>(sql: string, params: readonly unknown[], tx?: number) {
    try {
      const id = nextCall++;
      const rows = await call(
        tx === undefined ? { id, op: 'query', sql, params } : { id, op: 'query', sql, params, tx },
      );
      return (rows ?? []) as Row[];
    } catch (error) {
      return translateDriverError(error);
    }
  }

  try {
    await ready;
  } catch (error) {
    await worker.terminate();
    await unlock();
    throw error;
  }
  worker.unref();

  let closing: Promise<void> | undefined;
  return {
    engine: 'pglite',
    query: <Row>(sql: string, params: readonly unknown[] = []) => query<Row>(sql, params),
    async transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T> {
      const tx = nextTransaction++;
      try {
        await call({ id: nextCall++, op: 'begin', tx });
      } catch (error) {
        return translateDriverError(error);
      }
      let result: T;
      try {
        result = await work({
          query: <Row>(sql: string, params: readonly unknown[] = []) => query<Row>(sql, params, tx),
        });
      } catch (error) {
        await call({ id: nextCall++, op: 'end', tx, commit: false }).catch(() => undefined);
        return translateDriverError(error);
      }
      try {
        await call({ id: nextCall++, op: 'end', tx, commit: true });
      } catch (error) {
        return translateDriverError(error);
      }
      return result;
    },
    async ping() {
      await query('SELECT 1', []);
    },
    close() {
      closing ??= (async () => {
        if (closedWith === undefined) {
          let timer: NodeJS.Timeout | undefined;
          const deadline = new Promise<void>((resolve) => {
            timer = setTimeout(resolve, CLOSE_DEADLINE_MS);
            timer.unref();
          });
          await Promise.race([
            call({ id: nextCall++, op: 'close' }).catch(() => undefined),
            deadline,
          ]);
          clearTimeout(timer);
        }
        closedWith ??= new Error('PGlite is closed');
        await worker.terminate();
        await unlock();
      })();
      return closing;
    },
  };
}
