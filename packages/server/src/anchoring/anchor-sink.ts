import type { SignedAnchor } from '../store/anchor-store.js';

/*
 * Where anchoring puts a tree's root: the boundary the anchorer talks to, so that the chain (or
 * anything else that keeps a memo with a time) can be swapped without touching the bookkeeping.
 * Its outcomes are values: a sink that cannot reach its chain says so, it does not throw.
 */

/**
 * An outcome: the value, or why not. Every failure is tried again with backoff (a chain that is
 * down or an anchoring account out of funds is the operator's to fix; the batch waits).
 */
export type SinkOutcome<T> = { ok: true; value: T } | { ok: false; reason: string };

/** Where a sent transaction stands. */
export type AnchorLanding =
  /** On chain at `slot`, at the sink's commitment, without error. */
  | { kind: 'landed'; slot: bigint }
  /** On chain, but failed: the memo is not anchored by it. */
  | { kind: 'failed'; reason: string }
  /** Not (yet) seen, and it may still land. */
  | { kind: 'pending' }
  /** Not seen, and it can no longer land: its lifetime ended. */
  | { kind: 'expired' }
  /**
   * Not seen, its lifetime ended, but the sink cannot tell whether it landed (its RPC keeps no
   * history that far back): signing anew could anchor the tree twice, so it is not.
   */
  | { kind: 'unknown'; reason: string };

export interface AnchorSink {
  /** The cluster the sink anchors on (`devnet`, `mainnet`), as batches are recorded. */
  readonly cluster: string;
  /** A transaction carrying `memo`, signed; nothing is sent. */
  sign(memo: string): Promise<SinkOutcome<SignedAnchor>>;
  /** Sends `anchor` (again: sending it twice cannot land it twice). */
  send(anchor: SignedAnchor): Promise<SinkOutcome<void>>;
  /** Where `anchor` stands. */
  landing(anchor: SignedAnchor): Promise<SinkOutcome<AnchorLanding>>;
}
