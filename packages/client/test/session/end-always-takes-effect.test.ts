import { describe, expect, it } from 'vitest';
import { FlightlogClient, type EndOptions } from '../../src/index.js';
import { RecordingLogger } from '@flightlog/test-support';
import { ScriptedTransport } from '../harness/scripted-transport.js';

function setup() {
  const transport = new ScriptedTransport();
  const logger = new RecordingLogger();
  const client = new FlightlogClient({ apiKey: 'k', logger, flushOnExit: false }, { transport });
  const finalTraces = async () => {
    await client.close();
    const last = new Map<string, { status: string; endedAt?: string | null }>();
    for (const batch of transport.requests)
      for (const item of batch.items) last.set(item.trace.id, item.trace);
    return last;
  };
  return { client, logger, finalTraces };
}

class ThrowingDate extends Date {
  override getTime(): number {
    throw new Error('no time for you');
  }
}

describe('end() and fail() always take effect, whatever endedAt is', () => {
  it('a Proxy, a Date subclass whose getTime throws, a throwing prototype trap, a non-Date: ended, at a sane time', async () => {
    const { client, logger, finalTraces } = setup();
    const before = Date.now();
    // after the session starts, so it is kept as given (not clamped to the start, not now)
    const real = new Date(before + 60_000);
    const odd: unknown[] = [
      new Proxy(new Date(), {}),
      new Proxy(new Date(), {
        getPrototypeOf() {
          throw new Error('trap');
        },
      }),
      new ThrowingDate(real.getTime()),
      { getTime: () => 5 },
      Object.create(Date.prototype),
      new Date(Number.NaN),
      42,
    ];
    const sessions = odd.map((endedAt, i) => {
      const session = client.startSession({ inputSummary: `odd endedAt ${i}` });
      const options = { outputSummary: 'done', endedAt } as EndOptions;
      expect(() =>
        i % 2 === 0 ? session.end(options) : session.fail('boom', options),
      ).not.toThrow();
      return session;
    });
    expect(sessions.map((s) => s.status)).toEqual(
      odd.map((_, i) => (i % 2 === 0 ? 'completed' : 'errored')),
    );
    const traces = await finalTraces();
    const ends = sessions.map((s) => Date.parse(traces.get(s.traceId)?.endedAt ?? ''));
    // The subclass is a real Date: its time is read without calling its getTime, exactly.
    expect(ends[2]).toBe(real.getTime());
    for (const [i, end] of ends.entries()) {
      expect(traces.get(sessions[i]!.traceId)?.status).toBe(sessions[i]!.status);
      expect(end).toBeGreaterThanOrEqual(i === 2 ? real.getTime() : before);
    }
    expect(logger.matching('endedAt is not a valid Date').length).toBeGreaterThanOrEqual(1);
    expect(logger.matching('internal error')).toEqual([]);
  });
});
