/*
 * JSON within a byte budget, a hard limit. Strings longer than a cap are shortened (a 64 KiB
 * inputSummary or a stack trace costs more than it tells), then, if that is not enough, arrays
 * and objects keep their first items only. Each cut leaves a marker saying how much went, so a
 * reader knows the text is partial.
 *
 * The caps are found by a galloping search, one cut copy of the value per try, each try about
 * the size of the answer: milliseconds whatever the shape, where cutting the largest field one at a time re-serialised the whole
 * value per cut (20,000 tool names: 500 rounds, 24 s of blocked event loop, still over budget).
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A root object with at most this many keys keeps them all. */
const ROOT_KEYS = 64;

/** Strings are never cut below this many characters (when cutting items can make it fit). */
const MIN_STRING = 48;

interface Caps {
  chars: number;
  items: number;
}

const bytes = (text: string) => Buffer.byteLength(text, 'utf8');

/**
 * A copy of `value` with strings cut to `chars` and arrays/objects to `items` entries; a root
 * object of up to ROOT_KEYS keys keeps them all (a record's fields: the last ones matter too).
 */
function cut(value: Json, caps: Caps, root = false): Json {
  if (typeof value === 'string') {
    if (value.length <= caps.chars) return value;
    let keep = value.slice(0, caps.chars);
    // never leave half of a surrogate pair
    if (/[\ud800-\udbff]$/.test(keep)) keep = keep.slice(0, -1);
    return `${keep}…[${value.length - keep.length} characters cut]`;
  }
  if (Array.isArray(value)) {
    const kept: Json[] = value.slice(0, caps.items).map((v) => cut(v, caps));
    if (value.length > caps.items) kept.push(`…[${value.length - caps.items} more items cut]`);
    return kept;
  }
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value);
    const limit = root && keys.length <= ROOT_KEYS ? keys.length : caps.items;
    const kept: { [key: string]: Json } = {};
    for (const key of keys.slice(0, limit))
      kept[cut(key, caps) as string] = cut(value[key] as Json, caps);
    if (keys.length > limit) kept['…'] = `[${keys.length - limit} more keys cut]`;
    return kept;
  }
  return value;
}

/** Longest string (keys included) and widest array or object in `value`. */
function extent(value: Json): Caps {
  const found: Caps = { chars: 0, items: 0 };
  const visit = (v: Json) => {
    if (typeof v === 'string') found.chars = Math.max(found.chars, v.length);
    else if (Array.isArray(v)) {
      found.items = Math.max(found.items, v.length);
      v.forEach(visit);
    } else if (v !== null && typeof v === 'object') {
      const keys = Object.keys(v);
      found.items = Math.max(found.items, keys.length);
      for (const key of keys) {
        found.chars = Math.max(found.chars, key.length);
        visit(v[key] as Json);
      }
    }
  };
  visit(value);
  return found;
}

/**
 * The largest n in [low, high] for which `fits(n)`, or undefined when even `low` does not.
 * Galloping up from `low`, so that no try is much larger than the answer: a try costs what the
 * cut copy holds.
 */
function largest(low: number, high: number, fits: (n: number) => boolean): number | undefined {
  if (!fits(low)) return undefined;
  for (let step = 1; low < high; step *= 2) {
    const next = Math.min(high, low + step);
    if (!fits(next)) {
      high = next - 1;
      break;
    }
    low = next;
  }
  while (low < high) {
    const mid = Math.ceil((low + high) / 2);
    if (fits(mid)) low = mid;
    else high = mid - 1;
  }
  return low;
}

/** `value` as JSON text of at most `budgetBytes` bytes, always. */
export function fitJson(value: unknown, budgetBytes: number): string {
  const whole = JSON.stringify(value ?? null);
  if (bytes(whole) <= budgetBytes) return whole;
  const root = JSON.parse(whole) as Json;

  const { chars: longest, items: widest } = extent(root);
  const text = (caps: Caps) => JSON.stringify(cut(root, caps, true));
  const fits = (caps: Caps) => bytes(text(caps)) <= budgetBytes;
  // No item can cost less than two bytes, nor a string more than the budget: capping there
  // first bounds every try, however large the value.
  const items = Math.max(1, Math.min(widest, budgetBytes >> 1));
  const chars = Math.min(longest, budgetBytes);

  // Strings first: the longest ones are cut to the largest cap that fits.
  const stringCap = largest(Math.min(MIN_STRING, chars), chars, (c) => fits({ chars: c, items }));
  if (stringCap !== undefined) return text({ chars: stringCap, items });
  // Then items, with strings at their shortest.
  const shortest = Math.min(MIN_STRING, chars);
  const itemCap = largest(1, items, (n) => fits({ chars: shortest, items: n }));
  if (itemCap !== undefined) return text({ chars: shortest, items: itemCap });
  // Deeply nested: nothing fits; say so within the budget.
  const note = JSON.stringify({ cut: `the facts did not fit in ${budgetBytes} bytes` });
  return bytes(note) <= budgetBytes ? note : 'null';
}
