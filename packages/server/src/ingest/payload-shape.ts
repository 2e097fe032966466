/** What makes a payload unstorable as sent. */
export type PayloadFlaw = 'too-deep' | 'non-finite-number';

/**
 * Finds what would stop a payload from being stored as sent, iteratively, so inspecting a hostile
 * value cannot overflow a stack. Deep payloads would overflow V8's or PostgreSQL's stack while
 * serialised or stored, failing the request with a server error. A number too large for a double
 * (`1e999`) parses as Infinity and would be stored as `null`: a silent change, refused instead.
 */
export function payloadFlaw(value: unknown, maxDepth: number): PayloadFlaw | undefined {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop() as [unknown, number];
    if (typeof current === 'number') {
      if (!Number.isFinite(current)) return 'non-finite-number';
      continue;
    }
    if (current === null || typeof current !== 'object') continue;
    if (depth > maxDepth) return 'too-deep';
    const children = Array.isArray(current) ? current : Object.values(current);
    for (const child of children) {
      if (typeof child === 'number' || (child !== null && typeof child === 'object'))
        stack.push([child, depth + 1]);
    }
  }
  return undefined;
}
