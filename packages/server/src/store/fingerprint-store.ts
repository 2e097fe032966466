import {
  ANALYSED_STATUSES,
  TRACE_HASH_VERSION,
  TraceFingerprint,
  type TraceHashRecord,
  type TraceStatus,
} from '@flightlog/protocol';
import { eventPage, type EventPosition } from './event-pages.js';
import type { SqlClient } from './sql-client.js';
import { isoFromRow } from './row-dates.js';
import { TRACE_COLUMNS, traceFromRow, type TraceRow } from './trace-rows.js';

/*
 * Fingerprints of finished runs (`traceHash`, see protocol's trace-fingerprint.ts), and the
 * history of each run's fingerprints.
 *
 * A run is hashed as stored, its events read page by page (any length, bounded memory), outside
 * any transaction: a long run must not hold a lock that ingest waits for (PGlite has one
 * connection). The fingerprint is then written only if the run is still what was read — same
 * `updated_at` and as many events (events are only ever added) — else the run changed while it
 * was read and is not fingerprinted now: the change that finalised it again queued another job.
 */

/** Events read per page while hashing, and their bytes at most (one larger event alone). */
const PAGE_EVENTS = 1_000;
const PAGE_BYTES = 4 * 1024 * 1024;

/** What fingerprinting a run did. */
export type FingerprintOutcome =
  /** A new fingerprint: stored as the run's `traceHash`, and added to its history. */
  | { kind: 'fingerprinted'; traceHash: string; n: number }
  /** The run still has the fingerprint it had. */
  | { kind: 'unchanged'; traceHash: string }
  /** The run is not completed or errored (running, timed out), or is gone. */
  | { kind: 'not-finished' }
  /** The run changed while it was read. */
  | { kind: 'changed' };

/** A run taken to be fingerprinted again, until `claimedUntil` (text: exact to the µs). */
export interface DueFingerprint {
  traceId: string;
  claimedUntil: string;
}

type RowWithStamp = TraceRow & { updated: string };

/**
 * Fingerprints kept per run: its first and the latest ones. A client that keeps changing a
 * finished run adds one each time it is fingerprinted again (at most once per analysis grace),
 * so the history is bounded in rows as every other per-run store is, and so is its answer.
 */
export const KEPT_FINGERPRINTS = 100;

export class FingerprintStore {
  constructor(private readonly sql: SqlClient) {}

  /** Fingerprints the run `traceId` as stored now. */
  async fingerprint(traceId: string): Promise<FingerprintOutcome> {
    const [row] = await this.sql.query<RowWithStamp>(
      // updated_at as text: its microseconds survive the round trip (a Date keeps milliseconds)
      `SELECT ${TRACE_COLUMNS}, t.updated_at::text AS updated FROM traces t WHERE t.id = $1`,
      [traceId],
    );
    // Finished means completed or errored, as for analysis: a run that timed out did not finish.
    if (row === undefined || !ANALYSED_STATUSES.includes(row.status))
      return { kind: 'not-finished' };
    const fingerprint = new TraceFingerprint(traceFromRow(row));
    let events = 0;
    let after: EventPosition | undefined;
    do {
      const page = await eventPage(this.sql, traceId, {
        limit: PAGE_EVENTS,
        maxBytes: PAGE_BYTES,
        ...(after ? { after } : {}),
      });
      for (const event of page.events) fingerprint.addEvent(event);
      events += page.events.length;
      after = page.next ?? undefined;
    } while (after !== undefined);
    const traceHash = fingerprint.digest();

    const [written] = await this.sql.query<{
      still: boolean;
      n: number | null;
      last: string | null;
    }>(
      `WITH still AS (
         SELECT t.id, t.status FROM traces t
         WHERE t.id = $1 AND t.updated_at = $2::timestamptz
           AND (SELECT count(*) FROM events e WHERE e.trace_id = t.id) = $3
         FOR UPDATE
       ),
       last AS (
         SELECT h.n, h.trace_hash FROM trace_hashes h WHERE h.trace_id = $1 ORDER BY h.n DESC LIMIT 1
       ),
       -- the run's anchor follows its fingerprint: an unchanged one keeps its proof as it is
       -- (an anchorer may be recording it right now), one already in an anchored tree brings
       -- that proof back, a new one has none until its own tree is anchored. The tree's row is
       -- locked (FOR SHARE): a tree being marked anchored meanwhile is read as it ends up.
       anchored AS (
         SELECT l.proof, b.signature, b.slot, b.state FROM anchor_leaves l
         JOIN anchor_batches b ON b.id = l.batch_id
         WHERE l.trace_id = $1 AND l.trace_hash = $4
           -- (an unchanged fingerprint needs nothing of it: no lock taken for it)
           AND NOT EXISTS (SELECT 1 FROM traces t0 WHERE t0.id = $1 AND t0.trace_hash = $4)
         FOR SHARE OF b
       ),
       stored AS (
         UPDATE traces t SET trace_hash = $4,
           anchored_hash = CASE WHEN EXISTS (SELECT 1 FROM anchored) THEN $4 ELSE t.anchored_hash END,
           merkle_proof = CASE WHEN t.trace_hash = $4 THEN t.merkle_proof
             ELSE (SELECT a.proof FROM anchored a WHERE a.state = 'anchored') END,
           anchor_signature = CASE WHEN t.trace_hash = $4 THEN t.anchor_signature
             ELSE (SELECT a.signature FROM anchored a WHERE a.state = 'anchored') END,
           anchor_slot = CASE WHEN t.trace_hash = $4 THEN t.anchor_slot
             ELSE (SELECT a.slot FROM anchored a WHERE a.state = 'anchored') END
         FROM still s WHERE t.id = s.id RETURNING t.id
       ),
       added AS (
         INSERT INTO trace_hashes (trace_id, n, trace_hash, version, status, event_count)
         SELECT s.id, coalesce((SELECT l.n FROM last l), 0) + 1, $4, $5, s.status, $3
         FROM still s
         WHERE (SELECT count(*) FROM stored) > 0
           AND NOT EXISTS (SELECT 1 FROM last l WHERE l.trace_hash = $4)
         ON CONFLICT (trace_id, n) DO NOTHING
         RETURNING n
       ),
       pruned AS (
         DELETE FROM trace_hashes h
         WHERE h.trace_id = $1 AND h.n > 1 AND h.n <= (SELECT a.n FROM added a) - $6
       )
       SELECT EXISTS (SELECT 1 FROM still) AS still, (SELECT n FROM added) AS n,
              (SELECT trace_hash FROM last) AS last`,
      [traceId, row.updated, events, traceHash, TRACE_HASH_VERSION, KEPT_FINGERPRINTS - 1],
    );
    if (written === undefined || !written.still) return { kind: 'changed' };
    if (written.n !== null) return { kind: 'fingerprinted', traceHash, n: written.n };
    return { kind: 'unchanged', traceHash };
  }

