const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;

/**
 * The widest UTC offset PostgreSQL reads (±15:59; real zones span -12:00 to +14:00). RFC 3339
 * allows up to ±23:59, but a wider offset would pass here and then fail in the database.
 */
const MAX_OFFSET_HOURS = 15;

/**
 * The instants the service stores, in epoch milliseconds: 0001-01-01T00:00:00.000Z to
 * 9999-12-31T23:59:59.999Z (the date-time rule below at millisecond precision: a four-digit year,
 * what PostgreSQL's timestamptz holds and returns).
 */
export const INSTANT_MIN_MS = -62_135_596_800_000;
export const INSTANT_MAX_MS = 253_402_300_799_999;

/** Days of each month of a common year. */
const MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

const daysIn = (year: number, month: number): number =>
  month === 2 && year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)
    ? 29
    : (MONTH_DAYS[month - 1] as number);

const DOT = 46;
const PLUS = 43;
const MINUS = 45;
const isDigit = (code: number): boolean => code >= 48 && code <= 57;

/** The value of the two ASCII digits of `text` at `at` (the pattern has checked they are). */
const twoDigits = (text: string, at: number): number =>
  (text.charCodeAt(at) - 48) * 10 + text.charCodeAt(at + 1) - 48;

/**
 * Whether a fraction of a second reaches the next second once rounded to microseconds, as
 * PostgreSQL stores it (`.9999995` and up). Half-way counts as up: PostgreSQL's float rounding
 * may go either way there, and refusing is the side that cannot store a year 10000.
 */
const roundsToNextSecond = (fraction: string | undefined): boolean =>
  fraction !== undefined && /^9{6}[5-9]/.test(fraction);

/**
 * True for an RFC 3339 date-time with a time zone that names a real instant (no 30 February, no
 * hour 24, no leap second, an offset of at most ±15:59) that, rounded to microseconds as it is
 * stored, lies between 0001-01-01T00:00Z and 9999-12-31T23:59:59.999999Z, so that it can be
 * stored and returned in UTC with a four-digit year. The schemas' `date-time` format: the one
 * rule for every timestamp the service takes.
 */
export function isIsoDateTime(value: string): boolean {
  // test(), not exec(): every batch checks two of these per event, and a match array with its
  // captured strings was most of what checking one allocated. The fields are read at their
  // places in the text the pattern matched, without a string or a Date per field.
  if (!DATE_TIME.test(value)) return false;
  const year = twoDigits(value, 0) * 100 + twoDigits(value, 2);
  const month = twoDigits(value, 5);
  const day = twoDigits(value, 8);
  const hour = twoDigits(value, 11);
  const minute = twoDigits(value, 14);
  const second = twoDigits(value, 17);
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return false;
  if (hour > 23 || minute > 59 || second > 59) return false;
  // the zone follows the seconds, or the fraction's digits after them
  let zone = 19;
  if (value.charCodeAt(zone) === DOT)
    do zone++;
    while (isDigit(value.charCodeAt(zone)));
  const sign = value.charCodeAt(zone);
  let utcMinuteOfDay = hour * 60 + minute;
  if (sign === PLUS || sign === MINUS) {
    const offsetHours = twoDigits(value, zone + 1);
    const offsetMinutes = twoDigits(value, zone + 4);
    if (offsetHours > MAX_OFFSET_HOURS || offsetMinutes > 59) return false;
    utcMinuteOfDay -= (sign === PLUS ? 1 : -1) * (offsetHours * 60 + offsetMinutes);
  }
  // Only the first and last day of the range can leave it once the offset is applied, and only
  // its last second once rounded (rounding goes up, never below year 1).
  if (year === 1 && month === 1 && day === 1 && utcMinuteOfDay < 0) return false;
  if (year === 9999 && month === 12 && day === 31) {
    if (utcMinuteOfDay >= 24 * 60) return false;
    const fraction = zone > 19 ? value.slice(20, zone) : undefined;
    if (utcMinuteOfDay === 24 * 60 - 1 && second === 59 && roundsToNextSecond(fraction))
      return false;
  }
  return true;
}
