import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { FlightlogError, validationFailed } from '../errors/flightlog-error.js';
import type { ParseJob, ParseResult } from './body-parse-worker.js';
import { decodeBody, type BodyDecoder } from './body-decoders.js';
import type { DataPath } from './prototype-keys.js';
import { fieldErrorsFromAjv } from './problem.js';
import { markPrevalidated } from './schema-validator.js';

export interface BodyParsePoolOptions {
  /** Worker threads (started on the first large body, one at a time as needed). */
  workers: number;
  /** Bodies one key (an agent, or a client address) may have waiting or parsing at once. */
  maxPerKey: number;
  /** Bodies all keys together may have waiting or parsing at once. */
  maxQueued: number;
}

interface Pending {
  key: string;
  job: ParseJob;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

interface Slot {
  worker: Worker;
  running: Pending | undefined;
  /** Schema ids this worker has been sent (each schema travels once per worker). */
  schemas: Set<number>;
}

/**
 * The compiled worker: next to this module when running the build; when this module runs from
 * the TypeScript sources (the tests), the build's copy (`npm test` builds first).
 */
function workerFile(): URL {
  const here = new URL('./body-parse-worker.js', import.meta.url);
  if (existsSync(fileURLToPath(here))) return here;
  return new URL('../../dist/http/body-parse-worker.js', import.meta.url);
}

/**
 * Parses and validates large request bodies on worker threads, so that one agent's big bodies
 * (5 MiB of JSON is ~0.1 s of `JSON.parse` and, for a million small objects, ~0.3 s of garbage
 * collection) never hold the event loop other agents' requests are served on. Fair between
 * keys: each free worker takes the next body of the next key in turn, so one key's queue
 * delays another key's body by at most one body per worker; bounded: past `maxPerKey` bodies of
 * one key the answer is `429` with `Retry-After`, past `maxQueued` in all `503`.
 */
export class BodyParsePool {
  private readonly slots: Slot[] = [];
  /** Waiting bodies per key, the keys in the order their turns come. */
  private readonly waiting = new Map<string, Pending[]>();
  private readonly perKey = new Map<string, number>();
  private queued = 0;
  private nextId = 1;
  private closed = false;
  /** Route body schemas by id, sent to each worker once (a few, fixed at start-up). */
  private readonly schemaIds = new Map<object, number>();
  private readonly schemasById = new Map<number, object>();
  private nextSchemaId = 1;

  constructor(private readonly options: BodyParsePoolOptions) {}

  /**
   * The body parsed (`decoder`: JSON unless told), and when `schema` is given validated against it (the route's validator
   * then takes it as valid); an invalid body is refused with the same `400` the route's
   * validator would answer.
   */
  parse(
    key: string,
    bytes: Buffer,
    schema: object | undefined,
    dataPaths: readonly DataPath[] = [],
    decoder: BodyDecoder = 'json',
  ): Promise<unknown> {
    if (this.closed)
      return Promise.reject(new FlightlogError('shutting-down', 'The service is shutting down.'));
    const mine = this.perKey.get(key) ?? 0;
    if (mine >= this.options.maxPerKey)
      return Promise.reject(
        new FlightlogError(
          'too-many-requests',
          `At most ${this.options.maxPerKey} large bodies of one agent are parsed at a time; ` +
            'send the others later.',
          { retryAfterSeconds: 1 },
        ),
      );
    if (this.queued >= this.options.maxQueued)
      return Promise.reject(
        new FlightlogError('store-unavailable', 'Too many large bodies are waiting; retry.', {
          retryAfterSeconds: 1,
        }),
      );
    const job: ParseJob = { id: this.nextId++, bytes, dataPaths };
    if (decoder !== 'json') job.decoder = decoder;
    if (schema) job.schemaId = this.schemaIdOf(schema);
    return new Promise((resolve, reject) => {
      this.perKey.set(key, mine + 1);
      this.queued++;
      const queue = this.waiting.get(key);
      const pending = { key, job, resolve, reject };
      if (queue) queue.push(pending);
      else this.waiting.set(key, [pending]);
      this.dispatch();
    }).then((value) => {
      if (job.schemaId !== undefined && typeof value === 'object' && value !== null)
        markPrevalidated(value);
      return value;
    });
  }

