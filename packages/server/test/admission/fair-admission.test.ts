import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FairAdmission, type Admission } from '../../src/admission/fair-admission.js';

/*
 * The gate on its own, with fake timers: who gets a freed slot, what is refused, and that every
 * slot and waiter is accounted for exactly once (issue 15: one tenant's valid requests take at
 * most their share of the server).
 */

const options = { maxInFlight: 2, maxQueuedPerTenant: 3, maxQueued: 5, maxWaitMs: 1_000 };

type Granted = Extract<Admission, { admitted: true }>;

/** Admissions in the order they were settled, by label. */
function recorder() {
  const order: string[] = [];
  const held = new Map<string, Granted>();
  const outcomes = new Map<string, Admission>();
  const admit = (gate: FairAdmission, tenant: string, label: string, abort?: AbortSignal) =>
    void gate.admit(tenant, abort).then((admission) => {
      order.push(label);
      outcomes.set(label, admission);
      if (admission.admitted) held.set(label, admission);
    });
  const release = (label: string) => held.get(label)!.release();
  return { order, held, outcomes, admit, release };
}

describe('fair admission', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('admits at once while slots are free, whoever asks', async () => {
    const gate = new FairAdmission(options);
    const r = recorder();
    r.admit(gate, 'a', 'a1');
    r.admit(gate, 'a', 'a2');
    await vi.advanceTimersByTimeAsync(0);
    expect(r.order).toEqual(['a1', 'a2']);
    expect(gate.active).toBe(2);
    expect(gate.waiting).toBe(0);
  });

  it('admits without waiting only what admit would grant at once, never past a waiting request', async () => {
    const gate = new FairAdmission(options);
    const first = gate.tryAdmit('a');
    expect(first?.admitted).toBe(true);
    const r = recorder();
    r.admit(gate, 'b', 'b1'); // the second slot
    r.admit(gate, 'c', 'c1'); // waits
    await vi.advanceTimersByTimeAsync(0);
    expect(gate.tryAdmit('d')).toBeUndefined(); // full
    first?.release(); // the freed slot goes to the one waiting, not to a later tryAdmit
    await vi.advanceTimersByTimeAsync(0);
    expect(r.order).toEqual(['b1', 'c1']);
    expect(gate.tryAdmit('d')).toBeUndefined();
    r.release('b1');
    expect(gate.waiting).toBe(0);
    const again = gate.tryAdmit('d');
    expect(again?.admitted).toBe(true);
    expect(gate.active).toBe(2);
    again?.release();
    again?.release(); // once only
    expect(gate.active).toBe(1);
  });

  it('gives a freed slot to the waiting tenant holding the fewest, then takes turns', async () => {
    const gate = new FairAdmission({ ...options, maxQueuedPerTenant: 10, maxQueued: 20 });
    const r = recorder();
    // the noisy tenant holds both slots and queues four more
    for (let i = 1; i <= 6; i++) r.admit(gate, 'noisy', `n${i}`);
    await vi.advanceTimersByTimeAsync(0);
    // then two quiet tenants each ask for two
    r.admit(gate, 'quiet', 'q1');
    r.admit(gate, 'quiet', 'q2');
    r.admit(gate, 'other', 'o1');
    await vi.advanceTimersByTimeAsync(0);
    expect(r.order).toEqual(['n1', 'n2']);
    expect(gate.waiting).toBe(7);

    // a slot freed by the noisy tenant goes to a tenant holding none, not to n3
    r.release('n1');
    await vi.advanceTimersByTimeAsync(0);
    expect(r.order.at(-1)).toBe('q1');
    // noisy now holds none either, and came first: its turn
    r.release('n2');
    await vi.advanceTimersByTimeAsync(0);
    expect(r.order.at(-1)).toBe('n3');
    // then the one tenant that holds none, whatever noisy has waiting
    r.release('q1');
    await vi.advanceTimersByTimeAsync(0);
    expect(r.order.at(-1)).toBe('o1');
    // quiet and noisy hold none: quiet waited longer in the rotation
    r.release('n3');
    await vi.advanceTimersByTimeAsync(0);
    expect(r.order.at(-1)).toBe('q2');
    // alone in the line, the noisy tenant gets every slot again
    r.release('o1');
    r.release('q2');
    await vi.advanceTimersByTimeAsync(0);
    expect(r.order.slice(-2)).toEqual(['n4', 'n5']);
    expect(gate.active).toBe(2);
    expect(gate.waiting).toBe(1);
  });

  it("refuses past a tenant's own line without taking others' places, and past the whole line", async () => {
    const gate = new FairAdmission(options);
    const r = recorder();
    for (let i = 1; i <= 6; i++) r.admit(gate, 'noisy', `n${i}`);
    await vi.advanceTimersByTimeAsync(0);
    // 2 admitted, 3 waiting, the 6th refused at once
    expect(r.outcomes.get('n6')).toEqual({
      admitted: false,
      reason: 'tenant-queue-full',
      retryAfterSeconds: 1,
    });
    expect(gate.waiting).toBe(3);
    // another tenant still has room in the line: 2 more fill it (5 in all), the 3rd is refused
    r.admit(gate, 'quiet', 'q1');
    r.admit(gate, 'other', 'o1');
    r.admit(gate, 'third', 't1');
    await vi.advanceTimersByTimeAsync(0);
    expect(r.outcomes.get('t1')).toMatchObject({ admitted: false, reason: 'queue-full' });
    expect(gate.waiting).toBe(5);
  });

  it('refuses a request that waited too long, and forgets it', async () => {
    const gate = new FairAdmission(options);
    const r = recorder();
    r.admit(gate, 'a', 'a1');
    r.admit(gate, 'a', 'a2');
    r.admit(gate, 'b', 'b1');
    await vi.advanceTimersByTimeAsync(999);
    expect(r.outcomes.has('b1')).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(r.outcomes.get('b1')).toMatchObject({ admitted: false, reason: 'wait-timeout' });
    expect(gate.waiting).toBe(0);
    // the slot freed later goes to nobody: it is free for the next request
    r.release('a1');
    expect(gate.active).toBe(1);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('takes a request whose client left out of the line, and a slot back exactly once', async () => {
    const gate = new FairAdmission(options);
    const r = recorder();
    r.admit(gate, 'a', 'a1');
    r.admit(gate, 'a', 'a2');
    const left = new AbortController();
    r.admit(gate, 'b', 'b1', left.signal);
    r.admit(gate, 'c', 'c1');
    await vi.advanceTimersByTimeAsync(0);
    left.abort();
    await vi.advanceTimersByTimeAsync(0);
    expect(r.outcomes.get('b1')).toMatchObject({ admitted: false, reason: 'aborted' });
    expect(gate.waiting).toBe(1);

    // a release called twice (answer and connection close) frees one slot, not two
    r.release('a1');
    r.release('a1');
    await vi.advanceTimersByTimeAsync(0);
    expect(r.order.at(-1)).toBe('c1');
    expect(gate.active).toBe(2);
    r.release('a2');
    r.release('c1');
    r.release('c1');
    expect(gate.active).toBe(0);
    // an abort after admission changes nothing
    const late = new AbortController();
    r.admit(gate, 'd', 'd1', late.signal);
    await vi.advanceTimersByTimeAsync(0);
    late.abort();
    expect(gate.active).toBe(1);
    r.release('d1');
    expect(gate.active).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('on close refuses every waiting request and any that would wait, and leaves no timer', async () => {
    const gate = new FairAdmission(options);
    const r = recorder();
    r.admit(gate, 'a', 'a1');
    r.admit(gate, 'a', 'a2');
    r.admit(gate, 'a', 'a3');
    r.admit(gate, 'b', 'b1');
    await vi.advanceTimersByTimeAsync(0);
    expect(vi.getTimerCount()).toBe(2);
    gate.close();
    r.admit(gate, 'c', 'c1');
    await vi.advanceTimersByTimeAsync(0);
    for (const label of ['a3', 'b1', 'c1'])
      expect(r.outcomes.get(label)).toMatchObject({ admitted: false, reason: 'closed' });
    expect(gate.waiting).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
    // the requests in flight finish as usual; a free slot is still taken (a request received
    // before the shutdown began finishes), none waits
    r.release('a1');
    r.admit(gate, 'd', 'd1');
    r.admit(gate, 'd', 'd2');
    await vi.advanceTimersByTimeAsync(0);
    expect(r.outcomes.get('d1')).toMatchObject({ admitted: true });
    expect(r.outcomes.get('d2')).toMatchObject({ admitted: false, reason: 'closed' });
    r.release('a2');
    r.release('d1');
    expect(gate.active).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });
});
