import type { FieldError } from '@flightlog/protocol';

/**
 * Where a route's body holds agent data whose keys are the agent's own (an event's `payload`):
 * a JSON path whose `*` segments match any array index or key. `__proto__` and
 * `constructor.prototype` keys inside such data are kept as data; anywhere else they are refused.
 */
export type DataPath = readonly string[];

/** Field errors listed for prototype keys, at most (the problem body stays bounded). */
const MAX_REPORTED = 100;

/** RFC 6901 escaping of one pointer segment. */
function segment(key: string | number): string {
  return String(key).replaceAll('~', '~0').replaceAll('/', '~1');
}

/** A value met on the walk; its pointer is rebuilt from the parents only when it is reported. */
interface Visit {
  node: unknown;
  key: string | number;
  parent: Visit | undefined;
  depth: number;
  /** The first segments of its path, as many as the longest data path has (enough to match). */
  head: readonly (string | number)[];
}

function pointerOf(visit: Visit | undefined): string {
  const segments: string[] = [];
  for (let v = visit; v?.parent !== undefined; v = v.parent) segments.push(`/${segment(v.key)}`);
  return segments.reverse().join('');
}

function insideData(visit: Visit, dataPaths: readonly DataPath[]): boolean {
  return dataPaths.some(
    (data) =>
      visit.depth >= data.length && data.every((s, i) => s === '*' || s === String(visit.head[i])),
  );
}

/**
 * The prototype keys of a value parsed by `JSON.parse` (which makes `__proto__` an own data
 * property and never sets a prototype) that lie outside `dataPaths`, as field errors naming each
 * by its JSON pointer. Iterative and linear (no path is copied past the data paths' length), so
 * a deeply nested body costs no more than its size. Data paths are not looked into: whatever the
 * agent's data holds stays its data.
 */
export function prototypeKeyErrors(value: unknown, dataPaths: readonly DataPath[]): FieldError[] {
  const errors: FieldError[] = [];
  const headLength = Math.max(0, ...dataPaths.map((d) => d.length));
  const stack: Visit[] = [{ node: value, key: '', parent: undefined, depth: 0, head: [] }];
  while (stack.length > 0 && errors.length < MAX_REPORTED) {
    const visit = stack.pop() as Visit;
    const { node, depth } = visit;
    if (node === null || typeof node !== 'object' || insideData(visit, dataPaths)) continue;
    const child = (key: string | number, next: unknown): Visit => ({
      node: next,
      key,
      parent: visit,
      depth: depth + 1,
      head: depth < headLength ? [...visit.head, key] : visit.head,
    });
    if (Array.isArray(node)) {
      for (let i = node.length - 1; i >= 0; i--) stack.push(child(i, node[i]));
      continue;
    }
    const record = node as Record<string, unknown>;
    if (Object.hasOwn(record, '__proto__'))
      errors.push({
        pointer: `${pointerOf(visit)}/__proto__`,
        detail: 'the key __proto__ is not allowed here (only inside an event payload)',
      });
    const ctor = Object.hasOwn(record, 'constructor') ? record.constructor : undefined;
    if (typeof ctor === 'object' && ctor !== null && Object.hasOwn(ctor, 'prototype'))
      errors.push({
        pointer: `${pointerOf(visit)}/constructor/prototype`,
        detail:
          'the keys constructor.prototype are not allowed here (only inside an event payload)',
      });
    const keys = Object.keys(record);
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i] as string;
      stack.push(child(key, record[key]));
    }
  }
  return errors;
}
