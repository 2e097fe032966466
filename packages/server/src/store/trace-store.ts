import type {
  BufferBatchItem,
  CompleteTraceBody,
  Event,
  Trace,
  TraceStatus,
} from '@flightlog/protocol';
import { ANALYSED_STATUSES, isIdentifier, isIsoDateTime } from '@flightlog/protocol';
import { FlightlogError } from '../errors/flightlog-error.js';
import { enqueueAnalysisSql } from './analysis-store.js';
import { encodeEventCursor, eventPage, type EventPosition } from './event-pages.js';
import { jsonBytes, toItemJson, type ItemJson } from './batch-json.js';
import { BatchGroups, type GroupLimits, type GroupMember } from './batch-groups.js';
import {
  WRITE_BATCHES,
  batchPartResults,
  batchesParams,
  type BatchPart,
  type BatchPartResult,
  type WriteBatchesRow,
} from './batch-statement.js';
import { IdConflictError } from './id-conflict.js';
import { decodePageCursor, encodePageCursor } from './page-cursor.js';
import type { SqlClient, SqlExecutor } from './sql-client.js';
import { caseInsensitiveLiteral } from './text-pattern.js';
import {
  CURSOR_TIME,
  EVENT_COLUMNS,
  TRACE_COLUMNS,
  eventFromRow,
  traceFromRow,
  type EventRow,
  type TraceRow,
} from './trace-rows.js';

/** A stored event's owner: what refusing an id used elsewhere needs to know. */
export interface StoredEventOwner {
  id: string;
  traceId: string;
  agentId: string;
}

export type VerifyOutcome = 'verified' | 'rejected' | 'ignored';

export interface BatchWrite {
  /** The agent resolved from the API key; already written over every `trace.agentId`. */
  agentId: string;
  batchId: string;
  items: BufferBatchItem[];
  /** The items serialised (toItemJson), when the caller has them already; made here if not. */
  json?: readonly ItemJson[];
  /** jsonBytes(json), when the caller counted it already. */
  jsonBytes?: number;
  /** Present when the body carried a verify token (hash) and the agent id it claims. */
  verify?: { tokenHash: string; claimedAgentId: string | undefined };
  analysisGraceMs: number;
  /**
   * Only creates its traces: when one exists already (or is created meanwhile), nothing is
   * written and the outcome is an id conflict on it (see WRITE_BATCHES, step 2). For writers
   * that would otherwise read a trace before writing it (OTLP exports).
   */
  newTraces?: boolean;
}

export type BatchWriteOutcome =
  | {
      kind: 'accepted';
      traceId: string;
      verify: VerifyOutcome | null;
      /** True when the batch finished a run and so queued its analysis. */
      analysisQueued: boolean;
      /** Traces of the batch that were deleted (tombstoned): their items were not written. */
      droppedTraceIds: string[];
    }
  | { kind: 'duplicate'; traceId: string; verify: VerifyOutcome | null }
  | { kind: 'id-conflict'; pointer: string };

/** What writing a trace's completion did. */
export type StoreCompleteOutcome =
  | { kind: 'completed'; trace: Trace; analysisQueued: boolean }
  | { kind: 'not-found' }
  | { kind: 'ends-before-start' };

/** Filters of the runs list; each one given narrows it, all of them together. */
export interface TraceFilters {
  status?: TraceStatus;
  /** Runs whose tags include this one. */
  tag?: string;
  /** Runs started at or after this instant (ISO 8601). */
  from?: string;
  /** Runs started before this instant (ISO 8601). */
  to?: string;
  /** A case-insensitive substring of the input summary, the output summary or the error message. */
  text?: string;
}

export interface TracePage {
  traces: Trace[];
  nextCursor: string | null;
  /**
   * Set when a filtered page ended at its bound (SCAN_ROWS, SCAN_BYTES) rather than full: the
   * startedAt of the oldest run it read, where nextCursor goes on from. Null otherwise.
   */
  searchedTo: string | null;
}

/** Ids per statement of findIdConflict. */
const CONFLICT_SLICE = 1_000;

/**
 * Starts a statement that is planned for its parameters on every run: not matching
 * prepared-statements.ts's PREPARABLE, it is never prepared, so never given a generic plan.
 */
const UNPREPARED = '-- planned for its values, never prepared\n';

const ANALYSED = ANALYSED_STATUSES.map((status) => `'${status}'`).join(', ');

