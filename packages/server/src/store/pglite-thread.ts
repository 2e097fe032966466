import { parentPort, workerData } from 'node:worker_threads';
import type { DataDirDurability } from './pglite-durability.js';
import { openPgliteEngine } from './pglite-client.js';
import type { SqlClient, SqlExecutor } from './sql-client.js';

/*
 * The embedded engine's own thread (see pglite-thread-client.ts): it opens PGlite on the data
 * directory the calling thread has locked and runs what that thread asks, one message per
 * statement. Errors go back as they came from the driver, for the calling thread to translate
 * into the store's own.
 */

/** What the thread is started with. */
export interface PgliteThreadData {
  dataDir: string | undefined;
  durability: DataDirDurability;
}

/** A request of the calling thread; `tx` names a transaction it opened with `begin`. */
export type PgliteRequest =
  | { id: number; op: 'query'; sql: string; params: readonly unknown[]; tx?: number }
  | { id: number; op: 'begin'; tx: number }
  | { id: number; op: 'end'; tx: number; commit: boolean }
  | { id: number; op: 'close' };

/** A driver's error as it crosses threads: its message, name and own fields (code, constraint…). */
export interface CrossedError {
  name: string;
  message: string;
  fields: Record<string, string | number | boolean>;
}

/**
 * The answer to one request; the first message of all (`id` 0) says whether the engine opened.
 * Rows come in a message of their own right after `rowsFollow` (a PgliteRows): a value this
 * thread can send but the calling one cannot take in (JSON nested thousands of levels: that
 * thread's stack is smaller) is then known to be that call's.
 */
export type PgliteReply =
  { id: number; ok: true; rowsFollow?: true } | { id: number; ok: false; error: CrossedError };

/** The message after a reply with `rowsFollow`: its rows, or why they could not be sent. */
export type PgliteRows = { rows: unknown[] } | { error: CrossedError };

export function crossedError(error: unknown): CrossedError {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error), fields: {} };
  const fields: CrossedError['fields'] = {};
  for (const [key, value] of Object.entries(error)) {
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean')
      fields[key] = value;
  }
  return { name: error.name, message: error.message, fields };
}

/** Rolls a transaction back on purpose (never leaves this thread). */
const ROLLBACK = Symbol('rollback');

function rethrow(error: unknown): never {
  throw error;
}

async function serve(): Promise<void> {
  const port = parentPort;
  if (port === null) throw new Error('pglite-thread runs as a worker thread');
  const { dataDir, durability } = workerData as PgliteThreadData;
  const reply = (message: PgliteReply) => port.postMessage(message);
  const sendRows = (id: number, rows: unknown[]) => {
    reply({ id, ok: true, rowsFollow: true });
    try {
      port.postMessage({ rows } satisfies PgliteRows);
    } catch (error) {
      port.postMessage({ error: crossedError(error) } satisfies PgliteRows);
    }
  };
  let client: SqlClient;
  try {
    client = await openPgliteEngine(dataDir, durability, rethrow);
  } catch (error) {
    reply({ id: 0, ok: false, error: crossedError(error) });
    return;
  }
  const open = new Map<number, { executor: SqlExecutor; end: (commit: boolean) => void }>();
  const ended = new Map<number, Promise<void>>();

  const answer = (id: number, work: Promise<unknown[] | undefined>) => {
    work.then(
      (rows) => (rows === undefined ? reply({ id, ok: true }) : sendRows(id, rows)),
      (error: unknown) => reply({ id, ok: false, error: crossedError(error) }),
    );
  };

  port.on('message', (request: PgliteRequest) => {
    switch (request.op) {
      case 'query': {
        const executor = request.tx === undefined ? client : open.get(request.tx)?.executor;
        if (executor === undefined) {
          answer(request.id, Promise.reject(new Error('no such transaction')));
          return;
        }
        answer(request.id, executor.query(request.sql, request.params));
        return;
      }
      case 'begin': {
        const { id, tx } = request;
        let started = false;
        const done = client.transaction(async (executor) => {
          const commit = await new Promise<boolean>((end) => {
            open.set(tx, { executor, end });
            started = true;
            reply({ id, ok: true });
          });
          if (!commit) throw ROLLBACK;
        });
        const settled = done.then(
          () => undefined,
          (error: unknown) => (error === ROLLBACK ? undefined : Promise.reject(error)),
        );
        // A transaction that could not start answers its begin; one that did, its end.
        settled.catch((error: unknown) => {
          if (!started) reply({ id, ok: false, error: crossedError(error) });
        });
        ended.set(tx, settled);
        return;
      }
      case 'end': {
        const transaction = open.get(request.tx);
        const settled = ended.get(request.tx);
        open.delete(request.tx);
        ended.delete(request.tx);
        if (transaction === undefined || settled === undefined) {
          answer(request.id, Promise.reject(new Error('no such transaction')));
          return;
        }
        transaction.end(request.commit);
        answer(
          request.id,
          settled.then(() => undefined),
        );
        return;
      }
      case 'close':
        // the calling thread ends this one once it has the answer
        answer(
          request.id,
          client.close().then(() => undefined),
        );
        return;
    }
  });
  reply({ id: 0, ok: true });
}

void serve();
