import { Type, type Static, type TUnsafe } from '@sinclair/typebox';

/** The one id rule, in words, for messages where a schema's own do not reach (the CLI). */
export const IDENTIFIER_RULE = '1 to 128 characters of A-Z a-z 0-9 . _ : ~ -';

const IDENTIFIER_CHARS = '^[A-Za-z0-9._:~-]+$';
const IDENTIFIER_MAX_LENGTH = 128;
const IDENTIFIER = new RegExp(IDENTIFIER_CHARS);

/**
 * Identifiers of traces, events and agents. The service uses them in URL paths, so they are
 * restricted to characters that need no escaping there. ULIDs and UUIDs fit.
 */
export const Identifier = Type.String({
  minLength: 1,
  maxLength: IDENTIFIER_MAX_LENGTH,
  pattern: IDENTIFIER_CHARS,
});

/** The Identifier schema's rule as a check, for ids that arrive outside a validated body. */
export function isIdentifier(value: string): boolean {
  return value.length <= IDENTIFIER_MAX_LENGTH && IDENTIFIER.test(value);
}

/** A batch id: a ULID (Crockford base32, any case) or a UUID. */
export const BatchId = Type.String({
  pattern:
    '^(?:[0-7][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{25}|[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})$',
});

/** ISO 8601 / RFC 3339 date-time with a time zone, e.g. `2026-11-22T10:00:00.000Z`. */
export const IsoDateTime = Type.String({ format: 'date-time', maxLength: 40 });

/**
 * Text PostgreSQL can store as sent: no NUL character (text cannot hold it) and no lone UTF-16
 * surrogate (it would be stored as U+FFFD, silently changed). Refused here with a clear error
 * instead. Ajv compiles patterns with the `u` flag, so an emoji (a surrogate pair) is one code
 * point and passes.
 */
export const STORABLE_TEXT = '^[^\\u0000\\uD800-\\uDFFF]*$';

/**
 * The longest summary or error message a trace or event holds (characters): what the client cuts
 * longer ones to, and what the service takes.
 */
export const TEXT_MAX_LENGTH = 65_536;

/** Human-readable text (see STORABLE_TEXT). */
export const Text = (maxLength: number) => Type.String({ maxLength, pattern: STORABLE_TEXT });

/** A non-negative decimal string without exponent or leading zeros: `0`, `12`, `0.000125`. */
export const DecimalString = Type.String({
  maxLength: 80,
  pattern: '^(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?$',
});

/** A non-negative integer as a decimal string, for values beyond 2^53 (lamports, slots). */
export const IntegerString = Type.String({ maxLength: 80, pattern: '^(?:0|[1-9][0-9]*)$' });

/** A non-negative integer that fits a JSON number exactly. */
export const Count = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER });

/** Milliseconds; fractional values are allowed. */
export const Milliseconds = Type.Number({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER });

export const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T) =>
  Type.Union([schema, Type.Null()]);

export type Identifier = Static<typeof Identifier>;

/** A closed set of strings; validation errors list the allowed values. */
export const StringEnum = <const T extends readonly string[]>(values: T): TUnsafe<T[number]> =>
  Type.Unsafe<T[number]>({ type: 'string', enum: [...values] });
