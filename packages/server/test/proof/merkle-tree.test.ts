import {
  merkleAuditPath,
  merkleLeafHash,
  merkleNodeHash,
  merkleRoot,
  merkleRootFromPath,
  verifyMerklePath,
} from '@flightlog/protocol';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

/*
 * The anchoring tree hashes as Certificate Transparency's (RFC 9162 §2.1): checked against the
 * reference roots and audit paths every CT implementation is tested with, and for every leaf of
 * trees of every shape, that its path proves it and nothing else (issue 25, part 3).
 */
const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');
const unhex = (text: string) => new Uint8Array(Buffer.from(text, 'hex'));

const CT_LEAVES = [
  '',
  '00',
  '10',
  '2021',
  '3031',
  '40414243',
  '5051525354555657',
  '606162636465666768696a6b6c6d6e6f',
].map((data) => merkleLeafHash(unhex(data)));
const CT_ROOTS = [
  'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
  '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
  'fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125',
  'aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77',
  'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
  '4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4',
  '76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef',
  'ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c',
  '5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328',
];
/** CT's inclusion vectors for the tree of all eight (0-based indexes). */
const CT_PATHS = [
  {
    index: 0,
    path: [
      '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7',
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      '6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4',
    ],
  },
  {
    index: 5,
    path: [
      'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b',
      'ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0',
      'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
    ],
  },
];

describe('the anchoring Merkle tree (RFC 9162)', () => {
  it('gives the Certificate Transparency reference roots for every size 0 to 8', () => {
    for (let size = 0; size <= 8; size++)
      expect(hex(merkleRoot(CT_LEAVES.slice(0, size))), `size ${size}`).toBe(CT_ROOTS[size]);
  });

  it('gives the reference audit paths, and they lead to the root', () => {
    const root = unhex(CT_ROOTS[8] as string);
    for (const { index, path } of CT_PATHS) {
      expect(merkleAuditPath(index, CT_LEAVES).map(hex)).toEqual(path);
      expect(verifyMerklePath(index, 8, CT_LEAVES[index]!, path.map(unhex), root)).toBe(true);
    }
  });

  it('separates leaves from nodes: two leaves joined are not a leaf', () => {
    const [a, b] = [merkleLeafHash(unhex('01')), merkleLeafHash(unhex('02'))];
    const node = merkleNodeHash(a, b);
    expect(hex(merkleRoot([a, b]))).toBe(hex(node));
    // the bytes of the node's children, offered as one leaf, hash to something else
    const asLeaf = merkleLeafHash(new Uint8Array([...a, ...b]));
    expect(hex(asLeaf)).not.toBe(hex(node));
  });

  // distinct runs' leaves are distinct
  const leafSet = fc
    .uniqueArray(fc.uint8Array({ maxLength: 40 }), {
      minLength: 1,
      maxLength: 70,
      selector: (data) => Buffer.from(data).toString('hex'),
    })
    .map((data) => data.map(merkleLeafHash));

  it('every leaf of trees of every size is proven by its path, and only at its place', () => {
    fc.assert(
      fc.property(leafSet, (leaves) => {
        const root = merkleRoot(leaves);
        leaves.forEach((leaf, index) => {
          const path = merkleAuditPath(index, leaves);
          expect(verifyMerklePath(index, leaves.length, leaf, path, root)).toBe(true);
          // at another place, or with one step left out: refused. (The size is not bound by the
          // path: the leaf of a tree of 3 has the same path in one of 4 whose last node is the
          // 3rd leaf, so the anchor states the size beside the root.)
          if (leaves.length > 1) {
            const other = (index + 1) % leaves.length;
            expect(verifyMerklePath(other, leaves.length, leaf, path, root)).toBe(false);
          }
          if (path.length > 0)
            expect(verifyMerklePath(index, leaves.length, leaf, path.slice(1), root)).toBe(false);
        });
      }),
      { numRuns: 60 },
    );
  });

  it('one changed byte in a leaf, a sibling or the root fails the proof', () => {
    fc.assert(
      fc.property(
        leafSet.filter((leaves) => leaves.length > 1),
        fc.nat(),
        fc.nat(31),
        (leaves, pick, byte) => {
          const index = pick % leaves.length;
          const root = merkleRoot(leaves);
          const path = merkleAuditPath(index, leaves);
          const flip = (bytes: Uint8Array) => {
            const copy = new Uint8Array(bytes);
            copy[byte] = (copy[byte] ?? 0) ^ 0x01;
            return copy;
          };
          const leaf = leaves[index]!;
          expect(verifyMerklePath(index, leaves.length, flip(leaf), path, root)).toBe(false);
          expect(verifyMerklePath(index, leaves.length, leaf, path, flip(root))).toBe(false);
          const tampered = path.map((step, i) => (i === pick % path.length ? flip(step) : step));
          expect(verifyMerklePath(index, leaves.length, leaf, tampered, root)).toBe(false);
        },
      ),
      { numRuns: 100 },
    );
  });

  it('refuses an index outside the tree instead of computing a root', () => {
    const leaves = CT_LEAVES.slice(0, 3);
    expect(() => merkleAuditPath(3, leaves)).toThrow(RangeError);
    expect(merkleRootFromPath(3, 3, leaves[0]!, [])).toBeUndefined();
    expect(merkleRootFromPath(-1, 3, leaves[0]!, [])).toBeUndefined();
    // a one-leaf tree's root is the leaf, with an empty path
    expect(hex(merkleRootFromPath(0, 1, leaves[0]!, []) as Uint8Array)).toBe(hex(leaves[0]!));
  });
});
