/** What makes a payload unstorable as sent. */
export type PayloadFlaw = 'too-deep' | 'non-finite-number';

/**
 * Finds what would stop a payload from being stored as sent, iteratively, so inspecting a hostile
 * value cannot overflow a stack. Deep payloads would overflow V8's or PostgreSQL's stack while
 * serialised or stored, failing the request with a server error. A number too large for a double
 * (`1e999`) parses as Infinity and would be stored as `null`: a silent change, refused instead.
 */
export function payloadFlaw(value: unknown, maxDepth: number): PayloadFlaw | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : 'non-finite-number';
  if (value === null || typeof value !== 'object') return undefined;
  // Two parallel stacks, numbers checked where they are met, keys walked with for…in: a pair per
  // value and an array of values per object were a twelfth of what a large batch allocated.
  const pending: object[] = [value];
  const depths: number[] = [1];
  while (pending.length > 0) {
    const current = pending.pop() as Record<string, unknown> | unknown[];
    const depth = depths.pop() as number;
    if (depth > maxDepth) return 'too-deep';
    if (Array.isArray(current)) {
      for (const child of current)
        if (!visit(child, depth + 1, pending, depths)) return 'non-finite-number';
    } else {
      for (const key in current) {
        if (Object.hasOwn(current, key) && !visit(current[key], depth + 1, pending, depths))
          return 'non-finite-number';
      }
    }
  }
  return undefined;
}

/** False for a number that is not finite; an object or array is queued at `depth`. */
function visit(child: unknown, depth: number, pending: object[], depths: number[]): boolean {
  if (typeof child === 'number') return Number.isFinite(child);
  if (child !== null && typeof child === 'object') {
    pending.push(child);
    depths.push(depth);
  }
  return true;
}
