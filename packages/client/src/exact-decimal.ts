/**
 * Decimal places kept for amounts (a millionth of a millionth of a dollar); finer digits are
 * rounded. Besides bounding the text, this absorbs the binary noise of costs the host computed in
 * floating point: (40 * 0.15 + 23 * 0.6) / 1e6 is 0.000019799999999999997 as a double, kept as
 * 0.0000198.
 */
export const DECIMAL_PLACES = 12;
const UNIT = 1e12; // 10 ** DECIMAL_PLACES, exactly representable
const BIG_UNIT = 10n ** BigInt(DECIMAL_PLACES);
/** The wire's decimal strings hold at most 80 characters. */
const MAX_TEXT = 80;
const NUMBER_TEXT = /^(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?$/i;

/**
 * A non-negative finite number or plain decimal string as a count of 10^-12 units, rounded half
 * up; read by its shortest round-trip text, so 0.1 is exactly one tenth, not the binary double
 * nearest to it. Undefined for anything else.
 */
export function parseDecimal(value: number | string): bigint | undefined {
  if (typeof value === 'number' && (!Number.isFinite(value) || value < 0)) return undefined;
  const match = NUMBER_TEXT.exec(String(value));
  if (!match) return undefined;
  const [, whole = '0', fraction = '', exponentText] = match;
  const exponent = exponentText === undefined ? 0 : Number(exponentText);
  if (Math.abs(exponent) > 400) return exponent < 0 ? 0n : undefined;
  const digits = BigInt(whole + fraction);
  const shift = DECIMAL_PLACES - fraction.length + exponent; // units = digits × 10^shift
  if (shift >= 0) return digits * 10n ** BigInt(shift);
  const divisor = 10n ** BigInt(-shift);
  return (digits + divisor / 2n) / divisor;
}

/**
 * Below this many units (about 562 dollars) the scaled double is close enough to the exact
 * decimal value that the fast path below can decide the rounding; larger amounts take the
 * BigInt path.
 */
const FAST_UNITS = 2 ** 49;
/**
 * Bound on how far `value * 1e12`, computed in floating point, can be from the exact scaled value
 * of the number's shortest decimal text, relative to the product: the text is within half an ulp
 * of the double, the product within half an ulp of the true product, together under
 * 2^-52 ≈ 2.2e-16 of it. Rounded up for margin.
 */
const PRODUCT_ERROR = 4e-16;

/**
 * An exact running sum of non-negative amounts (the trace's `totalCostUsd`) in 10^-12 units.
 * Each amount counts as the decimal its shortest round-trip text says (`String(value)`: 0.1 is
 * one tenth, 4469.397258048522 is that, not the binary double nearest to it), rounded half up to
 * 12 places. The hot path decides the rounding from the scaled double when the exact value is
 * provably on the same side of the rounding boundary (it is not within the product's error of a
 * half unit); otherwise, and for large amounts, it reads the text exactly with BigInt. Sums
 * are kept as whole units in a double while exact (below 2^53 units, about 9,007 dollars), then
 * in BigInt, so ten thousand additions of 0.1 make exactly "1000", where floating point drifts.
 */
export class ExactDecimal {
  private small = 0;
  private big = 0n;

  /** Adds a non-negative finite amount; false (and nothing added) when it is not one. */
  add(value: number): boolean {
    if (!(value >= 0) || value === Number.POSITIVE_INFINITY) return false;
    const scaled = value * UNIT;
    if (scaled < FAST_UNITS) {
      const fraction = scaled - Math.floor(scaled);
      if (Math.abs(fraction - 0.5) > scaled * PRODUCT_ERROR + 1e-9) {
        // Not near a tie: the exact scaled value rounds to the same whole unit as the double.
        this.addUnits(Math.round(scaled));
        return true;
      }
    }
    const units = parseDecimal(value);
    if (units === undefined) return false;
    this.big += units;
    return true;
  }

  private addUnits(units: number): void {
    if (this.small + units > Number.MAX_SAFE_INTEGER) {
      this.big += BigInt(this.small);
      this.small = 0;
    }
    this.small += units;
  }

  /**
   * Plain decimal text without exponent or needless zeros: `0`, `12`, `0.00042`. A total past the
   * wire's 80 characters (10^67 dollars and more) is written as 80 nines: capped, never refused.
   */
  toString(): string {
    const total = this.big + BigInt(this.small);
    const whole = (total / BIG_UNIT).toString();
    const fraction = (total % BIG_UNIT).toString().padStart(DECIMAL_PLACES, '0').replace(/0+$/, '');
    const text = fraction === '' ? whole : `${whole}.${fraction}`;
    // Beyond 80 characters the wire refuses the trace: an absurd total is capped, not sent.
    return text.length <= MAX_TEXT ? text : '9'.repeat(MAX_TEXT);
  }
}