  /** Stops the workers; bodies still waiting or parsing are answered `503`. */
  async close(): Promise<void> {
    this.closed = true;
    const refused = new FlightlogError('shutting-down', 'The service is shutting down.');
    for (const queue of this.waiting.values()) for (const pending of queue) pending.reject(refused);
    this.waiting.clear();
    const slots = this.slots.splice(0);
    for (const slot of slots) slot.running?.reject(refused);
    await Promise.all(slots.map((slot) => slot.worker.terminate()));
  }

  private schemaIdOf(schema: object): number {
    let id = this.schemaIds.get(schema);
    if (id === undefined) {
      this.schemaIds.set(schema, (id = this.nextSchemaId++));
      this.schemasById.set(id, schema);
    }
    return id;
  }

  private dispatch(): void {
    while (this.waiting.size > 0) {
      const slot = this.idleSlot();
      if (!slot) return;
      // the first key in line gets its turn, then goes to the back of the line
      const [key, queue] = this.waiting.entries().next().value as [string, Pending[]];
      const pending = queue.shift() as Pending;
      this.waiting.delete(key);
      if (queue.length > 0) this.waiting.set(key, queue);
      this.run(slot, pending);
    }
  }

  private idleSlot(): Slot | undefined {
    const idle = this.slots.find((slot) => slot.running === undefined);
    if (idle || this.slots.length >= this.options.workers) return idle;
    return this.startWorker();
  }

  private startWorker(): Slot {
    const worker = new Worker(workerFile());
    // an idle worker must not keep the process alive; shutdown terminates it anyway
    worker.unref();
    const slot: Slot = { worker, running: undefined, schemas: new Set() };
    worker.on('message', (result: ParseResult) => this.finish(slot, result));
    // a value the worker could send but this thread cannot take in (nested some 10,000 levels:
    // this thread's stack is smaller than the worker's): parsed here, as one it could not send
    worker.on('messageerror', () => {
      const running = slot.running;
      if (running)
        this.finish(slot, { id: running.job.id, kind: 'inline', bytes: running.job.bytes });
    });
    const replace = (error: unknown) => {
      const index = this.slots.indexOf(slot);
      if (index < 0) return;
      this.slots.splice(index, 1);
      const running = slot.running;
      slot.running = undefined;
      if (running) {
        this.done(running);
        running.reject(
          new FlightlogError('internal', 'A body-parse worker failed.', { cause: error }),
        );
      }
      this.dispatch();
    };
    worker.on('error', replace);
    worker.on('exit', (code) => replace(new Error(`body-parse worker exited with ${code}`)));
    this.slots.push(slot);
    return slot;
  }

  private run(slot: Slot, pending: Pending): void {
    slot.running = pending;
    const { job } = pending;
    if (job.schemaId !== undefined && !slot.schemas.has(job.schemaId)) {
      slot.schemas.add(job.schemaId);
      job.schema = this.schemasById.get(job.schemaId);
    }
    // copied, not transferred: the bytes stay here for a value that cannot come back (above);
    // one copy of at most MAX_BODY_BYTES per body is little beside its parse
    slot.worker.postMessage(job);
  }

  private finish(slot: Slot, result: ParseResult): void {
    const pending = slot.running;
    if (!pending || pending.job.id !== result.id) return;
    slot.running = undefined;
    this.done(pending);
    if (result.kind === 'parsed') pending.resolve(result.value);
    else if (result.kind === 'inline') {
      try {
        // validated by the route as usual: not marked
        pending.job.schemaId = undefined;
        pending.resolve(
          decodeBody(Buffer.from(result.bytes), pending.job.decoder, pending.job.dataPaths),
        );
      } catch (error) {
        pending.reject(error);
      }
    } else if (result.kind === 'invalid')
      pending.reject(
        validationFailed(
          fieldErrorsFromAjv(result.errors),
          'The request does not match the schema.',
        ),
      );
    else
      pending.reject(
        new FlightlogError(
          result.code,
          result.detail,
          result.fieldErrors ? { fieldErrors: result.fieldErrors } : {},
        ),
      );
    this.dispatch();
  }

  private done(pending: Pending): void {
    this.queued--;
    const left = (this.perKey.get(pending.key) ?? 1) - 1;
    if (left > 0) this.perKey.set(pending.key, left);
    else this.perKey.delete(pending.key);
  }
}
