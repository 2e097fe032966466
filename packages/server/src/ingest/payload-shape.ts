/** What makes a payload unstorable as sent. */
export type PayloadFlaw = 'too-deep' | 'non-finite-number';

// The walk's stack, kept between calls: every event's payload is walked, and a pair per value
// plus an array of values per object were an eighth of what a large batch allocated. A slot is
// emptied as it is taken, so the stack holds no payload after a walk; one grown past
// KEPT_SLOTS by a huge payload is let go.
const pending: (object | undefined)[] = [];
const depths: number[] = [];
const KEPT_SLOTS = 4096;
let top = 0;

/**
 * Finds what would stop a payload from being stored as sent, iteratively, so inspecting a hostile
 * value cannot overflow a stack. Deep payloads would overflow V8's or PostgreSQL's stack while
 * serialised or stored, failing the request with a server error. A number too large for a double
 * (`1e999`) parses as Infinity and would be stored as `null`: a silent change, refused instead.
 */
export function payloadFlaw(value: unknown, maxDepth: number): PayloadFlaw | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : 'non-finite-number';
  if (value === null || typeof value !== 'object') return undefined;
  top = 0;
  queue(value, 1);
  try {
    while (top > 0) {
      top--;
      const current = pending[top] as Record<string, unknown> | unknown[];
      pending[top] = undefined;
      const depth = depths[top] as number;
      if (depth > maxDepth) return 'too-deep';
      if (Array.isArray(current)) {
        for (const child of current) if (flawOf(child, depth)) return 'non-finite-number';
      } else {
        for (const key in current) {
          if (Object.hasOwn(current, key) && flawOf(current[key], depth))
            return 'non-finite-number';
        }
      }
    }
    return undefined;
  } finally {
    if (pending.length > KEPT_SLOTS) {
      pending.length = 0;
      depths.length = 0;
    } else pending.fill(undefined, 0, top);
    top = 0;
  }
}

function queue(child: object, depth: number): void {
  pending[top] = child;
  depths[top] = depth;
  top++;
}

/** True for a number that is not finite; an object or array child is queued to be walked. */
function flawOf(child: unknown, depth: number): boolean {
  if (typeof child === 'number') return !Number.isFinite(child);
  if (child !== null && typeof child === 'object') queue(child, depth + 1);
  return false;
}
