import { describe, expect, it } from 'vitest';
import { QueueBudget } from '../../src/live/queue-budget.js';

describe('the total budget of live streams', () => {
  it('admits every write while the instance has room, one stream over its share included', () => {
    const budget = new QueueBudget(1_000);
    const [a, b] = [budget.account(), budget.account()];
    expect(budget.admits(a, 900)).toBe(true);
    budget.update(a, 900);
    expect(budget.admits(b, 100)).toBe(true);
  });

  it('past the budget refuses only streams that would hold more than their share', () => {
    const budget = new QueueBudget(1_000);
    const stuck = budget.account();
    const keepingUp = budget.account();
    budget.update(stuck, 1_000);
    // over the budget: the stream holding 1,000 of it may not add more
    expect(budget.admits(stuck, 10)).toBe(false);
    // a stream that keeps up (its share is 500) still gets its messages
    expect(budget.admits(keepingUp, 400)).toBe(true);
    expect(budget.admits(keepingUp, 600)).toBe(false);
  });

  it('frees what a stream held when it drains or ends', () => {
    const budget = new QueueBudget(1_000);
    const a = budget.account();
    const b = budget.account();
    budget.update(a, 1_000);
    budget.update(a, 0); // drained
    expect(budget.bytes).toBe(0);
    budget.update(b, 800);
    budget.release(b);
    budget.release(b);
    expect(budget.bytes).toBe(0);
    budget.update(b, 500); // a released account counts for nothing
    expect(budget.bytes).toBe(0);
    expect(budget.admits(a, 1_000)).toBe(true);
  });
});
