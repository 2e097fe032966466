import { isIsoDateTime } from '@flightlog/protocol';
import { Ajv, type ErrorObject, type Options } from 'ajv';
import type { FastifySchemaCompiler } from 'fastify';

/**
 * Largest body (in JSON values) whose errors are all collected. Ajv's `allErrors` keeps
 * validating after a bound such as `maxItems` failed and builds an error object for every
 * offence: 1.7 million `{}` events in a 5 MiB body made millions of them (minutes of blocked
 * event loop, gigabytes). Past this size only the first error is reported, found in
 * milliseconds; below it, collecting all of them costs at most a few error objects per value.
 */
export const FULL_ERRORS_MAX_VALUES = 10_000;

const options: Options = {
  // Strict: "5" is not a number, null is not 0, nothing is removed or defaulted.
  coerceTypes: false,
  removeAdditional: false,
  useDefaults: false,
  addUsedSchema: false,
};

function createAjv(allErrors: boolean): Ajv {
  const ajv = new Ajv({ ...options, allErrors });
  // Our only format, stricter than ajv-formats': a real instant PostgreSQL can store.
  ajv.addFormat('date-time', { type: 'string', validate: isIsoDateTime });
  return ajv;
}

/** Whether `data` holds at most `limit` JSON values, walking no further than that. */
export function holdsAtMost(data: unknown, limit: number): boolean {
  let seen = 0;
  const stack: unknown[] = [data];
  while (stack.length > 0) {
    const value = stack.pop();
    if (++seen > limit) return false;
    if (Array.isArray(value)) {
      if (seen + value.length > limit) return false;
      for (const item of value) stack.push(item);
    } else if (value !== null && typeof value === 'object') {
      const values = Object.values(value);
      if (seen + values.length > limit) return false;
      for (const item of values) stack.push(item);
    }
  }
  return true;
}

type Validate = ((data: unknown) => boolean) & { errors?: ErrorObject[] | null };

/**
 * Bodies validated already, against their route's body schema, by a body-parse worker
 * (body-parse-pool.ts): the route's validator takes them as valid instead of walking them again.
 * Only the object a worker handed back is ever added, and it is taken out when checked.
 */
const prevalidated = new WeakSet<object>();

/** Marks a body as valid for its route's schema (see {@link prevalidated}). */
export function markPrevalidated(body: object): void {
  prevalidated.add(body);
}

/**
 * A bounded validator of one schema: it stops at the first error (the same work as before for
 * a valid value, milliseconds for any invalid one); only an invalid value small enough
 * ({@link FULL_ERRORS_MAX_VALUES}) is checked again for all its errors, so a client still
 * learns every field to fix in an ordinary batch. Used by the routes and by the body-parse
 * workers alike, so both answer the same errors.
 */
export function createBoundedValidator(schema: object): Validate {
  const quick = firstErrorAjv().compile(schema);
  let full: Validate | undefined;
  const validate: Validate = (data) => {
    if (typeof data === 'object' && data !== null && prevalidated.delete(data)) return true;
    if (quick(data)) return true;
    if (holdsAtMost(data, FULL_ERRORS_MAX_VALUES)) {
      full ??= allErrorsAjv().compile(schema);
      validate.errors = full(data) ? quick.errors : full.errors;
    } else validate.errors = quick.errors;
    return false;
  };
  return validate;
}

let ajvs: { first: Ajv; all: Ajv } | undefined;
const firstErrorAjv = () => (ajvs ??= { first: createAjv(false), all: createAjv(true) }).first;
const allErrorsAjv = () => (ajvs ??= { first: createAjv(false), all: createAjv(true) }).all;

/** Fastify's schema compiler: {@link createBoundedValidator} for every request part. */
export function boundedValidatorCompiler(): FastifySchemaCompiler<unknown> {
  return ({ schema }) => createBoundedValidator(schema as object);
}
