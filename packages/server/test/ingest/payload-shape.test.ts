import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { payloadFlaw } from '../../src/ingest/payload-shape.js';

/** The rule said plainly, recursively (fine for the small values generated here). */
function reference(value: unknown, maxDepth: number, depth = 1): Set<string> {
  const flaws = new Set<string>();
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) flaws.add('non-finite-number');
    return flaws;
  }
  if (value === null || typeof value !== 'object') return flaws;
  if (depth > maxDepth) flaws.add('too-deep');
  for (const child of Object.values(value))
    for (const flaw of reference(child, maxDepth, depth + 1)) flaws.add(flaw);
  return flaws;
}

const nested = (depth: number): unknown => {
  let value: unknown = { leaf: 1 };
  for (let i = 1; i < depth; i++) value = { child: value };
  return value;
};

describe('payloadFlaw', () => {
  it('passes what can be stored as sent, and names what cannot', () => {
    expect(payloadFlaw({ messages: [{ role: 'user', content: 'hi' }], tokens: 3 }, 64)).toBe(
      undefined,
    );
    expect(payloadFlaw('text', 64)).toBe(undefined);
    expect(payloadFlaw(null, 64)).toBe(undefined);
    expect(payloadFlaw(Infinity, 64)).toBe('non-finite-number');
    expect(payloadFlaw({ usage: { tokens: [1, 2, -Infinity] } }, 64)).toBe('non-finite-number');
    expect(payloadFlaw({ cost: NaN }, 64)).toBe('non-finite-number');
    expect(payloadFlaw(nested(64), 64)).toBe(undefined);
    expect(payloadFlaw(nested(65), 64)).toBe('too-deep');
  });

  it('walks a payload far deeper than the stack without overflowing it', () => {
    expect(payloadFlaw(nested(200_000), 64)).toBe('too-deep');
  });

  it('answers each walk on its own, one that stopped early before it or not', () => {
    // stops at the first value with many siblings still queued
    const wide = { bad: Infinity, rest: Array.from({ length: 10_000 }, () => ({ x: 1 })) };
    expect(payloadFlaw(wide, 64)).toBe('non-finite-number');
    expect(payloadFlaw({ fine: [1, 2, 3] }, 64)).toBe(undefined);
    const deepAfterWide = Array.from({ length: 10_000 }, () => [{}]);
    expect(payloadFlaw(deepAfterWide, 2)).toBe('too-deep');
    expect(payloadFlaw([[]], 2)).toBe(undefined);
  });

  it('agrees with the rule said plainly on any JSON-like value', () => {
    const withFlaws = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: 'small' },
        fc.oneof(
          fc.string(),
          fc.boolean(),
          fc.constant(null),
          fc.double(),
          fc.constantFrom(Infinity, -Infinity, NaN),
        ),
        fc.array(tie('value'), { maxLength: 4 }),
        fc.dictionary(fc.string({ maxLength: 4 }), tie('value'), { maxKeys: 4 }),
      ),
    })).value;
    fc.assert(
      fc.property(withFlaws, fc.integer({ min: 1, max: 6 }), (value, maxDepth) => {
        const expected = reference(value, maxDepth);
        const found = payloadFlaw(value, maxDepth);
        // a value with both flaws is refused for either
        if (expected.size === 0) expect(found).toBe(undefined);
        else expect(expected.has(found as string)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });
});