  /**
   * Takes up to `limit` runs marked to be fingerprinted again whose time has come (the batch
   * statement's `refinished`), each for `leaseMs`: a worker that dies leaves them to be taken
   * again. Hand each back with {@link doneDue} once fingerprinted.
   */
  async claimDue(limit: number, leaseMs: number): Promise<DueFingerprint[]> {
    return this.sql.query<DueFingerprint>(
      `UPDATE fingerprint_due d SET due_at = now() + make_interval(secs => $2::float8 / 1000)
       WHERE d.trace_id IN (
         SELECT f.trace_id FROM fingerprint_due f WHERE f.due_at <= now()
         ORDER BY f.due_at LIMIT $1 FOR UPDATE SKIP LOCKED)
       RETURNING d.trace_id AS "traceId", d.due_at::text AS "claimedUntil"`,
      [limit, leaseMs],
    );
  }

  /** Unmarks a run fingerprinted again, unless a change marked it anew since it was claimed. */
  async doneDue(due: DueFingerprint): Promise<void> {
    await this.sql.query(
      'DELETE FROM fingerprint_due WHERE trace_id = $1 AND due_at = $2::timestamptz',
      [due.traceId, due.claimedUntil],
    );
  }

  /**
   * Every fingerprint of the run `traceId`, oldest first, with its current one, when `userId` has
   * a role on its agent; undefined otherwise (no such run, or not theirs).
   */
  async historyForMember(
    userId: string,
    traceId: string,
  ): Promise<{ traceHash: string | null; fingerprints: TraceHashRecord[] } | undefined> {
    const [run] = await this.sql.query<{ trace_hash: string | null }>(
      `SELECT t.trace_hash FROM traces t
       JOIN members m ON m.agent_id = t.agent_id AND m.user_id = $2
       WHERE t.id = $1`,
      [traceId, userId],
    );
    if (run === undefined) return undefined;
    const rows = await this.sql.query<{
      n: number;
      trace_hash: string;
      version: string;
      status: TraceStatus;
      event_count: number;
      computed_at: Date;
    }>(
      `SELECT n, trace_hash, version, status, event_count, computed_at
       FROM trace_hashes WHERE trace_id = $1 ORDER BY n`,
      [traceId],
    );
    return {
      traceHash: run.trace_hash,
      fingerprints: rows.map((r) => ({
        n: r.n,
        traceHash: r.trace_hash,
        version: r.version,
        status: r.status,
        eventCount: r.event_count,
        computedAt: isoFromRow(r.computed_at),
      })),
    };
  }
}
