import { createHash } from 'node:crypto';

/*
 * The Merkle tree that anchors finished runs' fingerprints (issue 25, part 3), hashed as
 * Certificate Transparency's (RFC 9162 §2.1, the same as RFC 6962): SHA-256, a leaf hashed with
 * a 0x00 byte before it and an interior node with 0x01, so that no leaf can pass for a node (the
 * second-preimage attack on plain Merkle trees), and a tree of any size split at the largest
 * power of two below it. An audit path lists the sibling hashes from the leaf up; checking one
 * needs only the leaf, its index, the tree's size and the root.
 */

const LEAF_PREFIX = Uint8Array.of(0x00);
const NODE_PREFIX = Uint8Array.of(0x01);

function sha256(...parts: Uint8Array[]): Uint8Array {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(part);
  return new Uint8Array(hash.digest());
}

/** A leaf's hash: SHA-256(0x00 ‖ data). */
export function merkleLeafHash(data: Uint8Array): Uint8Array {
  return sha256(LEAF_PREFIX, data);
}

/** An interior node's hash: SHA-256(0x01 ‖ left ‖ right). */
export function merkleNodeHash(left: Uint8Array, right: Uint8Array): Uint8Array {
  return sha256(NODE_PREFIX, left, right);
}

/** The largest power of two below `n` (n ≥ 2): where a tree of n leaves is split. */
function splitOf(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** The root (MTH) of a tree of these leaf hashes, in order; of none, SHA-256 of nothing. */
export function merkleRoot(leafHashes: readonly Uint8Array[]): Uint8Array {
  return rootOf(leafHashes, 0, leafHashes.length);
}

function rootOf(leaves: readonly Uint8Array[], from: number, to: number): Uint8Array {
  const n = to - from;
  if (n === 0) return sha256();
  if (n === 1) return leaves[from] as Uint8Array;
  const k = splitOf(n);
  return merkleNodeHash(rootOf(leaves, from, from + k), rootOf(leaves, from + k, to));
}

/** The audit path (RFC 9162 PATH) of leaf `index` in the tree of these leaf hashes. */
export function merkleAuditPath(index: number, leafHashes: readonly Uint8Array[]): Uint8Array[] {
  if (!Number.isSafeInteger(index) || index < 0 || index >= leafHashes.length)
    throw new RangeError(`leaf ${index} is not in a tree of ${leafHashes.length}`);
  const path: Uint8Array[] = [];
  let from = 0;
  let to = leafHashes.length;
  let m = index;
  // from the root down; the path lists siblings from the leaf up, so it is reversed at the end
  while (to - from > 1) {
    const k = splitOf(to - from);
    if (m < k) {
      path.push(rootOf(leafHashes, from + k, to));
      to = from + k;
    } else {
      path.push(rootOf(leafHashes, from, from + k));
      from += k;
      m -= k;
    }
  }
  return path.reverse();
}

/**
 * The root an audit path leads to from leaf `index`'s hash in a tree of `size` leaves (RFC 9162
 * §2.1.3.2), or undefined when the path cannot belong to such a leaf (too long, too short, an
 * index past the tree).
 */
export function merkleRootFromPath(
  index: number,
  size: number,
  leafHash: Uint8Array,
  path: readonly Uint8Array[],
): Uint8Array | undefined {
  if (!Number.isSafeInteger(index) || !Number.isSafeInteger(size) || index < 0 || index >= size)
    return undefined;
  // bigints: the shifts must not wrap at 32 bits for trees past 2^31 leaves
  let fn = BigInt(index);
  let sn = BigInt(size - 1);
  let r = leafHash;
  for (const p of path) {
    if (sn === 0n) return undefined;
    if ((fn & 1n) === 1n || fn === sn) {
      r = merkleNodeHash(p, r);
      while ((fn & 1n) === 0n && fn !== 0n) {
        fn >>= 1n;
        sn >>= 1n;
      }
    } else r = merkleNodeHash(r, p);
    fn >>= 1n;
    sn >>= 1n;
  }
  return sn === 0n ? r : undefined;
}

/** True when the audit path proves leaf `index`'s hash is in the tree of `size` with `root`. */
export function verifyMerklePath(
  index: number,
  size: number,
  leafHash: Uint8Array,
  path: readonly Uint8Array[],
  root: Uint8Array,
): boolean {
  const reached = merkleRootFromPath(index, size, leafHash, path);
  return reached !== undefined && equalBytes(reached, root);
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * The root and every leaf's audit path of one tree, in O(n) hashes (merkleAuditPath alone is
 * O(n) per leaf). Built level by level from the leaves: nodes paired left to right, an odd last
 * node carried up unpaired — the same tree as RFC 9162's split at the largest power of two.
 */
export function merkleTree(leafHashes: readonly Uint8Array[]): {
  root: Uint8Array;
  paths: Uint8Array[][];
} {
  if (leafHashes.length === 0) return { root: merkleRoot([]), paths: [] };
  const levels: Uint8Array[][] = [[...leafHashes]];
  for (let level = levels[0] as Uint8Array[]; level.length > 1;) {
    const up: Uint8Array[] = [];
    for (let i = 0; i < level.length; i += 2)
      up.push(
        i + 1 < level.length
          ? merkleNodeHash(level[i] as Uint8Array, level[i + 1] as Uint8Array)
          : (level[i] as Uint8Array),
      );
    levels.push(up);
    level = up;
  }
  const paths = leafHashes.map((_, leaf) => {
    const path: Uint8Array[] = [];
    let i = leaf;
    for (const level of levels.slice(0, -1)) {
      const sibling = i ^ 1;
      if (sibling < level.length) path.push(level[sibling] as Uint8Array);
      i >>= 1;
    }
    return path;
  });
  return { root: (levels[levels.length - 1] as Uint8Array[])[0] as Uint8Array, paths };
}