/**
 * The complete endpoint in one statement: `target` locks the trace (its newest version), the
 * update applies the body unless it would end the run before it started, and a run finalised
 * as completed or errored is queued for analysis (see enqueueAnalysisSql). Absent summary
 * fields stay as they are; an explicit null clears them. With no endedAt the run ends now, but
 * never before it started: an agent whose clock runs ahead of ours can send a startedAt in our
 * future, and its trace must still be finalisable.
 */
const COMPLETE_TRACE = `
WITH target AS (
  SELECT t.id, COALESCE($4::timestamptz < t.started_at, false) AS ends_before_start
  FROM traces t
  WHERE t.id = $1 AND t.agent_id = $2
  FOR UPDATE
),
updated AS (
  UPDATE traces t SET
    status = $3,
    ended_at = COALESCE($4::timestamptz, GREATEST(now(), t.started_at)),
    duration_ms = EXTRACT(EPOCH FROM (
      COALESCE($4::timestamptz, GREATEST(now(), t.started_at)) - t.started_at)) * 1000,
    output_summary = CASE WHEN $5 THEN $6 ELSE t.output_summary END,
    error_message = CASE WHEN $7 THEN $8 ELSE t.error_message END,
    timed_out_at = NULL,
    updated_at = now()
  FROM target
  WHERE t.id = target.id AND NOT target.ends_before_start
  RETURNING ${TRACE_COLUMNS}
),
finished AS (
  SELECT u.id, u."agentId" AS agent_id FROM updated u WHERE u.status IN (${ANALYSED})),
${enqueueAnalysisSql('$9')}
SELECT EXISTS (SELECT 1 FROM target) AS found,
       COALESCE((SELECT ends_before_start FROM target), false) AS "endsBeforeStart",
       (SELECT count(*) FROM queued)::int AS queued,
       u.*
FROM (SELECT 1) AS one
LEFT JOIN updated u ON true`;

/** Transaction-scoped locks on trace ids, taken in the order given (sorted by the caller). */
const LOCK_TRACES = `
SELECT pg_advisory_xact_lock(hashtextextended('flightlog-trace:' || u.id, 0))
FROM unnest($1::text[]) WITH ORDINALITY AS u(id, n)
ORDER BY u.n`;

type CompleteTraceRow = TraceRow & { found: boolean; endsBeforeStart: boolean; queued: number };

const CONSUME_VERIFY_TOKEN = `
WITH consumed AS (
  UPDATE verify_tokens SET consumed_at = now()
  WHERE token_hash = $1 AND agent_id = $2 AND consumed_at IS NULL
  RETURNING agent_id
)
UPDATE agents SET verified_at = COALESCE(verified_at, now())
WHERE id IN (SELECT agent_id FROM consumed)
RETURNING id`;

/**
 * The items of a batch in the rounds it is written in: each round holds each trace id at most
 * once (one statement cannot upsert a row twice), in trace id order; a trace's snapshots keep
 * their order across rounds. Almost every batch is one round.
 */
function roundsOf(items: readonly BufferBatchItem[]): number[][] {
  const order = [...items.keys()].sort((a, b) =>
    compareIds(items[a]!.trace.id, items[b]!.trace.id),
  );
  const rounds: number[][] = [];
  const seen = new Map<string, number>();
  for (const index of order) {
    const id = (items[index] as BufferBatchItem).trace.id;
    const round = seen.get(id) ?? 0;
    seen.set(id, round + 1);
    (rounds[round] ??= []).push(index);
  }
  return rounds;
}

/** A batch's part of a statement, with the analysis grace the statement needs. */
interface GroupedPart extends BatchPart {
  analysisGraceMs: number;
}

/** A batch waiting for its group (see BatchGroups), and how to answer its request. */
interface WaitingBatch extends GroupMember {
  part: GroupedPart;
  resolve: (outcome: BatchWriteOutcome) => void;
  reject: (error: unknown) => void;
}

/** Writes `parts` in one WRITE_BATCHES statement; throws IdConflictError as the statement does. */
async function writeParts(
  sql: SqlExecutor,
  parts: readonly BatchPart[],
  { analysisGraceMs }: { analysisGraceMs: number },
): Promise<BatchPartResult[]> {
  const [row] = await sql.query<WriteBatchesRow>(
    WRITE_BATCHES,
    batchesParams(parts, analysisGraceMs),
  );
  if (!row) throw new Error('the batch statement returned no row');
  return batchPartResults(row, parts.length);
}

