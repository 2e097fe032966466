// The ingest benchmark's request bodies: the two mixes, and a pool of unique gzip bodies that
// worker threads fill before each run (gzip of a large body costs ~0.2-0.4 ms; a run of the bare
// HTTP baseline uses tens of thousands), so the load generator spends no CPU on data during a
// measurement. Every body is built for one request alone: fresh batch, trace and event ids.

import os from 'node:os';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { gzipSync } from 'node:zlib';
import { monotonicFactory } from 'ulidx';
import { createItemFactory } from './support.mjs';

/** @typedef {import('./batch-statement.mjs').Batch} Batch */

/**
 * A number per side of the ingest benchmark: the service, the naive server (d), the bare HTTP
 * server (a) and the database baseline (b / c).
 * @typedef {{ service: number, naive: number, http: number, db: number }} SideRates
 */

/**
 * @typedef {object} Mix what the batches of a run carry
 * @property {string} name
 * @property {string} description
 * @property {(i: number) => number} eventCount
 * @property {number} meanEvents
 * @property {SideRates} initialRates
 */

/**
 * Batch mixes: `eventCount(i)` is the number of events of the i-th batch of a run, one trace
 * snapshot per batch either way.
 * @type {{ large: Mix, small: Mix }}
 */
export const MIXES = {
  large: {
    name: 'large',
    description: '1 trace + 20 llm_call events (~400-character messages)',
    eventCount: () => 20,
    meanEvents: 20,
    /** Rates (batches/s) to fill the first run's pool for; later runs use the fastest seen. */
    initialRates: { service: 400, naive: 600, http: 2500, db: 800 },
  },
  small: {
    name: 'small',
    description: '1 trace + 1-3 llm_call events (what a 250 ms client flush carries)',
    eventCount: (i) => 1 + (i % 3),
    meanEvents: 2,
    initialRates: { service: 800, naive: 1500, http: 5000, db: 2000 },
  },
};

/** @typedef {keyof typeof MIXES} MixName */

/**
 * `next()` → `{ batchId, item }` with fresh ids: one batch of `mix` for `agentId`.
 * @param {{ ulid: () => string, mix: MixName, agentId: string }} options
 * @returns {() => Batch}
 */
export function createBatchMaker({ ulid, mix, agentId }) {
  const makeItem = createItemFactory({ ulid, eventsPerBatch: 20 });
  let i = 0;
  return () => ({ batchId: ulid(), item: makeItem(agentId, MIXES[mix].eventCount(i++)) });
}

/**
 * A request body: its gzip bytes, and the length of the JSON inside.
 * @typedef {{ gz: Buffer, jsonBytes: number }} GzipBody
 */

/**
 * @param {Batch} batch
 * @returns {GzipBody}
 */
function encode({ batchId, item }) {
  const json = JSON.stringify({ batchId, items: [item] });
  return { gz: gzipSync(json), jsonBytes: json.length };
}

/**
 * Values used once each, filled before a run and built on the spot (counted in `madeDuringRun`)
 * if the run outpaces the estimate.
 * @template T
 */
export class OneShotPool {
  /**
   * @param {() => T} make builds one value, in this thread
   * @param {(n: number) => Promise<T[]>} [fillAsync] builds `n` values elsewhere (workers)
   */
  constructor(make, fillAsync) {
    this.make = make;
    this.fillAsync = fillAsync;
    /** @type {T[]} */
    this.items = [];
    this.madeDuringRun = 0;
  }
  /** @param {number} n */
  async fill(n) {
    const missing = n - this.items.length;
    if (missing > 0 && this.fillAsync) this.items.push(...(await this.fillAsync(missing)));
    while (this.items.length < n) this.items.push(this.make());
    this.madeDuringRun = 0;
  }
  next() {
    const item = this.items.pop();
    if (item !== undefined) return item;
    this.madeDuringRun++;
    return this.make();
  }
  drain() {
    this.items = [];
  }
}

/**
 * The pool of createBodyPool, given a `close()` (ending its worker threads) after construction.
 * @typedef {OneShotPool<GzipBody> & { close: () => Promise<unknown> }} BodyPool
 */

/**
 * What a worker thread posts back for a request of `count` bodies: the bodies back to back in
 * one transferred buffer, body k from `offsets[k]` to `offsets[k + 1]`.
 * @typedef {{ buffer: ArrayBuffer, offsets: number[], jsonBytes: number[] }} BodiesMessage
 */

/**
 * Gzip bodies of `mix` for `agentId`, pooled: filled by up to `threads` worker threads, built in
 * this thread when the pool runs dry during a run. `close()` ends the workers.
 * @param {{ mix: MixName, agentId: string, threads?: number }} options
 * @returns {BodyPool}
 */
export function createBodyPool({ mix, agentId, threads = Math.min(2, os.availableParallelism()) }) {
  const ulid = monotonicFactory();
  const makeBatch = createBatchMaker({ ulid, mix, agentId });
  const workers = Array.from(
    { length: threads },
    () =>
      new Worker(new URL(import.meta.url), {
        workerData: { role: 'ingest-bodies', mix, agentId },
      }),
  );
  for (const worker of workers) worker.unref();
  /** @type {(worker: Worker, count: number) => Promise<GzipBody[]>} */
  const ask = (worker, count) =>
    new Promise((resolve, reject) => {
      worker.once('error', reject);
      worker.once('message', (/** @type {BodiesMessage} */ { buffer, offsets, jsonBytes }) => {
        worker.off('error', reject);
        const bytes = Buffer.from(buffer);
        resolve(
          offsets.slice(1).map((end, k) => ({
            gz: bytes.subarray(offsets[k], end),
            jsonBytes: /** @type {number} */ (jsonBytes[k]),
          })),
        );
      });
      worker.postMessage(count);
    });
  const fillAsync = async (/** @type {number} */ n) => {
    const share = Math.ceil(n / workers.length);
    return (await Promise.all(workers.map((w) => ask(w, share)))).flat();
  };
  const pool = /** @type {BodyPool} */ (new OneShotPool(() => encode(makeBatch()), fillAsync));
  pool.close = () => Promise.all(workers.map((w) => w.terminate()));
  return pool;
}

/** @typedef {import('node:worker_threads').MessagePort} MessagePort */

if (!isMainThread && workerData?.role === 'ingest-bodies') {
  const makeBatch = createBatchMaker({
    ulid: monotonicFactory(),
    mix: workerData.mix,
    agentId: workerData.agentId,
  });
  // a worker's parentPort is never null
  /** @type {MessagePort} */ (parentPort).on('message', (/** @type {number} */ count) => {
    const bodies = Array.from({ length: count }, () => encode(makeBatch()));
    const offsets = [0];
    for (const b of bodies) offsets.push(/** @type {number} */ (offsets.at(-1)) + b.gz.length);
    const joined = Buffer.concat(
      bodies.map((b) => b.gz),
      offsets.at(-1),
    );
    // A fresh ArrayBuffer of exactly the bodies (Buffer.concat may use the shared pool).
    const buffer = joined.buffer.slice(joined.byteOffset, joined.byteOffset + joined.length);
    /** @type {MessagePort} */ (parentPort).postMessage(
      { buffer, offsets, jsonBytes: bodies.map((b) => b.jsonBytes) },
      [buffer],
    );
  });
}
