import { describe, expect, it } from 'vitest';
import { createInProcessBus } from '../../src/live/in-process-bus.js';
import { leadingTraceId } from '../../src/live/item-trace-id.js';

/*
 * A deletion reads each buffered message's trace id from the head of its bytes (the trace comes
 * first), and the whole message only when the head does not hold the whole trace.
 */
const item = (id: string, summary: string, filler: string) =>
  JSON.stringify({ trace: { id, inputSummary: summary }, events: [{ id: 'e', text: filler }] });

describe("a live message's trace id from its head", () => {
  it('is read from any head that holds the whole trace, cut anywhere after it', () => {
    const data = item('run-1', 'swap', '€'.repeat(100));
    const traceEnd = data.indexOf(',"events"');
    for (const cut of [traceEnd, traceEnd + 5, data.length])
      expect(leadingTraceId(data.slice(0, cut))).toBe('run-1');
    // a head cut inside the trace says nothing (the whole data must be read)
    expect(leadingTraceId(data.slice(0, traceEnd - 1))).toBeUndefined();
    expect(leadingTraceId('{"events":[],"trace":{"id":"x"}}')).toBeUndefined();
  });

  it('lets a deletion find traces longer than the head, and heads cut inside a character', async () => {
    const bus = createInProcessBus();
    const long = item('run-long', 'x'.repeat(40_000), 'y');
    // the 16 KiB cut falls inside a three-byte character, after the trace
    const cut = item('run-cut', 'z', '€'.repeat(20_000));
    const kept = item('run-kept', 'k', 'w');
    await bus.publish('a', [long]);
    await bus.publish('a', [cut]);
    await bus.publish('a', [kept]);
    await bus.forgetTraces('a', ['run-long', 'run-cut']);
    expect((await bus.replay('a')).messages.map((m) => m.data)).toEqual([kept]);
  });
});
