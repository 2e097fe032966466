import { storableText } from '@flightlog/protocol';

// The cleaning rule is the wire's, shared with the service's OpenTelemetry mapping.
export { storableText };

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** True for 1 to `maxLength` UTF-16 units of text the service stores as given (agent ids). */
export function isStorableText(value: unknown, maxLength: number): value is string {
  if (typeof value !== 'string' || value.length === 0 || value.length > maxLength) return false;
  LONE_SURROGATE.lastIndex = 0;
  return !value.includes('\u0000') && !LONE_SURROGATE.test(value);
}

/**
 * The message of anything thrown (or handed to `fail()`), as storable text. Never throws: an
 * `Error` gives its message (or its name when the message is empty), a string itself, an object
 * its string `message` or else its JSON, `null`/`undefined` a note saying so; a value whose
 * getters or `toString` throw gives `unprintable error`.
 */
export function errorText(error: unknown, maxLength: number): string {
  let message: string;
  try {
    message = messageOf(error);
  } catch {
    message = 'unprintable error';
  }
  return storableText(message === '' ? 'unknown error (empty message)' : message, maxLength);
}

/** JSON of a value thrown that is neither an Error nor a string: capped before it is cut. */
const JSON_PREVIEW = 2_000;

function messageOf(error: unknown): string {
  if (typeof error === 'string') return error;
  if (error === undefined || error === null) return `unknown error (${String(error)})`;
  if (typeof error === 'function') return `thrown function ${error.name || '(anonymous)'}`;
  if (typeof error !== 'object') return String(error);
  const message: unknown = (error as { message?: unknown }).message;
  if (typeof message === 'string' && message !== '') return message;
  if (error instanceof Error) {
    // An Error whose message is not text (a number, an object): say what it holds, or its name.
    if (message !== undefined && message !== null && message !== '')
      return `${error.name}: ${plain(message)}`;
    return error.name || 'Error';
  }
  if (message !== undefined && message !== null && message !== '') return plain(message);
  return plain(error);
}

/** A non-Error value as text: JSON when it has some, else what String() gives. */
function plain(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'object' && value !== null) {
    try {
      const json = JSON.stringify(value) as string | undefined;
      if (json !== undefined && json !== '{}') return json.slice(0, JSON_PREVIEW);
    } catch {
      // cycles, BigInt, throwing toJSON: fall back to the tag
    }
    return Object.prototype.toString.call(value);
  }
  return String(value);
}