/** The answer a batch id accepted before got the first time. */
async function duplicateOf(
  sql: SqlExecutor,
  agentId: string,
  batchId: string,
): Promise<BatchWriteOutcome> {
  const [original] = await sql.query<{ traceId: string; verify: VerifyOutcome | null }>(
    `SELECT trace_id AS "traceId", verify_outcome AS verify FROM accepted_batches
     WHERE agent_id = $1 AND batch_id = $2`,
    [agentId, batchId],
  );
  if (!original) throw new Error('a batch id was taken but has no row');
  return { kind: 'duplicate', traceId: original.traceId, verify: original.verify };
}

/** Cursor of the trace list: the last row's start time (microseconds, UTC) and id. */
export function decodeCursor(cursor: string): [string, string] | undefined {
  return decodePageCursor(
    cursor,
    (startedAt) =>
      /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/.test(startedAt) && isIsoDateTime(startedAt),
    isIdentifier,
  );
}

/** Traces, events, accepted batch ids and the analysis queue: the SQL of ingest and reads. */
export class TraceStore {
  /** The search statement under way (PGlite), which the next one waits for: see searchInTurn. */
  private searchTurn: Promise<unknown> = Promise.resolve();

  /** Group commit, when on (see BatchGroups); off inside a transaction of the caller's. */
  private readonly groups: BatchGroups<WaitingBatch> | undefined;
  /** Statements that wrote more than one batch, and the batches they wrote. */
  groupCommits = 0;
  groupedBatches = 0;
  /** Groups that failed and were written again one batch at a time. */
  groupFallbacks = 0;

  constructor(
    private readonly sql: SqlClient,
    options: { groups?: GroupLimits } = {},
  ) {
    const limits = options.groups;
    this.groups =
      limits && limits.maxBatches > 1
        ? new BatchGroups<WaitingBatch>(limits, (group) => this.writeGroup(group))
        : undefined;
  }

  /**
   * On PGlite, runs a search statement once the one before it has finished and the event loop
   * has had a turn. The engine runs one statement at a time, in arrival order, on the event
   * loop: four searches sent at once would all be ahead of the next user's statement, and one
   * started as soon as another ended (a promise callback) would run before the loop even reads
   * that user's request. Taken in turn, with setImmediate between them (after the loop's I/O),
   * at most one search is ever ahead of anyone else's statement, and each is bounded (see
   * listTraces). A search waits only for other searches; how many wait at once is bounded by
   * the requests the server works on at once (fair admission). On PostgreSQL each statement has
   * a session of its own: nothing to wait for.
   */
  private searchInTurn<T>(work: () => Promise<T>): Promise<T> {
    if (this.sql.engine !== 'pglite') return work();
    const next = () => new Promise<void>((resolve) => setImmediate(resolve)).then(work);
    const run = this.searchTurn.then(next, next);
    this.searchTurn = run.catch(() => {});
    return run;
  }

  /**
   * Applies one batch, all or nothing. A batch whose items name distinct traces (almost all)
   * is one statement, one round trip; with group commit on (see BatchGroups) it may share that
   * statement, and its commit, with the batches that arrived while the store was busy. One with
   * several snapshots of a trace is written in rounds (see roundsOf), and one with a verify token
   * also consumes it: those few run the statement per round in one transaction of their own.
   */
  async writeBatch(write: BatchWrite): Promise<BatchWriteOutcome> {
    const rounds = roundsOf(write.items);
    const json = write.json ?? write.items.map(toItemJson);
    if (rounds.length === 1 && !write.verify) {
      const part = this.partOf(write, json, rounds[0] as number[], true);
      if (!this.groups) return this.writeAlone(part);
      return new Promise<BatchWriteOutcome>((resolve, reject) =>
        this.groups?.add({
          part,
          traceIds: part.round.map((i) => (write.items[i] as BufferBatchItem).trace.id),
          batchKey: `${write.agentId}\u0000${write.batchId}`,
          bytes: write.jsonBytes ?? jsonBytes(json),
          resolve,
          reject,
        }),
      );
    }
    const traceId = (write.items[0] as BufferBatchItem).trace.id;
    try {
      return await this.sql.transaction(async (tx) => {
        let analysisQueued = false;
        const dropped = new Set<string>();
        for (const [n, round] of rounds.entries()) {
          const [result] = await writeParts(tx, [this.partOf(write, json, round, n === 0)], write);
          if (!result?.claimed) return duplicateOf(tx, write.agentId, write.batchId);
          analysisQueued ||= result.analysisQueued;
          for (const id of result.droppedTraceIds) dropped.add(id);
        }
        const verify = write.verify ? await this.consumeVerifyToken(tx, write) : null;
        return {
          kind: 'accepted',
          traceId,
          verify,
          analysisQueued,
          droppedTraceIds: [...dropped],
        };
      });
    } catch (error) {
      if (error instanceof IdConflictError) return { kind: 'id-conflict', pointer: error.pointer };
      throw error;
    }
  }

