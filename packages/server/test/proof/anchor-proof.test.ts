import {
  anchorLeafHash,
  anchorMemo,
  anchoredRootOf,
  encodeMerkleProof,
  hexOf,
  merkleAuditPath,
  merkleRoot,
  merkleTree,
  parseAnchorMemo,
  parseMerkleProof,
} from '@flightlog/protocol';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

/*
 * The anchoring tree built at once (every path in O(n)) is RFC 9162's, and the memo and proof
 * texts say exactly what is anchored and nothing looser (issue 25, part 3).
 */
const traceHashes = (n: number, seed = 0) =>
  Array.from({ length: n }, (_, i) =>
    hexOf(new Uint8Array(32).map((_, b) => (i * 31 + b * 7 + seed) & 0xff)),
  );

describe('merkleTree', () => {
  it('gives the root and audit paths of RFC 9162 for trees of 1 to 70 leaves', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 70 }), fc.integer({ min: 0, max: 255 }), (n, seed) => {
        const leaves = traceHashes(n, seed).map(anchorLeafHash);
        const tree = merkleTree(leaves);
        expect(hexOf(tree.root)).toBe(hexOf(merkleRoot(leaves)));
        for (let i = 0; i < n; i++)
          expect(tree.paths[i]?.map(hexOf)).toEqual(merkleAuditPath(i, leaves).map(hexOf));
      }),
      { numRuns: 60 },
    );
  });

  it('proves every run of a tree through the proof text, and no run at another place', () => {
    const hashes = traceHashes(13);
    const tree = merkleTree(hashes.map(anchorLeafHash));
    const anchored = { root: hexOf(tree.root), size: 13 };
    hashes.forEach((traceHash, leafIndex) => {
      const text = encodeMerkleProof({
        root: anchored.root,
        leafIndex,
        treeSize: 13,
        path: (tree.paths[leafIndex] ?? []).map(hexOf),
      });
      const proof = parseMerkleProof(text);
      if (typeof proof === 'string') throw new Error(proof);
      expect(anchoredRootOf(traceHash, proof)).toEqual(anchored);
      const elsewhere = { ...proof, leafIndex: (leafIndex + 1) % 13 };
      expect(anchoredRootOf(traceHash, elsewhere)?.root).not.toBe(anchored.root);
      // another run's fingerprint does not reach the root through this run's path
      expect(anchoredRootOf(hashes[(leafIndex + 5) % 13] as string, proof)?.root).not.toBe(
        anchored.root,
      );
    });
  });

  it('reads back the memo it writes, and refuses a memo that is not exactly one', () => {
    const root = 'ab'.repeat(32);
    expect(parseAnchorMemo(anchorMemo({ root, size: 100 }))).toEqual({ root, size: 100 });
    for (const memo of [
      `flightlog-anchor/2 ${root} 100`,
      `flightlog-anchor/1 ${root}`,
      `flightlog-anchor/1 ${root} 0`,
      `flightlog-anchor/1 ${root} 010`,
      `flightlog-anchor/1 ${root.toUpperCase()} 10`,
      `flightlog-anchor/1 ${root} 10 extra`,
      'hello',
    ])
      expect(parseAnchorMemo(memo)).toBeUndefined();
  });

  it('says why a proof text is not a proof', () => {
    const root = 'cd'.repeat(32);
    expect(parseMerkleProof(`flightlog-proof/2 ${root} 0 1`)).toMatch(/not a flightlog-proof\/1/);
    expect(parseMerkleProof('flightlog-proof/1 0 1')).toMatch(/root is not/);
    expect(parseMerkleProof(`flightlog-proof/1 ${root} x 1`)).toMatch(/whole number/);
    expect(parseMerkleProof(`flightlog-proof/1 ${root} 3 3`)).toMatch(/not in a tree of 3/);
    expect(parseMerkleProof(`flightlog-proof/1 ${root} 0 2 zz`)).toMatch(/SHA-256/);
    expect(parseMerkleProof(`flightlog-proof/1 ${root} 0 1`)).toEqual({
      root,
      leafIndex: 0,
      treeSize: 1,
      path: [],
    });
  });
});
