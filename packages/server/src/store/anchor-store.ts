import {
  anchorLeafHash,
  anchorMemo,
  encodeMerkleProof,
  hexOf,
  merkleTree,
} from '@flightlog/protocol';
import type { SqlClient } from './sql-client.js';

/*
 * Anchoring's bookkeeping (migration 015): the trees of finished runs' fingerprints and where
 * each stands on its way on chain. One instance at a time gathers (an advisory lock) and works a
 * batch (a claim that moves `due_at` a lease ahead, as the fingerprint queue does); every write
 * that moves a batch on checks the claim is still the writer's, so an instance that stalled past
 * its lease cannot undo another's work.
 */

/** A transaction signed for a batch and kept before it is sent. */
export interface SignedAnchor {
  /** base58: the transaction's id on chain. */
  signature: string;
  /** The signed transaction, base64 wire format: what is sent, again if need be. */
  wire: string;
  /** The last block height at which it can still land. */
  lastValidBlockHeight: bigint;
  /** The slot its blockhash was read at. */
  signedSlot: bigint;
}

/** A tree of runs gathered to be anchored: its root, its size and the memo that anchors it. */
export interface AnchorTree {
  id: number;
  cluster: string;
  root: string;
  size: number;
  memo: string;
}

/** A batch taken to be worked on, until `claimedUntil`. */
export interface ClaimedBatch extends AnchorTree {
  state: 'gathered' | 'signed';
  signed: SignedAnchor | undefined;
  attempts: number;
  claimedUntil: string;
}

/** A batch as the operator and the tests see it. */
export interface AnchorBatchRecord extends AnchorTree {
  state: 'gathered' | 'signed' | 'anchored';
  signature: string | null;
  slot: string | null;
  attempts: number;
  lastError: string | null;
}

interface ClaimedRow extends AnchorTree {
  state: 'gathered' | 'signed';
  signature: string | null;
  wire: string | null;
  last_valid: string | null;
  signed_slot: string | null;
  attempts: number;
  claimed_until: string;
}

/** Any number that fits the advisory lock's bigint: the gatherers' lock. */
const GATHER_LOCK = 'flightlog-anchor-gather';

/** Finished runs waiting: fingerprinted, and that fingerprint in no tree yet. */
const WAITING = `trace_hash IS NOT NULL AND anchored_hash IS DISTINCT FROM trace_hash`;

export class AnchorStore {
  constructor(private readonly sql: SqlClient) {}