  private partOf(
    write: BatchWrite,
    json: readonly ItemJson[],
    round: readonly number[],
    claim: boolean,
  ): GroupedPart {
    return {
      agentId: write.agentId,
      batchId: write.batchId,
      items: write.items,
      json,
      round,
      claim,
      analysisGraceMs: write.analysisGraceMs,
      ...(write.newTraces ? { newTraces: true } : {}),
    };
  }

  /** One batch in one statement of its own. */
  private async writeAlone(part: GroupedPart): Promise<BatchWriteOutcome> {
    try {
      const [result] = await writeParts(this.sql, [part], part);
      return await this.outcomeOf(part, result as BatchPartResult);
    } catch (error) {
      if (error instanceof IdConflictError) return { kind: 'id-conflict', pointer: error.pointer };
      throw error;
    }
  }

  /**
   * Writes a group in one statement and settles each member. A group that fails (an id of
   * another owner in one of its batches, a value the database refuses, a deadlock given up) is
   * written again one batch at a time, so only the batch at fault gets the failure, as alone;
   * an unreachable store fails them all (alone they would fail the same way).
   */
  private async writeGroup(group: readonly WaitingBatch[]): Promise<void> {
    if (group.length === 1) {
      const [member] = group as [WaitingBatch];
      await this.writeAlone(member.part).then(member.resolve, member.reject);
      return;
    }
    let results: BatchPartResult[];
    try {
      results = await writeParts(
        this.sql,
        group.map((m) => m.part),
        // every member was given the server's one analysis grace
        (group[0] as WaitingBatch).part,
      );
    } catch (error) {
      if (error instanceof FlightlogError && error.code === 'store-unavailable') {
        for (const member of group) member.reject(error);
        return;
      }
      this.groupFallbacks += 1;
      await Promise.all(
        group.map((member) => this.writeAlone(member.part).then(member.resolve, member.reject)),
      );
      return;
    }
    this.groupedBatches += group.length;
    this.groupCommits += 1;
    await Promise.all(
      group.map((member, i) =>
        this.outcomeOf(member.part, results[i] as BatchPartResult).then(
          member.resolve,
          member.reject,
        ),
      ),
    );
  }

  private async outcomeOf(part: GroupedPart, result: BatchPartResult): Promise<BatchWriteOutcome> {
    if (!result.claimed) return duplicateOf(this.sql, part.agentId, part.batchId);
    return {
      kind: 'accepted',
      traceId: (part.items[0] as BufferBatchItem).trace.id,
      verify: null,
      analysisQueued: result.analysisQueued,
      droppedTraceIds: result.droppedTraceIds,
    };
  }

  private async consumeVerifyToken(tx: SqlExecutor, write: BatchWrite): Promise<VerifyOutcome> {
    const { agentId, verify } = write;
    let outcome: VerifyOutcome = 'rejected';
    if (verify?.claimedAgentId === agentId) {
      const verified = await tx.query(CONSUME_VERIFY_TOKEN, [verify.tokenHash, agentId]);
      if (verified.length > 0) outcome = 'verified';
    }
    await tx.query(
      'UPDATE accepted_batches SET verify_outcome = $3 WHERE agent_id = $1 AND batch_id = $2',
      [agentId, write.batchId, outcome],
    );
    return outcome;
  }

  /**
   * Runs `work` in one transaction that first takes a lock per trace id (transaction-scoped
   * advisory locks, in id order), with a store whose every statement runs in that transaction.
   * Writers that read a trace before they write it (OTLP exports: what is stored decides the
   * sequence numbers and the totals) take turns per trace this way, on every instance sharing
   * the database; writers of other traces do not wait. Batches of the client library do not
   * take these locks: they bring their own snapshots and need none.
   */
  async withTraceLocks<T>(
    traceIds: readonly string[],
    work: (traces: TraceStore) => Promise<T>,
  ): Promise<T> {
    const ids = [...new Set(traceIds)].sort(compareIds);
    const { engine } = this.sql;
    return this.sql.transaction(async (tx) => {
      await tx.query(LOCK_TRACES, [ids]);
      const inTransaction: SqlClient = {
        engine,
        query: (sql, params) => tx.query(sql, params),
        // already in one: a statement that wants a transaction runs in this one
        transaction: (inner) => inner(tx),
        ping: async () => {},
        close: async () => {},
      };
      return work(new TraceStore(inTransaction));
    });
  }

