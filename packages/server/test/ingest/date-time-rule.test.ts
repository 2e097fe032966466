import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { INSTANT_MAX_MS, INSTANT_MIN_MS, isIsoDateTime } from '@flightlog/protocol';

/*
 * The one rule for every timestamp the service takes (the schemas' `date-time` format). It is
 * checked twice per event of every batch, so it reads the fields without allocating; this holds
 * it to a plain statement of the same rule, built on `Date`, which is what it was before.
 */
function reference(value: string): boolean {
  const m =
    /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/.exec(
      value,
    );
  if (!m) return false;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as number[] as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const daysInMonth = new Date(Date.UTC(2000, month, 0)).getUTCDate();
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const days = month === 2 ? (leap ? 29 : 28) : daysInMonth;
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > days) return false;
  if (hour > 23 || minute > 59 || second > 59) return false;
  let utcMinute = hour * 60 + minute;
  if (m[8] !== undefined) {
    if (Number(m[9]) > 15 || Number(m[10]) > 59) return false;
    utcMinute -= (m[8] === '+' ? 1 : -1) * (Number(m[9]) * 60 + Number(m[10]));
  }
  if (year === 1 && month === 1 && day === 1 && utcMinute < 0) return false;
  if (year === 9999 && month === 12 && day === 31) {
    if (utcMinute >= 24 * 60) return false;
    if (utcMinute === 24 * 60 - 1 && second === 59 && /^9{6}[5-9]/.test(m[7] ?? '')) return false;
  }
  return true;
}

const pad = (n: number, width: number) => String(n).padStart(width, '0');

describe('the date-time rule', () => {
  it('knows leap years, month lengths and the ends of the range', () => {
    expect(isIsoDateTime('2024-02-29T00:00:00Z')).toBe(true);
    expect(isIsoDateTime('2000-02-29T00:00:00Z')).toBe(true);
    expect(isIsoDateTime('2023-02-29T00:00:00Z')).toBe(false);
    expect(isIsoDateTime('1900-02-29T00:00:00Z')).toBe(false);
    expect(isIsoDateTime('2026-04-31T00:00:00Z')).toBe(false);
    expect(isIsoDateTime('2026-12-31T23:59:59.999999Z')).toBe(true);
    expect(isIsoDateTime('2026-11-28T24:00:00Z')).toBe(false);
    expect(isIsoDateTime('0001-01-01T00:00:00+00:01')).toBe(false);
    expect(isIsoDateTime('9999-12-31T23:59:59.9999995Z')).toBe(false);
    expect(isIsoDateTime('2026-11-28T10:00:00+16:00')).toBe(false);
  });

  it('is the same range as the millisecond bounds the client checks instants against', () => {
    const text = (ms: number) => new Date(ms).toISOString();
    expect(text(INSTANT_MIN_MS)).toBe('0001-01-01T00:00:00.000Z');
    expect(text(INSTANT_MAX_MS)).toBe('9999-12-31T23:59:59.999Z');
    expect(isIsoDateTime(text(INSTANT_MIN_MS))).toBe(true);
    expect(isIsoDateTime(text(INSTANT_MAX_MS))).toBe(true);
    expect(isIsoDateTime(text(INSTANT_MIN_MS - 1))).toBe(false);
    expect(isIsoDateTime(text(INSTANT_MAX_MS + 1))).toBe(false);
  });

  it('agrees with a plain statement of the rule on any date-time-shaped text', () => {
    const shaped = fc
      .tuple(
        fc.integer({ min: 0, max: 9999 }),
        fc.integer({ min: 0, max: 13 }),
        fc.integer({ min: 0, max: 32 }),
        fc.integer({ min: 0, max: 25 }),
        fc.integer({ min: 0, max: 60 }),
        fc.integer({ min: 0, max: 60 }),
        fc.option(fc.stringMatching(/^[0-9]{1,9}$/)),
        fc.oneof(
          fc.constant('Z'),
          fc
            .tuple(
              fc.constantFrom('+', '-'),
              fc.integer({ min: 0, max: 17 }),
              fc.integer({ min: 0, max: 60 }),
            )
            .map(([sign, h, m]) => `${sign}${pad(h, 2)}:${pad(m, 2)}`),
        ),
      )
      .map(
        ([y, mo, d, h, mi, s, fraction, zone]) =>
          `${pad(y, 4)}-${pad(mo, 2)}-${pad(d, 2)}T${pad(h, 2)}:${pad(mi, 2)}:${pad(s, 2)}` +
          `${fraction === null ? '' : `.${fraction}`}${zone}`,
      );
    fc.assert(
      fc.property(fc.oneof(shaped, fc.string()), (text) => {
        expect(isIsoDateTime(text)).toBe(reference(text));
      }),
      { numRuns: 20_000 },
    );
  });
});
