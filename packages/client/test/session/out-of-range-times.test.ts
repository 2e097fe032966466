import { describe, expect, it, vi } from 'vitest';
import { FlightlogClient, type EventFields } from '../../src/index.js';
import { assembleItems } from '../../src/batch-assembler.js';
import type { RecordedEvent } from '../../src/recorded-event.js';
import { WarningChannel } from '../../src/logger.js';
import { RecordingLogger } from '@flightlog/test-support';
import { ScriptedTransport } from '../harness/scripted-transport.js';

const ULID = /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/;
/** The last instant the service stores (9999-12-31T23:59:59.999Z). */
const LAST_MS = 253_402_300_799_999;

function setup() {
  const transport = new ScriptedTransport();
  const logger = new RecordingLogger();
  const client = new FlightlogClient({ apiKey: 'k', logger, flushOnExit: false }, { transport });
  const sent = async () => {
    await client.close();
    return transport.requests.flatMap((b) => b.items.flatMap((i) => i.events));
  };
  return { client, logger, sent };
}

describe('a time the service cannot store costs its own event only', () => {
  it('is refused when recorded (id returned, warning, invalidEvents), and the other sessions’ events are sent', async () => {
    const { client, logger, sent } = setup();
    const sessions = Array.from({ length: 20 }, (_, i) =>
      client.startSession({ inputSummary: `run ${i}` }),
    );
    for (const session of sessions) session.toolCall({ name: 'fine' });
    const odd = client.startSession({ inputSummary: 'odd times' });
    const far = new Date('9999-12-31T23:59:59.000Z');
    const bad: EventFields[] = [
      { durationMs: Number.MAX_SAFE_INTEGER },
      { durationMs: 1e15 },
      { startedAt: far, durationMs: 10_000 },
      { endedAt: null, durationMs: 7e13 }, // in progress, started 2,200 years ago,
      { endedAt: new Date('0001-01-01T00:00:01.000Z'), durationMs: 60_000 },
    ];
    const ids: string[] = [];
    for (const fields of bad) {
      let id = '';
      expect(() => (id = odd.toolCall({ name: 'bad time' }, fields))).not.toThrow();
      ids.push(id);
    }
    expect(ids.every((id) => ULID.test(id))).toBe(true);
    odd.toolCall({ name: 'fine too' });
    expect(client.stats()).toMatchObject({ invalidEvents: bad.length, recordedEvents: 21 });
    expect(
      logger
        .matching('tool_call event dropped: ')
        .every((m) => m.includes('0001-01-01 to 9999-12-31')),
    ).toBe(true);
    const events = await sent();
    expect(events).toHaveLength(21);
    expect(events.some((e) => e.payload.name === 'bad time')).toBe(false);
    expect(client.stats()).toMatchObject({ deliveredEvents: 21, droppedEvents: 0 });
  });

  it('accepts the range’s very ends', async () => {
    const { client, sent } = setup();
    const session = client.startSession({ inputSummary: 'edges' });
    session.toolCall({ name: 'last' }, { endedAt: new Date(LAST_MS), durationMs: 0 });
    session.toolCall(
      { name: 'first' },
      { startedAt: new Date('0001-01-01T00:00:00.000Z'), durationMs: 0 },
    );
    const events = await sent();
    expect(events.map((e) => e.startedAt)).toEqual([
      '9999-12-31T23:59:59.999Z',
      '0001-01-01T00:00:00.000Z',
    ]);
  });

  it('a host clock outside the range (a mocked Date.now) refuses the event, never the batch', async () => {
    const { client, sent } = setup();
    const session = client.startSession({ inputSummary: 'clock' });
    const now = vi.spyOn(Date, 'now').mockReturnValue(LAST_MS + 1_000);
    try {
      expect(ULID.test(session.toolCall({ name: 'at a broken now' }))).toBe(true);
    } finally {
      now.mockRestore();
    }
    session.toolCall({ name: 'fine' });
    const events = await sent();
    expect(events.map((e) => e.payload.name)).toEqual(['fine']);
    expect(client.stats()).toMatchObject({ invalidEvents: 1, deliveredEvents: 1 });
  });

  it('where the batch is assembled, an event that cannot be written is dropped and reported alone', async () => {
    const event = (id: string, startedAtMs: number): RecordedEvent => ({
      id,
      traceId: '01J00000000000000000000000',
      sequence: 0,
      type: 'custom',
      startedAtMs,
      endedAtMs: startedAtMs,
      durationMs: 0,
      status: 'ok',
      errorMessage: null,
      parentEventId: null,
      payload: { name: id },
      payloadBytes: 20,
      bytes: 100,
    });
    const trace = {
      id: '01J00000000000000000000000',
      agentId: 'unknown',
      status: 'running' as const,
      startedAt: '2026-01-01T00:00:00.000Z',
      inputSummary: 'x',
      endedAt: null,
      durationMs: null,
      outputSummary: null,
      errorMessage: null,
      tags: [],
      eventCount: 3,
      totalTokens: 0,
      totalCostUsd: '0',
      totalLamports: '0',
      chainTxCount: 0,
      toolsCalled: [],
      anchorSignature: null,
      anchorSlot: null,
      merkleProof: null,
      traceHash: null,
      shareToken: null,
    };
    const dropped: { count: number; reason: string }[] = [];
    const wire = await assembleItems(
      [
        {
          trace,
          events: [
            event('01J00000000000000000000001', Date.parse('2026-01-01T00:00:00Z')),
            event('01J00000000000000000000002', Number.MAX_SAFE_INTEGER),
            event('01J00000000000000000000003', Number.NaN),
            event('01J00000000000000000000004', Date.parse('2026-01-01T00:00:01Z')),
          ],
        },
        {
          // a snapshot that cannot even be read costs its item only
          trace: Object.defineProperty({ ...trace, id: '01J00000000000000000000009' }, 'tags', {
            enumerable: true,
            get() {
              throw new Error('unreadable snapshot');
            },
          }),
          events: [event('01J00000000000000000000005', 0)],
        },
        { trace: { ...trace, id: '01J0000000000000000000000A' }, events: [] },
      ],
      { kind: 'plain' },
      { dropped: (count, reason) => dropped.push({ count, reason }) },
      { maxEventBytes: 1024 * 1024, warnings: new WarningChannel(new RecordingLogger()) },
    );
    expect(wire.map((i) => i.traceId)).toEqual([
      '01J00000000000000000000000',
      '01J0000000000000000000000A',
    ]);
    expect(wire[0]?.events.map((e) => e.id)).toEqual([
      '01J00000000000000000000001',
      '01J00000000000000000000004',
    ]);
    expect(dropped.map((d) => d.count)).toEqual([1, 1, 1]);
    expect(dropped[2]?.reason).toContain('unreadable snapshot');
  });
});