  /**
   * What an OTLP export needs to know before it is written: the stored snapshots of its traces
   * (of any agent; times with their microseconds) and the owners of those of its event ids that
   * are stored.
   */
  async otlpState(
    traceIds: readonly string[],
    eventIds: readonly string[],
  ): Promise<{ traces: Map<string, Trace>; events: Map<string, StoredEventOwner> }> {
    // one statement, one round trip: the snapshots (times with their microseconds) and the owners
    const [row] = await this.sql.query<{
      traces: (TraceRow & { startedAtText: string; endedAtText: string | null })[] | null;
      events: StoredEventOwner[] | null;
    }>(
      `SELECT
         (SELECT json_agg(x) FROM (
            SELECT ${TRACE_COLUMNS},
              to_char(t.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS "startedAtText",
              to_char(t.ended_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS "endedAtText"
            FROM traces t WHERE t.id = ANY($1::text[])) x) AS traces,
         (SELECT json_agg(e) FROM (
            SELECT id, trace_id AS "traceId", agent_id AS "agentId" FROM events
            WHERE id = ANY($2::text[])) e) AS events`,
      [[...new Set(traceIds)], eventIds],
    );
    const traces = new Map<string, Trace>();
    for (const { startedAtText, endedAtText, ...trace } of row?.traces ?? [])
      // (TRACE_COLUMNS casts the numerics to text: json_agg keeps them exact decimal strings)
      traces.set(trace.id, { ...trace, startedAt: startedAtText, endedAt: endedAtText } as Trace);
    const events = new Map<string, StoredEventOwner>();
    for (const owner of row?.events ?? []) events.set(owner.id, owner);
    return { traces, events };
  }

  /**
   * The first id of a batch that belongs to someone else, as the batch statement would name it
   * (by item, a trace before its events), read in statements of at most CONFLICT_SLICE ids:
   * short index lookups, between which other agents' statements run. Large batches are checked
   * so before their one big statement, so a batch of re-sent ids is refused after a slice or
   * two instead of after a statement of hundreds of milliseconds (on PGlite, on the event loop
   * every agent is served on). Null when there is none, or when the batch id was accepted
   * before (the statement answers a duplicate). Only a first look: the statement still decides.
   */
  async findIdConflict(
    agentId: string,
    batchId: string,
    items: readonly BufferBatchItem[],
  ): Promise<string | null> {
    const seen = await this.sql.query(
      'SELECT 1 FROM accepted_batches WHERE agent_id = $1 AND batch_id = $2',
      [agentId, batchId],
    );
    if (seen.length > 0) return null;
    const traceIds = [...new Set(items.map((item) => item.trace.id))];
    const traceOwners = new Map<string, string>();
    for (let at = 0; at < traceIds.length; at += CONFLICT_SLICE) {
      const rows = await this.sql.query<{ id: string; agentId: string }>(
        'SELECT id, agent_id AS "agentId" FROM traces WHERE id = ANY($1::text[])',
        [traceIds.slice(at, at + CONFLICT_SLICE)],
      );
      for (const row of rows) traceOwners.set(row.id, row.agentId);
    }
    const foreignTrace = items.findIndex((item) => {
      const owner = traceOwners.get(item.trace.id);
      return owner !== undefined && owner !== agentId;
    });
    // events in batch order, up to the item of the first foreign trace (which comes first)
    const last = foreignTrace < 0 ? items.length : foreignTrace;
    const events = items
      .slice(0, last)
      .flatMap((item, i) => item.events.map((event, j) => ({ event, i, j })));
    for (let at = 0; at < events.length; at += CONFLICT_SLICE) {
      const slice = events.slice(at, at + CONFLICT_SLICE);
      const rows = await this.sql.query<{ id: string; traceId: string; agentId: string }>(
        `SELECT id, trace_id AS "traceId", agent_id AS "agentId" FROM events
         WHERE id = ANY($1::text[])`,
        [slice.map(({ event }) => event.id)],
      );
      if (rows.length === 0) continue;
      const stored = new Map(rows.map((row) => [row.id, row]));
      const first = slice.find(({ event }) => {
        const row = stored.get(event.id);
        return row !== undefined && (row.agentId !== agentId || row.traceId !== event.traceId);
      });
      if (first) return `/items/${first.i}/events/${first.j}/id`;
    }
    return foreignTrace < 0 ? null : `/items/${foreignTrace}/trace/id`;
  }

