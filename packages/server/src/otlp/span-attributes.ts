import type { OtlpKeyValue } from './otlp-json.js';

/** A plain JSON value: what an OTLP AnyValue becomes in an event payload. */
export type PlainValue =
  string | number | boolean | null | PlainValue[] | { [key: string]: PlainValue };

export type Attributes = Record<string, PlainValue>;

/**
 * How deep arrays and key-value lists inside one attribute may nest. Event payloads may nest 64
 * levels (ingest-batch.ts); an attribute sits a few levels down in one, and no instrumentation
 * nests values anywhere near this deep.
 */
export const MAX_VALUE_DEPTH = 32;

const TOO_DEEP = '[nested too deep]';

/** The one field of an AnyValue that is set (OTLP/JSON form), as a plain value. */
export function plainValue(value: unknown, depth = 1): PlainValue {
  if (value === null || typeof value !== 'object') return null;
  const v = value as Record<string, unknown>;
  if (typeof v.stringValue === 'string') return v.stringValue;
  if (typeof v.boolValue === 'boolean') return v.boolValue;
  if (v.intValue !== undefined) return integer(v.intValue);
  if (v.doubleValue !== undefined) return double(v.doubleValue);
  if (typeof v.bytesValue === 'string') return v.bytesValue; // base64, as OTLP/JSON writes it
  if (v.arrayValue !== undefined || v.kvlistValue !== undefined) {
    if (depth >= MAX_VALUE_DEPTH) return TOO_DEEP;
    const list = (v.arrayValue ?? v.kvlistValue) as { values?: unknown } | null;
    const values = Array.isArray(list?.values) ? (list.values as unknown[]) : [];
    if (v.arrayValue !== undefined) return values.map((item) => plainValue(item, depth + 1));
    return keyValues(values, depth + 1);
  }
  return null;
}

/** A 64-bit integer: a number while exact, else its decimal text (never a rounded number). */
function integer(value: unknown): PlainValue {
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (typeof value !== 'string' || !/^-?\d{1,20}$/.test(value)) return null;
  const number = Number(value);
  return Number.isSafeInteger(number) ? number : value;
}

/**
 * A double: a number, or the text proto3 JSON writes for NaN and the infinities (payloads hold
 * JSON, which has no such numbers: they stay text).
 */
function double(value: unknown): PlainValue {
  if (typeof value === 'number') return Number.isFinite(value) ? value : String(value);
  if (typeof value === 'string') {
    const number = Number(value);
    return value.trim() !== '' && Number.isFinite(number) ? number : value;
  }
  return null;
}

/**
 * Key-value pairs as one object; a repeated key keeps its last value. Built with
 * Object.fromEntries, so a key such as `__proto__` is an ordinary field, never a prototype.
 */
function keyValues(pairs: readonly unknown[], depth: number): { [key: string]: PlainValue } {
  const entries: [string, PlainValue][] = [];
  for (const pair of pairs) {
    if (pair === null || typeof pair !== 'object') continue;
    const { key, value } = pair as { key?: unknown; value?: unknown };
    if (typeof key === 'string') entries.push([key, plainValue(value, depth)]);
  }
  return Object.fromEntries(entries);
}

/** A span's (or resource's, scope's, span event's) attributes as one object. */
export function attributesOf(pairs: readonly OtlpKeyValue[] | undefined): Attributes {
  return pairs ? keyValues(pairs, 1) : {};
}
