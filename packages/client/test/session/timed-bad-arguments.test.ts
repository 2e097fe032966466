import { describe, expect, it } from 'vitest';
import { FlightlogClient } from '../../src/index.js';
import { RecordingLogger } from '@flightlog/test-support';
import { ScriptedTransport } from '../harness/scripted-transport.js';

type Loose = (...args: unknown[]) => unknown;

describe('session.timed with bad arguments never throws into the host', () => {
  it('a run that is not a function: undefined back, a warning, an invalid event, the session goes on', async () => {
    const transport = new ScriptedTransport();
    const logger = new RecordingLogger();
    const client = new FlightlogClient({ apiKey: 'k', logger, flushOnExit: false }, { transport });
    const session = client.startSession({ inputSummary: 'bad timed' });
    const timed = session.timed.bind(session) as Loose;
    for (const run of [42, undefined, null, 'run', {}])
      expect(() =>
        expect(timed('tool_call', run, () => ({ name: 'x' }))).toBeUndefined(),
      ).not.toThrow();
    // describe not a function, an unknown type: run still runs, its value comes back
    expect(timed('tool_call', () => 7, 'describe')).toBe(7);
    expect(
      timed(
        'no_such_type',
        () => 8,
        () => ({ name: 'x' }),
      ),
    ).toBe(8);
    expect(timed(Symbol('type'), 9, () => ({ name: 'x' }))).toBeUndefined();
    session.toolCall({ name: 'after' });
    session.end();
    expect(client.stats()).toMatchObject({ invalidEvents: 8, recordedEvents: 1 });
    expect(logger.matching('tool_call event dropped: timed: run must be a function')).toHaveLength(
      1,
    );
    expect(
      logger.matching('Symbol(type) event dropped: timed: run must be a function'),
    ).toHaveLength(1);
    expect(logger.matching('describe must be a function')).toHaveLength(1);
    expect(logger.matching('unknown event type "no_such_type"')).toHaveLength(1);
    expect(logger.matching('internal error')).toEqual([]);
    await client.close();
    const events = transport.requests.flatMap((b) => b.items.flatMap((i) => i.events));
    expect(events.map((e) => e.payload.name)).toEqual(['after']);
  });

  it('on a disabled client too', () => {
    for (const settings of [{ apiKey: 'k', enabled: false }, { apiKey: '' }]) {
      const client = new FlightlogClient({ ...settings, logger: new RecordingLogger() });
      const session = client.startSession({ inputSummary: 'x' });
      const timed = session.timed.bind(session) as Loose;
      expect(() => expect(timed('tool_call', 42, () => ({}))).toBeUndefined()).not.toThrow();
      expect(timed('tool_call', () => 3, 42)).toBe(3);
    }
  });
});
