import { createHash } from 'node:crypto';

/**
 * Our statements are constant strings, so each is prepared once per connection under a name
 * derived from its text: PostgreSQL parses and plans it once instead of on every request
 * (after five executions it keeps a generic plan when that costs no more than the custom ones).
 * Utility statements (DDL, BEGIN, SET) and an unexpected flood of distinct texts stay unnamed.
 */
const PREPARABLE = /^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b/i;
const MAX_PREPARED = 500;
const statementNames = new Map<string, string>();

/** The name `sql` is prepared under on every connection, or undefined to run it unnamed. */
export function statementName(sql: string): string | undefined {
  let name = statementNames.get(sql);
  if (name === undefined && PREPARABLE.test(sql) && statementNames.size < MAX_PREPARED) {
    name = `fl_${createHash('sha1').update(sql).digest('hex').slice(0, 20)}`;
    statementNames.set(sql, name);
  }
  return name;
}
