import { merkleLeafHash, merkleRootFromPath } from './merkle-tree.js';

/*
 * How a finished run's fingerprint is anchored on chain (issue 25, part 3), as text both ends
 * read: the memo the anchoring transaction carries, and the run's `merkleProof`.
 *
 * - A tree's leaf is the run's `traceHash` (32 bytes, from its hex), hashed as RFC 9162's leaf.
 * - The memo states the tree's root and its size: `flightlog-anchor/1 <root hex> <size>`. The
 *   size is part of what is anchored because an audit path alone does not bind it (the last
 *   leaf of a 3-leaf tree has the same path in a 4-leaf tree).
 * - `merkleProof` is `flightlog-proof/1 <root hex> <leaf index> <tree size> <sibling hex>…`, the
 *   siblings from the leaf up (none for a tree of one run). It names its root so that a checker
 *   tells a wrong proof (its path does not lead to its root) from a wrong transaction (its memo
 *   anchors another root).
 */

export const ANCHOR_MEMO_VERSION = 'flightlog-anchor/1';
export const MERKLE_PROOF_VERSION = 'flightlog-proof/1';

/** What an anchoring transaction's memo says: a tree's root (hex) and how many runs it holds. */
export interface AnchoredRoot {
  root: string;
  size: number;
}

/**
 * A run's place in its anchored tree: the tree's root, where, in a tree of how many, and its
 * audit path (hex).
 */
export interface MerkleProof {
  root: string;
  leafIndex: number;
  treeSize: number;
  path: string[];
}

const HASH_HEX = /^[0-9a-f]{64}$/;
const COUNT = /^(0|[1-9][0-9]{0,14})$/;

/** Bytes in lowercase hex. */
export function hexOf(bytes: Uint8Array): string {
  let hex = '';
  for (const byte of bytes) hex += byte.toString(16).padStart(2, '0');
  return hex;
}

/** The bytes of an even-length hex string (checked by the callers' patterns). */
function bytesOf(hex: string): Uint8Array {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return bytes;
}

/** The memo that anchors a tree. */
export function anchorMemo(anchored: AnchoredRoot): string {
  return `${ANCHOR_MEMO_VERSION} ${anchored.root} ${anchored.size}`;
}

/** The root a memo anchors, or undefined when the memo is not one of ours. */
export function parseAnchorMemo(memo: string): AnchoredRoot | undefined {
  const [version, root, size, ...rest] = memo.split(' ');
  if (version !== ANCHOR_MEMO_VERSION || rest.length > 0) return undefined;
  if (root === undefined || !HASH_HEX.test(root) || size === undefined || !COUNT.test(size))
    return undefined;
  const n = Number(size);
  return n >= 1 ? { root, size: n } : undefined;
}

export function encodeMerkleProof(proof: MerkleProof): string {
  return [MERKLE_PROOF_VERSION, proof.root, proof.leafIndex, proof.treeSize, ...proof.path].join(
    ' ',
  );
}

/** The proof `text` holds, or why it holds none. */
export function parseMerkleProof(text: string): MerkleProof | string {
  const [version, root, index, size, ...path] = text.split(' ');
  if (version !== MERKLE_PROOF_VERSION) return `it is not a ${MERKLE_PROOF_VERSION} proof`;
  if (root === undefined || !HASH_HEX.test(root)) return 'its root is not a SHA-256 hash in hex';
  if (index === undefined || !COUNT.test(index) || size === undefined || !COUNT.test(size))
    return 'its leaf index or tree size is not a whole number';
  const leafIndex = Number(index);
  const treeSize = Number(size);
  if (leafIndex >= treeSize) return `its leaf ${leafIndex} is not in a tree of ${treeSize}`;
  if (!path.every((hash) => HASH_HEX.test(hash)))
    return 'its path holds something other than SHA-256 hashes in hex';
  return { root, leafIndex, treeSize, path };
}

/** A run's leaf hash in the anchoring tree. */
export function anchorLeafHash(traceHash: string): Uint8Array {
  return merkleLeafHash(bytesOf(traceHash));
}

/**
 * The root that `proof`'s path leads to from the run fingerprinted `traceHash`, with the tree's
 * size (a proof holds when that is its own root). Undefined when the path cannot belong to that
 * place in a tree of that size.
 */
export function anchoredRootOf(traceHash: string, proof: MerkleProof): AnchoredRoot | undefined {
  if (!HASH_HEX.test(traceHash)) return undefined;
  const root = merkleRootFromPath(
    proof.leafIndex,
    proof.treeSize,
    anchorLeafHash(traceHash),
    proof.path.map(bytesOf),
  );
  return root === undefined ? undefined : { root: hexOf(root), size: proof.treeSize };
}
