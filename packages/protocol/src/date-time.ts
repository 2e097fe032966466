const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d{1,9})?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;

const daysIn = (year: number, month: number) => new Date(Date.UTC(year, month, 0)).getUTCDate();

/**
 * True for an RFC 3339 date-time with a time zone that names a real instant (no 30 February, no
 * hour 24, no leap second) between 0001-01-01T00:00Z and 9999-12-31T23:59:59.999Z, so that it
 * can be returned in UTC with a four-digit year. The schemas' `date-time` format.
 */
export function isIsoDateTime(value: string): boolean {
  const m = DATE_TIME.exec(value);
  if (!m) return false;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return false;
  if (hour > 23 || minute > 59 || second > 59) return false;
  if (m[7] === undefined) return true;
  const offsetHours = Number(m[8]);
  const offsetMinutes = Number(m[9]);
  if (offsetHours > 23 || offsetMinutes > 59) return false;
  // Only the first and last day of the range can leave it once the offset is applied.
  const utcMinuteOfDay =
    hour * 60 + minute - (m[7] === '+' ? 1 : -1) * (offsetHours * 60 + offsetMinutes);
  if (year === 1 && month === 1 && day === 1 && utcMinuteOfDay < 0) return false;
  if (year === 9999 && month === 12 && day === 31 && utcMinuteOfDay >= 24 * 60) return false;
  return true;
}
