import { describe, expect, it } from 'vitest';
import { PublishBacklog, type PendingBatch } from '../../src/live/publish-backlog.js';

let seq = 0;
function batch(
  agentId: string,
  bytes: number,
  overrides: Partial<PendingBatch> = {},
): PendingBatch {
  seq++;
  return {
    agentId,
    data: [`{"n":${seq}}`],
    token: `token-${seq}`,
    seq,
    bytes,
    publishedAt: 1_000 + seq,
    uncertain: false,
    resolve: () => {},
    reject: () => {},
    ...overrides,
  };
}

const seqs = (batches: PendingBatch[]) => batches.map((b) => b.seq);

describe('the live bus backlog (batches waiting for Redis)', () => {
  it('keeps batches in publish order, also when a failure is reported after a later batch was queued', () => {
    const backlog = new PublishBacklog(1_000);
    const first = batch('a', 10);
    const second = batch('a', 10);
    const third = batch('b', 10);
    backlog.push(second);
    backlog.push(third);
    backlog.push(first); // its write failed after the others were already waiting
    expect(seqs(backlog.peek(10))).toEqual([first.seq, second.seq, third.seq]);
    expect(backlog.size).toBe(3);
    expect(backlog.bytes).toBe(30);
    expect(backlog.shift()).toBe(first);
    expect(backlog.bytes).toBe(20);
  });

  it('past its budget the agent holding the most gives up its oldest batch, and the backlog remembers which agents lost how many, and when', () => {
    const backlog = new PublishBacklog(100);
    const batches = [batch('a', 40), batch('b', 40), batch('a', 40), batch('c', 10)];
    const dropped = batches.flatMap((b) => backlog.push(b));
    // a holds 80 of 120: its oldest goes, though b's is not much younger
    expect(seqs(dropped)).toEqual([batches[0]!.seq]);
    expect(seqs(backlog.peek(10))).toEqual(seqs(batches.slice(1)));
    expect(backlog.bytes).toBe(90);
    expect(backlog.hasGaps).toBe(true);
    const gaps = backlog.takeGaps();
    expect([...gaps.keys()]).toEqual(['a']);
    expect(gaps.get('a')).toEqual({
      missedBatches: 1,
      from: batches[0]!.publishedAt,
      to: batches[0]!.publishedAt,
    });
    expect(backlog.hasGaps).toBe(false);
  });

  it('one agent flooding during an outage loses its own batches, not the others’', () => {
    const backlog = new PublishBacklog(1_000);
    const quiet = [batch('quiet-1', 50), batch('quiet-2', 50)];
    for (const b of quiet) backlog.push(b);
    const flood = Array.from({ length: 200 }, () => batch('flood', 50));
    const dropped = flood.flatMap((b) => backlog.push(b));
    expect(dropped.every((b) => b.agentId === 'flood')).toBe(true);
    expect(dropped).toHaveLength(200 - 18);
    // the quiet agents' batches are all still there, and the flood's newest
    const held = backlog.peek(1_000);
    expect(held.slice(0, 2)).toEqual(quiet);
    expect(seqs(held.slice(2))).toEqual(seqs(flood.slice(-18)));
    expect([...backlog.takeGaps().keys()]).toEqual(['flood']);
    expect(backlog.bytes).toBe(1_000);
  });

  it('gives up a batch larger than its whole budget at once', () => {
    const backlog = new PublishBacklog(100);
    const huge = batch('a', 500);
    expect(backlog.push(huge)).toEqual([huge]);
    expect(backlog.size).toBe(0);
    expect(backlog.bytes).toBe(0);
    expect(backlog.takeGaps().get('a')?.missedBatches).toBe(1);
  });

  it('merges a gap whose announcement failed with those recorded since', () => {
    const backlog = new PublishBacklog(100);
    backlog.recordGap({ agentId: 'a', publishedAt: 10 });
    const taken = backlog.takeGaps().get('a')!;
    backlog.recordGap({ agentId: 'a', publishedAt: 30 });
    backlog.recordGap({ agentId: 'a', publishedAt: 20 });
    backlog.restoreGap('a', taken);
    expect(backlog.takeGaps().get('a')).toEqual({ missedBatches: 3, from: 10, to: 30 });
  });

  it('remembers a bounded number of agents, and counts the others', () => {
    const backlog = new PublishBacklog(100, 2);
    for (const agentId of ['a', 'b', 'c', 'd']) backlog.recordGap({ agentId, publishedAt: 1 });
    backlog.recordGap({ agentId: 'a', publishedAt: 2 });
    expect(backlog.takeGaps().size).toBe(2);
    expect(backlog.unannounced).toBe(2);
  });

  it('stays correct through many shifts (its storage is compacted as it drains)', () => {
    const backlog = new PublishBacklog(1_000_000);
    const all = Array.from({ length: 5_000 }, () => batch('a', 1));
    for (const b of all) backlog.push(b);
    for (let i = 0; i < 3_000; i++) expect(backlog.shift()).toBe(all[i]);
    expect(backlog.size).toBe(2_000);
    expect(backlog.peek(1)[0]).toBe(all[3_000]);
    expect(seqs(backlog.clear())).toEqual(seqs(all.slice(3_000)));
    expect(backlog.size).toBe(0);
    expect(backlog.bytes).toBe(0);
  });
});
