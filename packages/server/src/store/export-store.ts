import type { Trace } from '@flightlog/protocol';
import {
  eventHeads,
  eventPage,
  type EventHead,
  type EventPage,
  type EventPosition,
} from './event-pages.js';
import type { SqlExecutor } from './sql-client.js';
import { CURSOR_TIME, TRACE_COLUMNS, traceFromRow, type TraceRow } from './trace-rows.js';

/** A run's place in an export's order: its start to the microsecond (UTC), then its id. */
export type ExportPosition = [startedAt: string, id: string];

export interface ExportedTrace {
  trace: Trace;
  position: ExportPosition;
}

/** Which of an agent's runs a page of an export holds. */
export interface ExportPageRange {
  /** Runs started at or after this instant (ISO 8601). */
  since?: string;
  /** Runs started before this instant (ISO 8601). */
  until?: string;
  /** Runs after this place (a cursor), exclusive. */
  after?: ExportPosition;
  limit: number;
}

/**
 * The reads of an export (lifecycle/export.ts): an agent's runs oldest first, one page per
 * statement, and their events in pages (event-pages.ts). Each read is a statement of its own,
 * outside any transaction, so an export of any length holds no connection and no lock between
 * its pages.
 */
export class ExportStore {
  constructor(private readonly sql: SqlExecutor) {}

  /**
   * One page of the agent's runs in start order (then id), after `after`, within since/until.
   * A walk of traces_agent_started_idx (read backwards) from the cursor: each page costs its
   * rows, however many runs came before it. A run being deleted (its tombstone is there, its
   * rows are going) is left out.
   */
  async tracePage(agentId: string, range: ExportPageRange): Promise<ExportedTrace[]> {
    const params: unknown[] = [agentId];
    const param = (value: unknown): string => `$${params.push(value)}`;
    const where = ['t.agent_id = $1'];
    if (range.after)
      where.push(
        `(t.started_at, t.id) > (${param(range.after[0])}::timestamptz, ${param(range.after[1])}::text)`,
      );
    if (range.since !== undefined) where.push(`t.started_at >= ${param(range.since)}::timestamptz`);
    if (range.until !== undefined) where.push(`t.started_at < ${param(range.until)}::timestamptz`);
    const rows = await this.sql.query<TraceRow & { cursorTime: string }>(
      `SELECT ${TRACE_COLUMNS}, ${CURSOR_TIME}
  FROM traces t
  WHERE ${where.join('\n    AND ')}
    AND NOT EXISTS (SELECT 1 FROM trace_tombstones d
                    WHERE d.trace_id = t.id AND d.agent_id = t.agent_id)
  ORDER BY t.started_at, t.id
  LIMIT ${param(range.limit)}`,
      params,
    );
    return rows.map(({ cursorTime, ...row }) => ({
      trace: traceFromRow(row),
      position: [cursorTime, row.id],
    }));
  }

  /** The first events of each of `traceIds`, in two statements (see event-pages.ts). */
  eventHeads(
    traceIds: readonly string[],
    options: { perTrace: number; maxBytes: number },
  ): Promise<EventHead[]> {
    return eventHeads(this.sql, traceIds, options);
  }

  /** The events of one trace after `after`, one bounded page (see event-pages.ts). */
  eventPage(
    traceId: string,
    page: { limit: number; maxBytes: number; after: EventPosition },
  ): Promise<EventPage> {
    return eventPage(this.sql, traceId, page);
  }
}
