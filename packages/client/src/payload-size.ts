/** The service refuses payloads nesting deeper than this (and so does the client, up front). */
export const MAX_PAYLOAD_DEPTH = 64;

/** {@link snapshotPayload}: the payload nests deeper than {@link MAX_PAYLOAD_DEPTH} (or is circular). */
export const TOO_DEEP = -1;
/** {@link snapshotPayload}: the payload holds a BigInt, which JSON cannot. */
export const HOLDS_BIGINT = -2;
/** {@link snapshotPayload}: the estimate passed the limit. */
export const TOO_LARGE = -3;
/** {@link snapshotPayload}: the payload's JSON would not be an object (a `toJSON` gave something else). */
export const NOT_AN_OBJECT = -4;

/** A payload read when its event was recorded: a JSON-ready copy and its estimated JSON size. */
export interface PayloadSnapshot {
  /**
   * Plain objects, arrays and JSON primitives only, owned by the client: `JSON.stringify` of it
   * gives exactly the text `JSON.stringify` of the host's payload gave at the moment it was read.
   */
  value: object;
  bytes: number;
}

/** Unwinds the walk; `failure` says why. */
const FAIL: unique symbol = Symbol('fail');
/** Left out, as JSON leaves out undefined, functions and symbols (null inside arrays). */
const OMIT: unique symbol = Symbol('omit');

// The walk's state: module-level, so that reading an event allocates nothing but the copy.
let failure = 0;
let bytes = 0;
let budget = 0;

type Copied = unknown;

/**
 * JSON's SerializeJSONProperty (ECMA-262 25.5.2.2, no replacer), building the value instead of
 * the text: `toJSON` is called (with the key), boxed primitives are unwrapped, non-finite numbers
 * become null, undefined, functions and symbols are left out, objects keep their own enumerable
 * string keys in order, and everything is read exactly once, as JSON.stringify would.
 */
