import { describe, expect, it } from 'vitest';
import { AgentWriteTurns } from '../../src/ingest/agent-write-turns.js';

/** A write the test finishes by hand: it records when the store would have started it. */
function gatedWrite<T>(log: string[], name: string, value: T) {
  let finish: () => void = () => {};
  let fail: (error: Error) => void = () => {};
  const write = () =>
    new Promise<T>((resolve, reject) => {
      log.push(`start ${name}`);
      finish = () => {
        log.push(`end ${name}`);
        resolve(value);
      };
      fail = reject;
    });
  return {
    write,
    finish: () => finish(),
    fail: (error: Error) => fail(error),
  };
}

/**
 * Lets a finished write hand its turn over: the microtasks after it, then the immediate the turn
 * passes on in, then one more round so the next write has started.
 */
const settle = () => new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve)));

describe("an agent's large writes take turns", () => {
  it("runs one agent's writes one at a time, in the order they arrived", async () => {
    const turns = new AgentWriteTurns(10);
    const log: string[] = [];
    const writes = ['w1', 'w2', 'w3'].map((name) => gatedWrite(log, name, name));
    const results = writes.map((w) => turns.inTurn('agent-a', w.write));
    await settle();
    expect(log).toEqual(['start w1']);

    writes[0]?.finish();
    await settle();
    expect(log).toEqual(['start w1', 'end w1', 'start w2']);

    writes[1]?.finish();
    await settle();
    writes[2]?.finish();
    expect(await Promise.all(results)).toEqual(['w1', 'w2', 'w3']);
    expect(log).toEqual(['start w1', 'end w1', 'start w2', 'end w2', 'start w3', 'end w3']);
  });

  it("runs another agent's write while the first agent's line waits", async () => {
    const turns = new AgentWriteTurns(10);
    const log: string[] = [];
    const a1 = gatedWrite(log, 'a1', 'a1');
    const a2 = gatedWrite(log, 'a2', 'a2');
    const b1 = gatedWrite(log, 'b1', 'b1');
    const first = turns.inTurn('agent-a', a1.write);
    const second = turns.inTurn('agent-a', a2.write);
    const other = turns.inTurn('agent-b', b1.write);
    await settle();
    // agent b is not behind agent a's line: its write is in the store beside a1
    expect(log).toEqual(['start a1', 'start b1']);
    b1.finish();
    expect(await other).toBe('b1');
    expect(log).not.toContain('start a2');

    a1.finish();
    await settle();
    a2.finish();
    expect(await Promise.all([first, second])).toEqual(['a1', 'a2']);
  });

  it("refuses (undefined, not run) a write past maxWaiting, and takes the agent's writes again once its line is shorter", async () => {
    const turns = new AgentWriteTurns(2);
    const log: string[] = [];
    const running = gatedWrite(log, 'a1', 'a1');
    const waiting = [gatedWrite(log, 'a2', 'a2'), gatedWrite(log, 'a3', 'a3')];
    const accepted = [running, ...waiting].map((w) => turns.inTurn('agent-a', w.write));

    let refusedRan = false;
    const refused = await turns.inTurn('agent-a', async () => {
      refusedRan = true;
      return 'a4';
    });
    expect(refused).toBeUndefined();
    expect(refusedRan).toBe(false);
    // the bound is per agent: another agent's write is taken meanwhile
    expect(await turns.inTurn('agent-b', async () => 'b1')).toBe('b1');

    running.finish();
    await settle();
    // a1 done, a2 in the store, a3 waiting: there is room in the line again
    const later = turns.inTurn('agent-a', async () => 'a5');
    waiting[0]?.finish();
    await settle();
    waiting[1]?.finish();
    expect(await Promise.all(accepted)).toEqual(['a1', 'a2', 'a3']);
    expect(await later).toBe('a5');
    expect(log).not.toContain('start a4');
  });

  it('passes the turn on when a write throws, and the caller gets the error', async () => {
    const turns = new AgentWriteTurns(10);
    const log: string[] = [];
    const failing = gatedWrite(log, 'a1', 'a1');
    const next = gatedWrite(log, 'a2', 'a2');
    const first = turns.inTurn('agent-a', failing.write);
    const second = turns.inTurn('agent-a', next.write);
    await settle();
    failing.fail(new Error('statement failed'));
    await expect(first).rejects.toThrow('statement failed');
    await settle();
    expect(log).toEqual(['start a1', 'start a2']);
    next.finish();
    expect(await second).toBe('a2');

    // and the agent's line is gone: a write after all of them runs at once
    const log2: string[] = [];
    const alone = gatedWrite(log2, 'a3', 'a3');
    const third = turns.inTurn('agent-a', alone.write);
    expect(log2).toEqual(['start a3']);
    alone.finish();
    expect(await third).toBe('a3');
  });

  it('starts the next turn only after a turn of the event loop: work queued during a write runs first', async () => {
    const turns = new AgentWriteTurns(10);
    const order: string[] = [];
    let finishFirst: () => void = () => {};
    const first = turns.inTurn(
      'agent-a',
      () =>
        new Promise<string>((resolve) => {
          finishFirst = () => resolve('a1');
        }),
    );
    const second = turns.inTurn('agent-a', async () => {
      order.push('a2');
      return 'a2';
    });
    await settle();
    // another agent's request arrives while a1 is in the store, then a1 ends
    setImmediate(() => order.push('other request'));
    finishFirst();
    expect(await first).toBe('a1');
    expect(await second).toBe('a2');
    expect(order).toEqual(['other request', 'a2']);
  });
});
