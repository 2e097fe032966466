import {
  anchoredRootOf,
  parseAnchorMemo,
  parseMerkleProof,
  type AnchoredRoot,
  type Trace,
} from '@flightlog/protocol';
import type { AnchorReader } from './solana-anchor-reader.js';

/*
 * The chain of a run's proof past its fingerprint (`flightlog verify` checks the fingerprint
 * first): traceHash → audit path → root → the memo of the transaction at `anchorSignature`. Each
 * step says what it found when it fails, so that a tampered run, a wrong proof and a wrong
 * transaction are told apart.
 */

/** The steps of the chain past the fingerprint, in order. */
export type AnchorStep = 'proof' | 'transaction' | 'memo' | 'signer';

export type AnchorCheck =
  /** Every step holds: the run's fingerprint is in the tree whose root the memo anchors. */
  | {
      kind: 'anchored';
      anchored: AnchoredRoot;
      leafIndex: number;
      signature: string;
      slot: string;
      signer: string;
      /** Whether the signer was checked against the operator's anchoring key. */
      signerChecked: boolean;
    }
  /** The run carries no proof yet (not finished, or its tree is not on chain yet). */
  | { kind: 'not-anchored' }
  /** The audit path leads to a root (checked offline); the chain was not asked. */
  | { kind: 'path-only'; anchored: AnchoredRoot; leafIndex: number }
  | { kind: 'failed'; step: AnchorStep; reason: string };

/**
 * Checks the anchor of a run whose `traceHash` already matched its data. Without `reader`, only
 * the audit path (offline); with it, the transaction too, and its signer when `signer` is given.
 */
export async function checkRunAnchor(
  trace: Pick<Trace, 'traceHash' | 'merkleProof' | 'anchorSignature' | 'anchorSlot'>,
  chain?: { reader: AnchorReader; signer?: string },
): Promise<AnchorCheck> {
  const { traceHash, merkleProof, anchorSignature, anchorSlot } = trace;
  if (!merkleProof && !anchorSignature) return { kind: 'not-anchored' };
  if (!traceHash) return fail('proof', 'the run has a proof but no traceHash');
  if (!merkleProof) return fail('proof', 'the run names a transaction but has no merkleProof');
  const proof = parseMerkleProof(merkleProof);
  if (typeof proof === 'string') return fail('proof', `its merkleProof is malformed: ${proof}`);
  const reached = anchoredRootOf(traceHash, proof);
  if (reached === undefined)
    return fail(
      'proof',
      `its audit path (${proof.path.length} hashes) cannot place a leaf at ${proof.leafIndex} ` +
        `in a tree of ${proof.treeSize}: the proof is not this run's`,
    );
  if (reached.root !== proof.root)
    return fail(
      'proof',
      `its audit path leads from the run's traceHash to root ${reached.root}, not to the ` +
        `proof's root ${proof.root}: the proof is not this run's`,
    );
  const anchored = reached;
  if (chain === undefined) return { kind: 'path-only', anchored, leafIndex: proof.leafIndex };
  if (!anchorSignature) return fail('transaction', 'the run has a proof but no anchorSignature');

  let found;
  try {
    found = await chain.reader.transaction(anchorSignature);
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    return fail('transaction', `the RPC could not be asked for ${anchorSignature}: ${why}`);
  }
  if (found === undefined)
    return fail('transaction', `no finalized transaction ${anchorSignature} on this cluster`);
  if (found.signature !== anchorSignature)
    return fail('transaction', `the RPC answered another transaction (${found.signature})`);
  if (!found.signatureValid)
    return fail(
      'transaction',
      `its fee payer's signature does not verify against its message: the RPC answered a ` +
        'transaction nobody signed',
    );
  if (found.err !== null)
    return fail('transaction', `the transaction failed on chain: ${JSON.stringify(found.err)}`);
  if (anchorSlot && found.slot.toString() !== anchorSlot)
    return fail(
      'transaction',
      `the transaction is at slot ${found.slot}, the run says ${anchorSlot}`,
    );

  const memos = found.memos.map(parseAnchorMemo).filter((m) => m !== undefined);
  if (memos.length === 0) return fail('memo', `the transaction carries no flightlog anchor memo`);
  const match = memos.find((m) => m.root === anchored.root && m.size === anchored.size);
  if (match === undefined) {
    const memo = memos[0] as AnchoredRoot;
    return fail(
      'memo',
      `the transaction's memo anchors root ${memo.root} of ${memo.size} runs, not the run's ` +
        `root ${anchored.root} of ${anchored.size}: the transaction is not this run's`,
    );
  }
  if (chain.signer !== undefined && found.signer !== chain.signer)
    return fail(
      'signer',
      `the transaction was signed by ${found.signer}, not by the anchoring key ${chain.signer}`,
    );
  return {
    kind: 'anchored',
    anchored,
    leafIndex: proof.leafIndex,
    signature: anchorSignature,
    slot: found.slot.toString(),
    signer: found.signer,
    signerChecked: chain.signer !== undefined,
  };
}

function fail(step: AnchorStep, reason: string): AnchorCheck {
  return { kind: 'failed', step, reason };
}
