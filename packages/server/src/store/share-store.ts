import type { Event, MemberRole, Trace } from '@flightlog/protocol';
import { encodeEventCursor, eventPage, type EventPosition } from './event-pages.js';
import type { SqlClient } from './sql-client.js';
import { TRACE_COLUMNS, traceFromRow, type TraceRow } from './trace-rows.js';

/** A run's share link as stored: never the token itself (see migration 014). */
export interface StoredShare {
  traceId: string;
  tokenHash: string;
  sealedToken: string;
}

/** What storing a run's share link did. */
export type ShareWrite =
  /** The run had none: this one is its link now. */
  | { kind: 'stored' }
  /** The run already had one (a concurrent request's, say): that one stays. */
  | { kind: 'kept'; share: StoredShare }
  /** No such run. */
  | { kind: 'no-trace' };

/** Public share links of runs, one per run at most. */
export class ShareStore {
  constructor(private readonly sql: SqlClient) {}

  /** The role `userId` has on the agent of run `traceId`: undefined for none, or no such run. */
  async roleOnRun(userId: string, traceId: string): Promise<MemberRole | undefined> {
    const [row] = await this.sql.query<{ role: MemberRole }>(
      `SELECT m.role FROM traces t
       JOIN members m ON m.agent_id = t.agent_id AND m.user_id = $2
       WHERE t.id = $1`,
      [traceId, userId],
    );
    return row?.role;
  }

  /** True when run `traceId` is stored. */
  async runExists(traceId: string): Promise<boolean> {
    const rows = await this.sql.query('SELECT 1 FROM traces WHERE id = $1', [traceId]);
    return rows.length > 0;
  }

  /** The share link of `traceId`, if it has one. */
  async shareOf(traceId: string): Promise<StoredShare | undefined> {
    const [row] = await this.sql.query<StoredShare>(
      `SELECT trace_id AS "traceId", token_hash AS "tokenHash", sealed_token AS "sealedToken"
       FROM trace_shares WHERE trace_id = $1`,
      [traceId],
    );
    return row;
  }

  /** Stores `share` as the run's link unless it has one already. */
  async put(share: StoredShare, sharedBy: string): Promise<ShareWrite> {
    const inserted = await this.sql.query<{ traceId: string }>(
      `INSERT INTO trace_shares (trace_id, token_hash, sealed_token, shared_by)
       SELECT t.id, $2, $3, $4 FROM traces t WHERE t.id = $1
       ON CONFLICT (trace_id) DO NOTHING
       RETURNING trace_id AS "traceId"`,
      [share.traceId, share.tokenHash, share.sealedToken, sharedBy],
    );
    if (inserted.length > 0) return { kind: 'stored' };
    const existing = await this.shareOf(share.traceId);
    return existing ? { kind: 'kept', share: existing } : { kind: 'no-trace' };
  }

  /** Removes the run's link; true when it had one. */
  async remove(traceId: string): Promise<boolean> {
    const removed = await this.sql.query<{ traceId: string }>(
      'DELETE FROM trace_shares WHERE trace_id = $1 RETURNING trace_id AS "traceId"',
      [traceId],
    );
    return removed.length > 0;
  }

  /** The id of the run shared under the token whose hash is `tokenHash`. */
  async traceIdOf(tokenHash: string): Promise<string | undefined> {
    const [row] = await this.sql.query<{ traceId: string }>(
      'SELECT trace_id AS "traceId" FROM trace_shares WHERE token_hash = $1',
      [tokenHash],
    );
    return row?.traceId;
  }

  /**
   * The run shared under the token whose hash is `tokenHash`, with one page of its events (as
   * the read API pages them); undefined for a token that shares nothing (never did, unshared, or
   * its run deleted).
   */
  async sharedTrace(
    tokenHash: string,
    page: { limit: number; maxBytes: number; after?: EventPosition },
  ): Promise<{ trace: Trace; events: Event[]; nextCursor: string | null } | undefined> {
    const [trace] = await this.sql.query<TraceRow>(
      `SELECT ${TRACE_COLUMNS} FROM traces t
       JOIN trace_shares s ON s.trace_id = t.id
       WHERE s.token_hash = $1`,
      [tokenHash],
    );
    if (!trace) return undefined;
    const { events, next } = await eventPage(this.sql, trace.id, page);
    return {
      trace: traceFromRow(trace),
      events,
      nextCursor: next ? encodeEventCursor(next) : null,
    };
  }
}
