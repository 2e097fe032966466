import type { SqlExecutor } from './sql-client.js';
import { isoFromRow } from './row-dates.js';

/** What the audit log records: deletions and changes of an agent's lifecycle settings. */
export const AUDIT_ACTIONS = [
  'run.deleted',
  'agent.deleted',
  'lifecycle.changed',
  'runs.expired',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/** One record, as written. */
export interface AuditRecord {
  /** `admin`, `user:<sub>`, `cli` or `system`. */
  actor: string;
  action: AuditAction;
  agentId: string | null;
  traceId?: string | null;
  /** What was deleted or changed (counts, old and new values); never payloads. */
  details?: Record<string, unknown>;
}

/** One record, as read: with its id and time. */
export interface AuditEntry extends Required<AuditRecord> {
  id: string;
  at: string;
}

/** Above every id (bigint's largest). */
const LAST_ID = '9223372036854775807';

const INSERT = `INSERT INTO audit_log (actor, action, agent_id, trace_id, details)
  VALUES ($1, $2, $3, $4, $5::json)`;

/**
 * Writes `record` with `sql`: the store itself, or the transaction that makes the change it
 * records, so that the change and its record commit together.
 */
export async function recordAudit(sql: SqlExecutor, record: AuditRecord): Promise<void> {
  await sql.query(INSERT, [
    record.actor,
    record.action,
    record.agentId,
    record.traceId ?? null,
    JSON.stringify(record.details ?? {}),
  ]);
}

/** The audit log: written where changes are made, read by the admin API. */
export class AuditStore {
  constructor(private readonly sql: SqlExecutor) {}

  record(record: AuditRecord): Promise<void> {
    return recordAudit(this.sql, record);
  }

  /**
   * Entries newest first, of one agent when `agentId` is given: at most `limit` before the
   * entry `before` (an id), through audit_log_agent_idx or the primary key.
   */
  async list(options: {
    agentId?: string | undefined;
    before?: string | undefined;
    limit: number;
  }): Promise<AuditEntry[]> {
    // one statement per case, each a backward range of its index
    const byAgent = options.agentId !== undefined;
    const rows = await this.sql.query<{
      id: string;
      at: Date | string;
      actor: string;
      action: AuditAction;
      agentId: string | null;
      traceId: string | null;
      details: Record<string, unknown>;
    }>(
      `SELECT l.id::text AS id, l.at, l.actor, l.action, l.agent_id AS "agentId",
              l.trace_id AS "traceId", l.details
       FROM audit_log l
       WHERE l.id < $1::bigint ${byAgent ? 'AND l.agent_id = $3' : ''}
       ORDER BY l.id DESC
       LIMIT $2`,
      [options.before ?? LAST_ID, options.limit, ...(byAgent ? [options.agentId] : [])],
    );
    return rows.map((row) => ({
      ...row,
      at: isoFromRow(row.at),
    }));
  }
}