  /** Finalises a trace owned by `agentId` (the complete endpoint). */
  async completeTrace(
    agentId: string,
    traceId: string,
    body: CompleteTraceBody,
    analysisGraceMs: number,
  ): Promise<StoreCompleteOutcome> {
    const [row] = await this.sql.query<CompleteTraceRow>(COMPLETE_TRACE, [
      traceId,
      agentId,
      body.status ?? 'completed',
      body.endedAt ?? null,
      body.outputSummary !== undefined,
      body.outputSummary ?? null,
      body.errorMessage !== undefined,
      body.errorMessage ?? null,
      analysisGraceMs,
    ]);
    if (!row?.found) return { kind: 'not-found' };
    if (row.endsBeforeStart) return { kind: 'ends-before-start' };
    const { found: _found, endsBeforeStart: _ends, queued, ...trace } = row;
    return { kind: 'completed', trace: traceFromRow(trace), analysisQueued: queued > 0 };
  }

  /**
   * A trace and one page of its events (by sequence, then id), if `userId` has any role on its
   * agent: at most `limit` events after `after`, and no more than `maxBytes` of them (see
   * event-pages.ts). `nextCursor` is null once the page reaches the trace's last event.
   */
  async traceForMember(
    userId: string,
    traceId: string,
    page: { limit: number; maxBytes: number; after?: EventPosition },
  ): Promise<{ trace: Trace; events: Event[]; nextCursor: string | null } | undefined> {
    const [trace] = await this.sql.query<TraceRow>(
      `SELECT ${TRACE_COLUMNS} FROM traces t
       JOIN members m ON m.agent_id = t.agent_id AND m.user_id = $2
       WHERE t.id = $1`,
      [traceId, userId],
    );
    if (!trace) return undefined;
    const { events, next } = await eventPage(this.sql, traceId, page);
    return {
      trace: traceFromRow(trace),
      events,
      nextCursor: next ? encodeEventCursor(next) : null,
    };
  }

  /**
   * The agent's most recently started runs among those created in [`createdFrom`,
   * `createdBefore`), oldest first, each with its last `eventsPerRun` events (by sequence) as far
   * as `maxBytes` allows, newest runs first: what a live replay is rebuilt from when the bus lost
   * the batches (see live/replay-history.ts). Nothing past the budget is loaded.
   */
  async recentRuns(
    agentId: string,
    options: {
      createdFrom: Date;
      createdBefore: Date;
      runs: number;
      eventsPerRun: number;
      /** Event bytes (payloads, error messages) loaded in all, newest runs' events first. */
      maxBytes: number;
    },
  ): Promise<{ trace: Trace; events: Event[] }[]> {
    const traces = await this.sql.query<TraceRow>(
      `SELECT ${TRACE_COLUMNS} FROM traces t
       WHERE t.agent_id = $1 AND t.created_at >= $2 AND t.created_at < $3
       ORDER BY t.started_at DESC, t.id DESC
       LIMIT $4`,
      [agentId, options.createdFrom, options.createdBefore, options.runs],
    );
    if (traces.length === 0) return [];
    // Sizes first (the payloads stay in the database), then only the events within the budget.
    const keys = await this.sql.query<{ id: string; traceId: string; bytes: number }>(
      `SELECT e.id, e.trace_id AS "traceId", e.bytes FROM (
         SELECT e.id, e.trace_id, e.sequence,
           (octet_length(e.payload::text) + coalesce(octet_length(e.error_message), 0))::int AS bytes,
           row_number() OVER (PARTITION BY e.trace_id ORDER BY e.sequence DESC, e.id DESC) AS newest
         FROM events e WHERE e.trace_id = ANY($1::text[])
       ) e
       WHERE e.newest <= $2
       ORDER BY e.trace_id, e.sequence DESC, e.id DESC`,
      [traces.map((t) => t.id), options.eventsPerRun],
    );
    const keysOf = new Map<string, { id: string; bytes: number }[]>();
    for (const key of keys) {
      const list = keysOf.get(key.traceId);
      if (list) list.push(key);
      else keysOf.set(key.traceId, [key]);
    }
    const chosen: string[] = [];
    let bytes = 0;
    fill: for (const trace of traces)
      for (const key of keysOf.get(trace.id) ?? []) {
        if (bytes + key.bytes > options.maxBytes) break fill;
        bytes += key.bytes;
        chosen.push(key.id);
      }
    const events =
      chosen.length === 0
        ? []
        : await this.sql.query<EventRow>(
            `SELECT ${EVENT_COLUMNS} FROM events e WHERE e.id = ANY($1::text[])
             ORDER BY e.trace_id, e.sequence, e.id`,
            [chosen],
          );
    const byTrace = new Map<string, Event[]>();
    for (const row of events) {
      const event = eventFromRow(row);
      const list = byTrace.get(event.traceId);
      if (list) list.push(event);
      else byTrace.set(event.traceId, [event]);
    }
    return traces
      .reverse()
      .map((row) => ({ trace: traceFromRow(row), events: byTrace.get(row.id) ?? [] }));
  }

