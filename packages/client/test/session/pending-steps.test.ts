import { describe, expect, it } from 'vitest';
import { MAX_PENDING_STEPS, PendingSteps } from '../../src/pending-steps.js';

const step = (log: number[], n: number) => ({ record: () => log.push(n) });

describe('pending steps (instrumented calls recorded on the next turn)', () => {
  it('records what waits on the next turn, in the order the steps ended, once', async () => {
    const log: number[] = [];
    const pending = new PendingSteps();
    for (let n = 1; n <= 3; n++) pending.add(step(log, n));
    expect(log).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(log).toEqual([1, 2, 3]);
    pending.settle();
    expect(log).toEqual([1, 2, 3]);
  });

  it('records at once when asked (a flush, stats, end), and a step added while settling too', () => {
    const log: number[] = [];
    const pending = new PendingSteps();
    pending.add({
      record: () => {
        log.push(1);
        pending.add(step(log, 3));
        pending.settle(); // re-entered (a full buffer flushing): the outer loop goes on
        log.push(2);
      },
    });
    pending.settle();
    expect(log).toEqual([1, 2, 3]);
    expect(pending.size).toBe(0);
  });

  it(`holds at most ${MAX_PENDING_STEPS} steps: a burst past that is recorded as it comes`, () => {
    const log: number[] = [];
    const pending = new PendingSteps();
    for (let n = 0; n < MAX_PENDING_STEPS; n++) pending.add(step(log, n));
    expect(log).toHaveLength(0);
    pending.add(step(log, MAX_PENDING_STEPS));
    expect(log).toHaveLength(MAX_PENDING_STEPS);
    expect(pending.size).toBe(1);
  });
});
