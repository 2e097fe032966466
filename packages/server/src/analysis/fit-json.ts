/*
 * JSON within a byte budget: the largest strings are shortened first (a 64 KiB inputSummary or a
 * stack trace in an error message costs more than it tells), then the longest arrays lose their
 * tail. Each cut leaves a marker saying how much went, so a reader knows the text is partial.
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Strings are never cut below this many characters. */
const MIN_STRING = 48;
const MAX_ROUNDS = 500;

interface Slot {
  get(): Json;
  set(value: Json): void;
}

function slots(root: { value: Json }): Slot[] {
  const found: Slot[] = [];
  const visit = (slot: Slot) => {
    found.push(slot);
    const value = slot.get();
    if (Array.isArray(value))
      value.forEach((_, i) => visit({ get: () => value[i] as Json, set: (v) => (value[i] = v) }));
    else if (value !== null && typeof value === 'object')
      for (const key of Object.keys(value))
        visit({ get: () => value[key] as Json, set: (v) => (value[key] = v) });
  };
  visit({ get: () => root.value, set: (v) => (root.value = v) });
  return found;
}

const bytes = (text: string) => Buffer.byteLength(text, 'utf8');

/** `value` as JSON text of at most `budgetBytes` bytes where cutting can get it there. */
export function fitJson(value: unknown, budgetBytes: number): string {
  const root = { value: JSON.parse(JSON.stringify(value ?? null)) as Json };
  let text = JSON.stringify(root.value);
  for (let round = 0; round < MAX_ROUNDS && bytes(text) > budgetBytes; round++) {
    const excess = bytes(text) - budgetBytes;
    const all = slots(root);
    let longest: Slot | undefined;
    // a cut adds a marker of ~30 characters: shorter strings would only grow
    let longestLength = MIN_STRING + 40;
    for (const slot of all) {
      const v = slot.get();
      if (typeof v === 'string' && v.length > longestLength) {
        longest = slot;
        longestLength = v.length;
      }
    }
    if (longest) {
      const original = longest.get() as string;
      // one cut when this string can absorb the whole excess, else halve it and look again
      const absorbing = original.length - excess - 40;
      const keep = absorbing >= MIN_STRING ? absorbing : Math.max(MIN_STRING, original.length >> 1);
      longest.set(`${original.slice(0, keep)}…[${original.length - keep} characters cut]`);
    } else {
      let widest: Slot | undefined;
      let widestLength = 1;
      for (const slot of all) {
        const v = slot.get();
        if (Array.isArray(v) && v.length > widestLength) {
          widest = slot;
          widestLength = v.length;
        }
      }
      if (!widest) break;
      const array = widest.get() as Json[];
      const keep = Math.ceil(array.length / 2);
      widest.set([...array.slice(0, keep), `…[${array.length - keep} more items cut]`]);
    }
    text = JSON.stringify(root.value);
  }
  return text;
}