  /**
   * One page of an agent's traces, newest first (by start time, then id), among those that pass
   * every filter given (see TraceFilters).
   *
   * Without `tag` or `q` the page is a walk of the (agent_id[, status], started_at) index from
   * the cursor, bounded by from/to: as fast for the millionth run as for the first.
   *
   * With them, the page reads the agent's runs in that order from the cursor (status and
   * from/to still applied by the index), tests each, and stops at the page's `limit + 1`th hit
   * or at its bound, whichever comes first: `scanRows` runs, or `scanBytes` of what the filters
   * test (the texts' length for q, the stored tags for tag). A page that reaches its bound with
   * too few hits answers those (maybe none) with a cursor at the last run it read, and says so
   * in `searchedTo`: the next page searches on from there. So every page costs at most the bound,
   * whatever the user searches for, on an engine where one statement holds every other request
   * (PGlite runs on the event loop).
   *
   * No index can keep that promise: the trigram index of migration 006 cannot serve a q that
   * pg_trgm takes no trigram from (`%_%_%_`, "ok": it takes them from letters and digits, and
   * none from a word of two at a wildcard), and for a q whose trigrams are all common
   * ("usdc usdc") it hands every run holding them to a recheck, across all agents; the tag index
   * likewise hands over every run of every agent that has the tag. Their work grows with what
   * is stored, not with the page. See docs/decisions.md.
   */
  async listTraces(
    agentId: string,
    options: TraceFilters & {
      limit: number;
      after?: [string, string];
      scanRows?: number;
      scanBytes?: number;
    },
  ): Promise<TracePage> {
    const { limit } = options;
    if (options.tag === undefined && options.text === undefined) {
      const rows = await this.sql.query<PageRow>(...listStatement(agentId, options));
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      return {
        traces: page.map(tracePart),
        nextCursor: rows.length > limit && last ? cursorOf(last) : null,
        searchedTo: null,
      };
    }
    const statement = searchStatement(agentId, options, {
      rows: options.scanRows ?? SCAN_ROWS,
      bytes: options.scanBytes ?? SCAN_BYTES,
    });
    const rows = await this.searchInTurn(() =>
      this.sql.query<PageRow & { hit: boolean; edge: boolean }>(...statement),
    );
    const hits = rows.filter((row) => row.hit === true);
    const edge = rows.find((row) => row.edge === true);
    if (hits.length > limit) {
      const page = hits.slice(0, limit);
      return {
        traces: page.map(tracePart),
        nextCursor: cursorOf(page[limit - 1] as PageRow),
        searchedTo: null,
      };
    }
    return {
      traces: hits.map(tracePart),
      nextCursor: edge ? cursorOf(edge) : null,
      searchedTo: edge ? tracePart(edge).startedAt : null,
    };
  }
}

/**
 * Runs of the agent one filtered page reads at most, in time order: 10–20 ms of one core on
 * PGlite for texts of a few hundred bytes (docs/performance.md, the runs list). Since PGlite
 * runs each statement on the event loop, this is also the longest a search keeps anyone else's
 * statement waiting.
 */
export const SCAN_ROWS = 5_000;

/**
 * Bytes one filtered page tests at most: the three texts of each run for q (their full length,
 * however they are stored), the tags as stored for tag. Runs with long texts (up to 64 KiB
 * each) reach this before SCAN_ROWS; 2 MiB took 10–20 ms of one core on PGlite, whatever q was.
 */
export const SCAN_BYTES = 2 * 1024 * 1024;

type PageRow = TraceRow & { cursorTime: string };

type ListOptions = TraceFilters & { limit: number; after?: [string, string] };

const tracePart = ({ cursorTime: _cursor, ...trace }: PageRow): Trace => traceFromRow(trace);
const cursorOf = (row: PageRow): string => encodePageCursor(row.cursorTime, row.id);

/**
 * The conditions of a runs page, as SQL over `t` with their parameters appended to `params`
 * ($1 is the agent): `position` (agent, status, cursor, from/to: what the time index serves),
 * `matches` (tag and q), each a list to AND, and `cost`, the bytes `matches` reads of a run, a
 * list to add.
 */
