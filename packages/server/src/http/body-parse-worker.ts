import { setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import { FlightlogError } from '../errors/flightlog-error.js';
import { decodeBody, type BodyDecoder } from './body-decoders.js';
import { createBoundedValidator } from './schema-validator.js';

/**
 * A body-parse worker (see body-parse-pool.ts): decodes, parses (JSON, or an OTLP protobuf
 * export) and validates one large body at a time off the event loop. An invalid body goes back as its (bounded) errors only, so the
 * objects it parsed to, and their garbage collection, never reach the main thread.
 */

/** One body to parse, its bytes copied; `schema` is the route's body schema, if any. */
export interface ParseJob {
  id: number;
  bytes: Uint8Array;
  /** How the bytes are read: JSON (the default), or an OTLP protobuf trace export. */
  decoder?: BodyDecoder;
  schemaId?: number;
  schema?: object;
  /** Where prototype keys are kept as data (the route's `jsonDataPaths`). */
  dataPaths?: readonly (readonly string[])[];
}

/** Ajv's error objects, as far as the problem answer reads them (http/problem.ts). */
export interface SchemaError {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
}

export type ParseResult =
  | { id: number; kind: 'parsed'; value: unknown }
  | { id: number; kind: 'invalid'; errors: SchemaError[] }
  | {
      id: number;
      kind: 'refused';
      code: FlightlogError['code'];
      detail: string;
      fieldErrors?: FlightlogError['fieldErrors'];
    }
  /** The value could not be cloned back (nested too deep): the main thread parses it itself. */
  | { id: number; kind: 'inline'; bytes: Uint8Array };

/** How much lower than the event loop a body-parse thread runs (a nice value, 0–19). */
const LARGE_BODY_NICE = 10;

const validators = new Map<number, ReturnType<typeof createBoundedValidator>>();

function handle(job: ParseJob): ParseResult {
  let value: unknown;
  try {
    value = decodeBody(
      Buffer.from(job.bytes.buffer, job.bytes.byteOffset, job.bytes.byteLength),
      job.decoder,
      job.dataPaths,
    );
  } catch (error) {
    if (error instanceof FlightlogError)
      return {
        id: job.id,
        kind: 'refused',
        code: error.code,
        detail: error.message,
        ...(error.fieldErrors ? { fieldErrors: error.fieldErrors } : {}),
      };
    throw error;
  }
  if (job.schemaId === undefined || value === undefined)
    return { id: job.id, kind: 'parsed', value };
  let validate = validators.get(job.schemaId);
  if (!validate) {
    // the pool sends each schema with the first body of it this worker gets
    if (!job.schema) throw new Error(`schema ${job.schemaId} was never sent`);
    validators.set(job.schemaId, (validate = createBoundedValidator(job.schema)));
  }
  if (validate(value)) return { id: job.id, kind: 'parsed', value };
  // plain copies: Ajv's error objects may carry the schema and data they point into
  const errors = (validate.errors ?? []).map(({ instancePath, keyword, message, params }) => ({
    instancePath,
    keyword,
    ...(message === undefined ? {} : { message }),
    params: JSON.parse(JSON.stringify(params)) as Record<string, unknown>,
  }));
  return { id: job.id, kind: 'invalid', errors };
}

/**
 * On Linux a nice value is a thread's own: this thread yields the cores to the event loop (and
 * to the database) whenever both want one, so a flood of large bodies slows those bodies, not
 * everyone else's requests. Where the platform refuses, the worker runs at normal priority.
 */
try {
  setPriority(LARGE_BODY_NICE);
} catch {
  // not permitted here: normal priority
}

parentPort?.on('message', (job: ParseJob) => {
  try {
    parentPort?.postMessage(handle(job));
  } catch {
    // a value nested past the structured clone's stack (a payload 100,000 levels deep): the
    // route refuses it for its depth, as it does any body parsed on the main thread
    parentPort?.postMessage({ id: job.id, kind: 'inline', bytes: job.bytes }, [
      job.bytes.buffer as ArrayBuffer,
    ]);
  }
});
