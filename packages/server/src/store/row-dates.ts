/*
 * Timestamps as rows hold them: a Date from node-postgres and PGlite's parsers, or a string where a
 * query returned the column as text. The wire carries ISO 8601 in UTC.
 */

/** A timestamp column as the wire's ISO text. */
export function isoFromRow(value: unknown): string {
  return value instanceof Date ? value.toISOString() : String(value);
}

/** A nullable timestamp column as ISO text, or null. */
export function isoOrNullFromRow(value: unknown): string | null {
  return value === null || value === undefined ? null : isoFromRow(value);
}