  /** Runs waiting to be anchored, counted up to `limit`. */
  async waitingRuns(limit: number): Promise<number> {
    const [row] = await this.sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM (SELECT 1 FROM traces WHERE ${WAITING} LIMIT $1) w`,
      [limit],
    );
    return row?.n ?? 0;
  }

  /**
   * Gathers up to `maxRuns` waiting runs into a new tree for `cluster`, with every run's audit
   * path: the batch's id and size, or undefined when no run was waiting. A run being written
   * right now is left for the next tree (its row is skipped, not waited for).
   */
  async gather(
    cluster: string,
    maxRuns: number,
  ): Promise<{ id: number; size: number } | undefined> {
    return this.sql.transaction(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [GATHER_LOCK]);
      const runs = await tx.query<{ id: string; trace_hash: string }>(
        // first written, first anchored (ids are the clients' choice: see migration 017)
        `SELECT id, trace_hash FROM traces WHERE ${WAITING}
         ORDER BY updated_at, id LIMIT $1 FOR UPDATE SKIP LOCKED`,
        [maxRuns],
      );
      if (runs.length === 0) return undefined;
      const tree = merkleTree(runs.map((run) => anchorLeafHash(run.trace_hash)));
      const anchored = { root: hexOf(tree.root), size: runs.length };
      const [batch] = await tx.query<{ id: number }>(
        `INSERT INTO anchor_batches (cluster, root, size, memo) VALUES ($1, $2, $3, $4)
         RETURNING id`,
        [cluster, anchored.root, anchored.size, anchorMemo(anchored)],
      );
      const id = (batch as { id: number }).id;
      const proofs = runs.map((_, leafIndex) =>
        encodeMerkleProof({
          root: anchored.root,
          leafIndex,
          treeSize: runs.length,
          path: (tree.paths[leafIndex] ?? []).map(hexOf),
        }),
      );
      await tx.query(
        `INSERT INTO anchor_leaves (batch_id, leaf_index, trace_id, trace_hash, proof)
         SELECT $1, x.i - 1, x.trace_id, x.trace_hash, x.proof
         FROM unnest($2::text[], $3::text[], $4::text[]) WITH ORDINALITY
              AS x(trace_id, trace_hash, proof, i)`,
        [id, runs.map((r) => r.id), runs.map((r) => r.trace_hash), proofs],
      );
      await tx.query(
        `UPDATE traces t SET anchored_hash = x.trace_hash
         FROM unnest($1::text[], $2::text[]) AS x(id, trace_hash) WHERE t.id = x.id`,
        [runs.map((r) => r.id), runs.map((r) => r.trace_hash)],
      );
      return { id, size: runs.length };
    });
  }

  /**
   * Takes the oldest batch of `cluster` not yet anchored whose time has come, for `leaseMs`: an
   * instance that dies leaves it to be taken again once the lease runs out.
   */
  async claim(cluster: string, leaseMs: number): Promise<ClaimedBatch | undefined> {
    const [row] = await this.sql.query<ClaimedRow>(
      `UPDATE anchor_batches b SET due_at = now() + make_interval(secs => $2::float8 / 1000)
       WHERE b.id = (
         SELECT a.id FROM anchor_batches a
         WHERE a.state <> 'anchored' AND a.cluster = $1 AND a.due_at <= now()
         ORDER BY a.due_at, a.id LIMIT 1 FOR UPDATE SKIP LOCKED)
       RETURNING b.id, b.cluster, b.root, b.size, b.memo, b.state, b.signature, b.wire,
                 b.last_valid_block_height::text AS last_valid,
                 b.signed_slot::text AS signed_slot, b.attempts,
                 b.due_at::text AS claimed_until`,
      [cluster, leaseMs],
    );
    if (row === undefined) return undefined;
    return {
      id: row.id,
      cluster: row.cluster,
      root: row.root,
      size: row.size,
      memo: row.memo,
      state: row.state,
      signed:
        row.signature !== null && row.wire !== null && row.last_valid !== null
          ? {
              signature: row.signature,
              wire: row.wire,
              lastValidBlockHeight: BigInt(row.last_valid),
              signedSlot: BigInt(row.signed_slot ?? '0'),
            }
          : undefined,
      attempts: row.attempts,
      claimedUntil: row.claimed_until,
    };
  }

  /** Keeps the transaction signed for `batch`, before it is sent; false if the claim was lost. */
  async markSigned(batch: ClaimedBatch, signed: SignedAnchor): Promise<boolean> {
    const rows = await this.sql.query(
      `UPDATE anchor_batches SET state = 'signed', signature = $3, wire = $4,
         last_valid_block_height = $5, signed_slot = $6
       WHERE id = $1 AND due_at = $2::timestamptz AND state = 'gathered'
       RETURNING id`,
      [
        batch.id,
        batch.claimedUntil,
        signed.signature,
        signed.wire,
        signed.lastValidBlockHeight.toString(),
        signed.signedSlot.toString(),
      ],
    );
    return rows.length > 0;
  }

  /**
   * Records that `batch`'s transaction landed at `slot`, and gives each of its runs (still with
   * the fingerprint the tree holds) its proof, signature and slot, in one transaction. Whoever
   * records it, once: a batch already anchored is left as it is.
   */
  async markAnchored(batch: ClaimedBatch, signature: string, slot: bigint): Promise<boolean> {
    return this.sql.transaction(async (tx) => {
      const rows = await tx.query(
        `UPDATE anchor_batches SET state = 'anchored', slot = $3, anchored_at = now(),
           last_error = NULL, wire = NULL
         WHERE id = $1 AND state = 'signed' AND signature = $2
         RETURNING id`,
        [batch.id, signature, slot.toString()],
      );
      if (rows.length === 0) return false;
      await tx.query(
        `UPDATE traces t SET merkle_proof = l.proof, anchor_signature = $2, anchor_slot = $3
         FROM anchor_leaves l
         WHERE l.batch_id = $1 AND t.id = l.trace_id AND t.trace_hash = l.trace_hash`,
        [batch.id, signature, slot.toString()],
      );
      return true;
    });
  }

  /**
   * Forgets `batch`'s transaction, which can no longer land (its blockhash expired) or failed on
   * chain, so that the batch is signed anew; due after `delayMs`.
   */
  async unsign(batch: ClaimedBatch, reason: string, delayMs: number): Promise<boolean> {
    const rows = await this.sql.query(
      `UPDATE anchor_batches SET state = 'gathered', signature = NULL, wire = NULL,
         last_valid_block_height = NULL, signed_slot = NULL, attempts = attempts + 1, last_error = $3,
         due_at = now() + make_interval(secs => $4::float8 / 1000)
       WHERE id = $1 AND due_at = $2::timestamptz AND state = 'signed'
       RETURNING id`,
      [batch.id, batch.claimedUntil, reason.slice(0, 1000), delayMs],
    );
    return rows.length > 0;
  }

  /**
   * Hands `batch` back, due again after `delayMs`: with the reason of a failure (counted), or
   * without one to look again at a transaction under way.
   */
  async release(batch: ClaimedBatch, delayMs: number, failure?: string): Promise<void> {
    await this.sql.query(
      `UPDATE anchor_batches SET due_at = now() + make_interval(secs => $3::float8 / 1000),
         attempts = attempts + CASE WHEN $4::text IS NULL THEN 0 ELSE 1 END,
         last_error = coalesce($4::text, last_error)
       WHERE id = $1 AND due_at = $2::timestamptz AND state <> 'anchored'`,
      [batch.id, batch.claimedUntil, delayMs, failure?.slice(0, 1000) ?? null],
    );
  }

  /**
   * Takes over what another cluster left unfinished when `ANCHOR_CLUSTER` changed: a tree not yet
   * signed simply moves to `cluster`; a tree signed for the other cluster cannot be followed
   * from here, so it is dropped and its runs wait to be gathered anew (their fingerprints may
   * then be on both clusters, never twice on one). How many trees of each kind.
   */
  async adoptOtherClusters(cluster: string): Promise<{ moved: number; dropped: number }> {
    return this.sql.transaction(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [GATHER_LOCK]);
      const moved = await tx.query(
        `UPDATE anchor_batches SET cluster = $1, due_at = now()
         WHERE cluster <> $1 AND state = 'gathered' RETURNING id`,
        [cluster],
      );
      const dropped = await tx.query<{ id: number }>(
        `SELECT id FROM anchor_batches WHERE cluster <> $1 AND state = 'signed' FOR UPDATE`,
        [cluster],
      );
      if (dropped.length > 0) {
        const ids = dropped.map((d) => d.id);
        await tx.query(
          `UPDATE traces t SET anchored_hash = NULL FROM anchor_leaves l
           WHERE l.batch_id = ANY($1::bigint[]) AND t.id = l.trace_id
             AND t.anchored_hash = l.trace_hash`,
          [ids],
        );
        await tx.query('DELETE FROM anchor_batches WHERE id = ANY($1::bigint[])', [ids]);
      }
      return { moved: moved.length, dropped: dropped.length };
    });
  }

  /** Every batch, newest first, up to `limit`. */
  async batches(limit = 100): Promise<AnchorBatchRecord[]> {
    return this.sql.query<AnchorBatchRecord>(
      `SELECT id, cluster, root, size, memo, state, signature, slot::text AS slot, attempts,
              last_error AS "lastError"
       FROM anchor_batches ORDER BY id DESC LIMIT $1`,
      [limit],
    );
  }
}