function copy(input: unknown, key: string | number, depth: number): Copied {
  let value = input;
  if ((typeof value === 'object' && value !== null) || typeof value === 'function') {
    const toJSON: unknown = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') value = toJSON.call(value, String(key));
  } else if (typeof value === 'bigint') {
    const toJSON: unknown = (value as unknown as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') value = toJSON.call(value, String(key));
  }
  switch (typeof value) {
    case 'string':
      bytes += value.length + 2;
      if (bytes > budget) return fail(TOO_LARGE);
      return value;
    case 'number':
      bytes += 8;
      return Number.isFinite(value) ? value : null;
    case 'boolean':
      bytes += 5;
      return value;
    case 'bigint':
      return fail(HOLDS_BIGINT);
    case 'object':
      break;
    default:
      return OMIT; // undefined, functions and symbols
  }
  if (value === null) {
    bytes += 4;
    return null;
  }
  if (depth > MAX_PAYLOAD_DEPTH) return fail(TOO_DEEP);
  bytes += 2;
  if (Array.isArray(value)) {
    const list = value as unknown[];
    const out: Copied[] = [];
    for (let i = 0; i < list.length; i++) {
      const item = copy(list[i], i, depth + 1);
      if (item === FAIL) return FAIL;
      out.push(item === OMIT ? null : item);
      bytes += 1;
      if (bytes > budget) return fail(TOO_LARGE);
    }
    return out;
  }
  // Boxed primitives serialise as their primitive (only plain objects skip these checks).
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) {
    if (value instanceof Number) return copy(Number(value), key, depth);
    if (value instanceof String) return copy(String(value), key, depth);
    if (value instanceof Boolean) return copy(value.valueOf(), key, depth);
    if (value instanceof BigInt) return fail(HOLDS_BIGINT);
  }
  const record = value as Record<string, unknown>;
  const out: Record<string, Copied> = {};
  const keys = Object.keys(record);
  for (let i = 0; i < keys.length; i++) {
    const name = keys[i] as string;
    const item = copy(record[name], name, depth + 1);
    if (item === FAIL) return FAIL;
    if (item === OMIT) continue;
    // A key `__proto__` assigned plainly would set the copy's prototype instead.
    if (name === '__proto__')
      Object.defineProperty(out, name, {
        value: item,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    else out[name] = item;
    bytes += name.length + 4;
    if (bytes > budget) return fail(TOO_LARGE);
  }
  return out;
}

function fail(code: number): typeof FAIL {
  failure = code;
  return FAIL;
}

/**
 * Reads a payload once, when its event is recorded, into a JSON-ready copy the client owns: what is
 * sent is the payload as it was then, whatever the host does with its object afterwards. Cheaper
 * than `JSON.stringify` on the host's hot path (the text is made at flush time, from the copy,
 * off it), and it finds what would make the event unsendable: nesting past 64 levels (the
 * service's limit, and what a circular reference turns into), BigInt values, which JSON cannot
 * hold, and a root that would not serialise to an object. The walk stops as soon as the size
 * estimate passes `limit`, so a huge or self-referencing payload costs little. The estimate counts
 * strings by their UTF-16 length, so it never looks at their characters (cheap on the host's hot
 * path; text outside ASCII and escapes are under-counted): it paces flushes and catches the
 * plainly too large early. `maxEventBytes` itself is enforced exactly, on the UTF-8 bytes of the
 * JSON, when the payload is serialised at flush time (sliced-json.ts). Returns the copy, or one
 * of the negative codes above. A getter, Proxy trap or `toJSON` that throws propagates to the
 * caller.
 */
export function snapshotPayload(root: object, limit: number): PayloadSnapshot | number {
  // Saved and restored: a getter of the payload may itself record an event (and so walk).
  const outer = { failure, bytes, budget };
  failure = 0;
  bytes = 0;
  budget = limit;
  try {
    const value = copy(root, '', 1);
    if (value === FAIL) return failure;
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return NOT_AN_OBJECT;
    return { value, bytes };
  } finally {
    ({ failure, bytes, budget } = outer);
  }
}

/**
 * The size estimate of a payload the client built itself (the instrumentations' `llm_call`
 * payloads: fresh objects, arrays, strings, finite numbers and booleans, nothing the host can
 * change afterwards), counted exactly as {@link snapshotPayload} counts, without copying it: such
 * a payload is recorded as it is. Returns the estimate, or TOO_LARGE past `limit`, or TOO_DEEP.
 */
export function measureOwnPayload(root: object, limit: number): number {
  // Saved and restored (in locals: nothing allocated), as snapshotPayload does.
  const outerFailure = failure;
  const outerBytes = bytes;
  const outerBudget = budget;
  failure = 0;
  bytes = 0;
  budget = limit;
  try {
    return measure(root, 1) ? bytes : failure;
  } finally {
    failure = outerFailure;
    bytes = outerBytes;
    budget = outerBudget;
  }
}

function measure(value: unknown, depth: number): boolean {
  switch (typeof value) {
    case 'string':
      bytes += value.length + 2;
      if (bytes > budget) return measureFail(TOO_LARGE);
      return true;
    case 'number':
      bytes += 8;
      return true;
    case 'boolean':
      bytes += 5;
      return true;
    case 'object':
      break;
    default:
      return true; // left out, as JSON leaves out undefined
  }
  if (value === null) {
    bytes += 4;
    return true;
  }
  if (depth > MAX_PAYLOAD_DEPTH) return measureFail(TOO_DEEP);
  bytes += 2;
  if (Array.isArray(value)) {
    const list = value as unknown[];
    for (let i = 0; i < list.length; i++) {
      if (!measure(list[i], depth + 1)) return false;
      bytes += 1;
      if (bytes > budget) return measureFail(TOO_LARGE);
    }
    return true;
  }
  const record = value as Record<string, unknown>;
  for (const name in record) {
    const item = record[name];
    if (item === undefined) continue;
    if (!measure(item, depth + 1)) return false;
    bytes += name.length + 4;
    if (bytes > budget) return measureFail(TOO_LARGE);
  }
  return true;
}

function measureFail(code: number): false {
  failure = code;
  return false;
}
