import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ExactDecimal, parseDecimal } from '../../src/exact-decimal.js';
import { TraceAggregates } from '../../src/trace-aggregates.js';

/**
 * The reference for one amount, built from the number's shortest round-trip text alone: the
 * digits of String(value) with the exponent applied by moving the decimal point, rounded half up
 * to 12 places by looking at the 13th digit, written without needless zeros.
 */
function reference(value: number): string {
  const text = String(value);
  const [mantissa = '', exponentText = '0'] = text.split('e');
  const [whole = '', fraction = ''] = mantissa.split('.');
  let digits = whole + fraction;
  let point = whole.length + Number(exponentText); // decimal point position within `digits`
  if (point < 0) {
    digits = '0'.repeat(-point) + digits;
    point = 0;
  }
  if (point > digits.length) digits += '0'.repeat(point - digits.length);
  const intPart = digits.slice(0, point) || '0';
  const fracPart = digits.slice(point).padEnd(13, '0');
  let units = BigInt(intPart + fracPart.slice(0, 12));
  if (Number(fracPart[12]) >= 5) units += 1n;
  const unitText = units.toString().padStart(13, '0');
  const intText = unitText.slice(0, -12).replace(/^0+(?=\d)/, '');
  const fracText = unitText.slice(-12).replace(/0+$/, '');
  return fracText === '' ? intText : `${intText}.${fracText}`;
}

const sumOf = (values: number[]) => {
  const sum = new ExactDecimal();
  for (const value of values) sum.add(value);
  return sum.toString();
};

describe('trace aggregates are exact', () => {
  it('sums 10,000 × 0.1 to exactly "1000", where floating point drifts', () => {
    const sum = new ExactDecimal();
    let float = 0;
    for (let i = 0; i < 10_000; i++) {
      sum.add(0.1);
      float += 0.1;
    }
    expect(float).not.toBe(1000);
    expect(sum.toString()).toBe('1000');
  });

  it('keeps 12 decimal places exactly, large amounts included, and writes plain decimals', () => {
    const sum = new ExactDecimal();
    for (const value of [0.00042, 1e-7, 2.5e-8, 1e21, 0.1, 0.2]) expect(sum.add(value)).toBe(true);
    expect(sum.toString()).toBe('1000000000000000000000.300420125');
    // past 2^53 units (~9,007 dollars) the sum moves to BigInt without losing a unit
    const large = new ExactDecimal();
    for (let i = 0; i < 5; i++) large.add(4_000.000000000001);
    expect(large.toString()).toBe('20000.000000000005');
    expect(parseDecimal('0.0000000000005')).toBe(1n);
    expect(parseDecimal(1.5e-13)).toBe(0n);
    expect(parseDecimal(-1)).toBeUndefined();
    expect(sum.add(-1)).toBe(false);
    expect(sum.add(Number.NaN)).toBe(false);
    const noisy = new ExactDecimal();
    noisy.add((40 * 0.15 + 23 * 0.6) / 1e6);
    noisy.add(1e-13);
    expect(noisy.toString()).toBe('0.0000198');
    expect(parseDecimal(Number.POSITIVE_INFINITY)).toBeUndefined();
    expect(new ExactDecimal().toString()).toBe('0');
  });

  it('sums lamports past 2^64 with BigInt, counts chain transactions and de-duplicates tools', () => {
    const fast = new TraceAggregates();
    for (let i = 0; i < 3; i++) fast.addChainTx('4000000000000000'); // 16 digits: the BigInt path
    for (let i = 0; i < 3; i++) fast.addChainTx('999999999999999'); // 15 digits: the double path
    expect(fast.totalLamports()).toBe('14999999999999997');
    const a = new TraceAggregates();
    a.addChainTx('18446744073709551615');
    a.addChainTx('1');
    a.addChainTx('0');
    a.addToolCall('quote');
    a.addToolCall('swap');
    a.addToolCall('quote');
    a.addLlmCall(180, 0.00042);
    a.addLlmCall(20, 0.00042);
    expect(a.totalLamports()).toBe('18446744073709551616');
    expect(a.totalLamports()).toBe('18446744073709551616');
    expect(a.totalCostUsd()).toBe('0.00084');
    expect(a.chainTxCount).toBe(3);
    expect(a.totalTokens).toBe(200);
    expect(a.eventCount).toBe(8);
    expect(a.toolsCalled()).toEqual(['quote', 'swap']);
  });

  it('reads each amount as its shortest decimal text, rounded half up to 12 places (fast path included)', () => {
    // the reported case: value * 1e12 in floating point gives ...8522.5, rounding to ...523
    expect(sumOf([4469.397258048522])).toBe('4469.397258048522');
    expect(reference(4469.397258048522)).toBe('4469.397258048522');
    for (const value of [1e-7, 1.5e-7, 1.5e21, 5e-13, 4.9e-13, 0.0000000000015, 123.4567890123456])
      expect(sumOf([value]), String(value)).toBe(reference(value));
    expect(sumOf([5e-13])).toBe('0.000000000001'); // a half unit rounds up
    expect(sumOf([4.9e-13])).toBe('0');
    const amounts = fc.oneof(
      fc.double({ min: 0, max: 1, noNaN: true }),
      fc.double({ min: 0, max: 1e6, noNaN: true }),
      fc.double({ min: 0, max: 1e40, noNaN: true }),
      // short decimals like real prices, and exact half units at the 13th place
      fc
        .tuple(fc.integer({ min: 0, max: 10 ** 9 }), fc.integer({ min: 0, max: 15 }))
        .map(([n, places]) => n / 10 ** places),
      fc.integer({ min: 0, max: 10 ** 6 }).map((n) => (2 * n + 1) * 5e-13),
    );
    fc.assert(
      fc.property(amounts, (value) => {
        expect(sumOf([value])).toBe(reference(value));
      }),
      { numRuns: 20_000 },
    );
    // a sum is the sum of the amounts rounded one by one
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 0, max: 1_000, noNaN: true }), { maxLength: 20 }),
        (values) => {
          const expected = values.reduce(
            (total, v) => total + (parseDecimal(reference(v)) ?? 0n),
            0n,
          );
          expect(parseDecimal(sumOf(values))).toBe(expected);
        },
      ),
      { numRuns: 2_000 },
    );
  });

  it('saturates totalLamports at 80 digits (the wire’s limit) instead of losing the trace', () => {
    const a = new TraceAggregates();
    const big = '9'.repeat(79);
    expect(a.addChainTx(big)).toBe(false);
    expect(a.addChainTx(big)).toBe(false); // 80 digits: still fits
    expect(a.totalLamports()).toBe(`1${'9'.repeat(78)}8`);
    expect(a.addChainTx('9'.repeat(80))).toBe(true); // this one would pass 80 digits
    expect(a.totalLamports()).toBe('9'.repeat(80));
    expect(a.addChainTx('1')).toBe(false); // reported once; stays at the cap
    expect(a.addChainTx(big)).toBe(false);
    expect(a.totalLamports()).toBe('9'.repeat(80));
    expect(a.chainTxCount).toBe(5);
  });

  it('keeps toolsCalled within the schema: 1,024 names of at most 256 characters', () => {
    const a = new TraceAggregates();
    for (let i = 0; i < 1_100; i++) a.addToolCall(`tool-${i}`);
    a.addToolCall('x'.repeat(300));
    expect(a.toolsCalled()).toHaveLength(1_024);
    expect(a.toolsOverflowed).toBe(true);
    const b = new TraceAggregates();
    b.addToolCall('y'.repeat(300));
    expect(b.toolsCalled()[0]).toHaveLength(256);
  });
});
