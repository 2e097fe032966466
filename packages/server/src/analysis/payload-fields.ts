/*
 * Reading fields out of event payloads, defensively: the server accepts any object payload, so
 * every field may be missing or of another type, and nothing here throws.
 */

export type Payload = Record<string, unknown>;

/** A non-empty string field, else null. */
export const str = (p: Payload | undefined, key: string): string | null => {
  const value = p?.[key];
  return typeof value === 'string' && value.length > 0 ? value : null;
};

/** A finite number field, else null. */
export const num = (p: Payload | undefined, key: string): number | null => {
  const value = p?.[key];
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
};

/** An object field (not an array), else undefined. */
export const obj = (p: Payload | undefined, key: string): Payload | undefined => {
  const value = p?.[key];
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Payload)
    : undefined;
};

/** A boolean field, else null. */
export const bool = (p: Payload | undefined, key: string): boolean | null => {
  const value = p?.[key];
  return typeof value === 'boolean' ? value : null;
};

const INTEGER = /^(?:0|[1-9][0-9]*)$/;

/** A lamports field: a non-negative integer in decimal text (at most 80 digits), else null. */
export const lamportsOf = (p: Payload | undefined, key: string): string | null => {
  const value = str(p, key);
  return value !== null && INTEGER.test(value) && value.length <= 80 ? value : null;
};

/** JSON with sorted keys, so that two equal inputs compare equal whatever their key order. */
export function canonical(value: unknown): string {
  if (typeof value !== 'object' || value === null) return JSON.stringify(value) ?? 'null';
  // string building without intermediate arrays: this runs once per step of a 20,000-step run
  let out: string;
  if (Array.isArray(value)) {
    out = '[';
    for (let i = 0; i < value.length; i++) out += (i === 0 ? '' : ',') + canonical(value[i]);
    return `${out}]`;
  }
  const keys = Object.keys(value);
  if (keys.length > 1) keys.sort();
  out = '{';
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    out += `${i === 0 ? '' : ','}${JSON.stringify(key)}:${canonical((value as Payload)[key])}`;
  }
  return `${out}}`;
}

/** `text` cut to `max` characters, the cut marked with an ellipsis. */
export function shorten(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** USD as decimal text with up to 6 significant digits past the leading zeros. */
export function formatUsd(value: number): string {
  if (value === 0) return '0';
  const digits = Math.max(2, Math.min(12, 5 - Math.floor(Math.log10(Math.abs(value)))));
  return value.toFixed(digits).replace(/\.?0+$/, '');
}
