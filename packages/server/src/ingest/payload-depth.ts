/**
 * How deeply a JSON value nests. Deep payloads are refused up front: serialising or storing them
 * would overflow a stack (V8's or PostgreSQL's) and fail the whole request with a server error.
 * Iterative, so measuring a hostile value cannot overflow either.
 */
export function exceedsDepth(value: unknown, maxDepth: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop() as [unknown, number];
    if (current === null || typeof current !== 'object') continue;
    if (depth > maxDepth) return true;
    const children = Array.isArray(current) ? current : Object.values(current);
    for (const child of children) {
      if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
    }
  }
  return false;
}