function pageConditions(
  params: unknown[],
  options: ListOptions,
): { position: string[]; matches: string[]; cost: string[] } {
  const param = (value: unknown): string => `$${params.push(value)}`;
  const position = ['t.agent_id = $1'];
  if (options.status !== undefined) position.push(`t.status = ${param(options.status)}`);
  if (options.after)
    position.push(
      `(t.started_at, t.id) < (${param(options.after[0])}::timestamptz, ${param(options.after[1])}::text)`,
    );
  if (options.from !== undefined)
    position.push(`t.started_at >= ${param(options.from)}::timestamptz`);
  if (options.to !== undefined) position.push(`t.started_at < ${param(options.to)}::timestamptz`);
  const matches: string[] = [];
  const cost: string[] = [];
  if (options.tag !== undefined) {
    matches.push(`t.tags @> ARRAY[${param(options.tag)}::text]`);
    // as stored (compressed or not): reading an array costs about its stored size, and the raw
    // size of an array cannot be had without reading it
    cost.push('pg_column_size(t.tags)');
  }
  if (options.text !== undefined) {
    // A case-insensitive regular expression that stands for the text itself: what ILIKE '%…%'
    // found, in time linear in the text. ILIKE's matcher backtracks: a 200-character q against
    // 64 KiB of text built for it took 60 ms per text on PGlite, where this takes 1–3 ms.
    const pattern = param(caseInsensitiveLiteral(options.text));
    matches.push(
      `(t.input_summary ~* ${pattern} OR t.output_summary ~* ${pattern}` +
        ` OR t.error_message ~* ${pattern})`,
    );
    // octet_length reads the length from a stored text's header: no text is read to count it
    cost.push(
      'octet_length(t.input_summary) + coalesce(octet_length(t.output_summary), 0)' +
        ' + coalesce(octet_length(t.error_message), 0)',
    );
  }
  return { position, matches, cost };
}

const and = (conditions: string[]): string => conditions.join('\n    AND ');

/** A page without tag or q: a walk of the time index. */
function listStatement(agentId: string, options: ListOptions): [string, unknown[]] {
  const params: unknown[] = [agentId];
  const { position } = pageConditions(params, options);
  return [
    `SELECT ${TRACE_COLUMNS}, ${CURSOR_TIME}
  FROM traces t
  WHERE ${and(position)}
  ORDER BY t.started_at DESC, t.id DESC
  LIMIT $${params.push(options.limit + 1)}`,
    params,
  ];
}

/**
 * A page with tag or q, in one statement (planned for its values: never prepared).
 *
 * The inner query reads at most `rows` runs from the cursor, in list order (the time index),
 * and numbers each (`n`), adds up the bytes the filters read (`read`, through this run) and
 * tells whether another run follows (`more`); nothing in it reads a text or the tags. The
 * outer one tests a run only while the bytes before it are under the budget (`within`; CASE,
 * so that no test runs past it whatever order the planner would pick), and returns the hits up
 * to limit + 1 and the window's last run (`edge`) when more runs follow it: where the next page
 * starts.
 */
function searchStatement(
  agentId: string,
  options: ListOptions,
  bound: { rows: number; bytes: number },
): [string, unknown[]] {
  const params: unknown[] = [agentId];
  const { position, matches, cost } = pageConditions(params, options);
  const rows = `$${params.push(bound.rows)}`;
  const bytes = `$${params.push(bound.bytes)}`;
  const bytesOf = cost.join(' + ');
  return [
    `${UNPREPARED}SELECT ${TRACE_COLUMNS}, ${CURSOR_TIME}, coalesce(${and(matches)}, false) AS hit, t.edge
  FROM (
    SELECT t.*, t.read - t.cost < ${bytes} AS within,
           t.more AND (t.n = ${rows} OR t.read >= ${bytes}) AS edge
    FROM (
      SELECT t.*, ${bytesOf} AS cost, row_number() OVER w AS n, sum(${bytesOf}) OVER w AS read,
             lead(true, 1, false) OVER w AS more
      FROM traces t
      WHERE ${and(position)}
      WINDOW w AS (ORDER BY t.started_at DESC, t.id DESC ROWS UNBOUNDED PRECEDING)
      ORDER BY t.started_at DESC, t.id DESC
      LIMIT ${rows}
    ) t
  ) t
  WHERE CASE WHEN t.within THEN t.edge OR (${and(matches)}) ELSE false END
  ORDER BY t.started_at DESC, t.id DESC
  LIMIT $${params.push(options.limit + 1)}`,
    params,
  ];
}

function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
