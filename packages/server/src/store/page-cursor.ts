/**
 * The cursors of paged reads (a trace list, a trace's events): the last row's sort key and id,
 * as base64url JSON. Opaque to clients; a cursor this service did not write decodes to nothing.
 */
export function encodePageCursor(key: string, id: string): string {
  return Buffer.from(JSON.stringify([key, id])).toString('base64url');
}

/** The [key, id] of a cursor whose parts pass `validKey` and `validId`; else undefined. */
export function decodePageCursor(
  cursor: string,
  validKey: (key: string) => boolean,
  validId: (id: string) => boolean,
): [string, string] | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (
      Array.isArray(value) &&
      value.length === 2 &&
      typeof value[0] === 'string' &&
      typeof value[1] === 'string' &&
      validKey(value[0]) &&
      validId(value[1])
    )
      return [value[0], value[1]];
  } catch {
    // not base64url JSON: not a cursor this service wrote
  }
  return undefined;
}
