import { describe, expect, it } from 'vitest';
import { BatchGroups, type GroupMember } from '../../src/store/batch-groups.js';

interface Member extends GroupMember {
  name: string;
}

const member = (name: string, traceIds: string[] = [name], bytes = 10, batchKey = name) => ({
  name,
  traceIds,
  batchKey,
  bytes,
});

/** BatchGroups with writes the test finishes by hand. */
function groupsOf(limits: {
  maxBatches?: number;
  maxBytes?: number;
  concurrency?: number;
  gatherTurn?: boolean;
}) {
  const written: string[][] = [];
  const finish: (() => void)[] = [];
  const groups = new BatchGroups<Member>(
    { maxBatches: 4, maxBytes: 1_000, concurrency: 1, ...limits },
    (group) => {
      written.push(group.map((m) => m.name));
      return new Promise<void>((resolve) => finish.push(resolve));
    },
  );
  const finishNext = async () => {
    finish.shift()?.();
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { groups, written, finishNext };
}

describe('group commit gathers what arrives while the store is busy', () => {
  it('a batch arriving while no group is being written is written at once, alone', () => {
    const { groups, written } = groupsOf({});
    groups.add(member('a'));
    expect(written).toEqual([['a']]);
  });

  it('batches that wait form the next group, in arrival order, up to maxBatches', async () => {
    const { groups, written, finishNext } = groupsOf({ maxBatches: 3 });
    for (const name of ['a', 'b', 'c', 'd', 'e', 'f']) groups.add(member(name));
    expect(written).toEqual([['a']]);
    expect(groups.waitingCount).toBe(5);
    await finishNext();
    expect(written).toEqual([['a'], ['b', 'c', 'd']]);
    await finishNext();
    expect(written).toEqual([['a'], ['b', 'c', 'd'], ['e', 'f']]);
    expect(groups.waitingCount).toBe(0);
  });

  it('writes at most `concurrency` groups at once', async () => {
    const { groups, written, finishNext } = groupsOf({ concurrency: 2, maxBatches: 10 });
    for (const name of ['a', 'b', 'c', 'd']) groups.add(member(name));
    expect(written).toEqual([['a'], ['b']]);
    await finishNext();
    expect(written).toEqual([['a'], ['b'], ['c', 'd']]);
  });

  it('a trace or a batch id already in the group waits for a later one, keeping its place', async () => {
    const { groups, written, finishNext } = groupsOf({ maxBatches: 10 });
    groups.add(member('first'));
    groups.add(member('a', ['t1', 't2']));
    groups.add(member('b', ['t2'])); // t2 is in a's batch
    groups.add(member('c', ['t3'], 10, 'a')); // the same batch as a, sent again
    groups.add(member('d', ['t4']));
    await finishNext();
    expect(written).toEqual([['first'], ['a', 'd']]);
    await finishNext();
    expect(written).toEqual([['first'], ['a', 'd'], ['b', 'c']]);
  });

  it('stops at maxBytes; a batch larger than the limit still goes, alone', async () => {
    const { groups, written, finishNext } = groupsOf({ maxBytes: 100, maxBatches: 10 });
    groups.add(member('first'));
    groups.add(member('a', ['a'], 60));
    groups.add(member('b', ['b'], 60));
    groups.add(member('huge', ['huge'], 500));
    groups.add(member('c', ['c'], 10));
    await finishNext();
    expect(written.at(-1)).toEqual(['a']);
    await finishNext();
    expect(written.at(-1)).toEqual(['b']);
    await finishNext();
    expect(written.at(-1)).toEqual(['huge']);
    await finishNext();
    expect(written.at(-1)).toEqual(['c']);
  });

  it('a write that rejects (a bug) still frees its writer', async () => {
    const written: string[][] = [];
    const groups = new BatchGroups<Member>(
      { maxBatches: 4, maxBytes: 1_000, concurrency: 1 },
      (group) => {
        written.push(group.map((m) => m.name));
        return Promise.reject(new Error('bug'));
      },
    );
    groups.add(member('a'));
    groups.add(member('b'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(written).toEqual([['a'], ['b']]);
  });

  it('gathering a turn: batches read in one turn of the event loop form one group, the store idle', async () => {
    const { groups, written } = groupsOf({ gatherTurn: true, maxBatches: 10 });
    for (const name of ['a', 'b', 'c']) groups.add(member(name));
    expect(written).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(written).toEqual([['a', 'b', 'c']]);
  });
});
