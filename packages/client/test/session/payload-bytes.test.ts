import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decryptPayload } from '@flightlog/protocol';
import { FlightlogClient } from '../../src/index.js';
import { assembleItems } from '../../src/batch-assembler.js';
import { WarningChannel } from '../../src/logger.js';
import { sealPayload } from '../../src/payload-sealing.js';
import type { RecordedEvent } from '../../src/recorded-event.js';
import { SliceClock, payloadJson, sealPayloadSliced, utf8Sliced } from '../../src/sliced-json.js';
import { RecordingLogger } from '@flightlog/test-support';
import { ScriptedTransport } from '../harness/scripted-transport.js';

const MiB = 1024 * 1024;
const wireBytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value), 'utf8');
/** A clock whose every slice is used up at once: each pause yields (the most sliced run). */
const eagerClock = () => {
  let t = 0;
  return new SliceClock(1, () => (t += 2));
};

/** Text with what JSON escapes or widens: controls, quotes, backslashes, 2/3/4-byte and lone surrogates. */
const awkwardUnit = fc.oneof(
  fc.constantFrom('\u0000', '\u0001', '\u001f', '\b', '\t', '\n', '\f', '\r', '"', '\\', '\u007f'),
  fc.constantFrom('é', 'ß', '中', '\u2028', '🚀', '\ud800', '\udfff', 'a', ' '),
);
const awkwardString = fc.string({ unit: awkwardUnit, maxLength: 30 });
/** Past the 16,384-character step, so it is written in steps (a pair may straddle a step's end). */
const longString = fc
  .tuple(awkwardString, fc.integer({ min: 16_380, max: 40_000 }))
  .map(([unit, length]) => (unit || '🚀').repeat(Math.ceil(length / Math.max(1, unit.length))));

const jsonValue = fc.letrec((tie) => ({
  leaf: fc.oneof(awkwardString, fc.double(), fc.integer(), fc.boolean(), fc.constant(null)),
  node: fc.oneof(
    { depthSize: 'small' },
    tie('leaf'),
    fc.array(tie('node'), { maxLength: 5 }),
    fc.dictionary(awkwardString, tie('node'), { maxKeys: 5 }),
  ),
}));

describe('payload sizes are the UTF-8 bytes of their JSON as sent, and big ones are written in slices', () => {
  it('payloadJson writes exactly JSON.stringify and counts its UTF-8 bytes, in one call or in slices (property-based)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.dictionary(awkwardString, fc.oneof(jsonValue.node, longString), { maxKeys: 4 }),
        fc.boolean(),
        async (payload, sliced) => {
          const made = await payloadJson(payload, sliced ? Infinity : 0, 64 * MiB, eagerClock());
          expect(made).toEqual({ json: JSON.stringify(payload), bytes: wireBytes(payload) });
        },
      ),
      { numRuns: 300 },
    );
  });

  it('never splits a surrogate pair between steps, nor joins a lone surrogate to the next pair', async () => {
    // a lone high surrogate before a pair: a step may end right after the lone one
    for (const text of [
      '\ud800🚀'.repeat(20_000),
      `x${'🚀'.repeat(20_000)}`,
      '\udc00🚀'.repeat(9_000),
    ]) {
      const payload = { text };
      const made = await payloadJson(payload, Infinity, 64 * MiB, eagerClock());
      expect(made).toEqual({ json: JSON.stringify(payload), bytes: wireBytes(payload) });
      const json = JSON.stringify(payload);
      expect((await utf8Sliced(json, eagerClock())).equals(Buffer.from(json, 'utf8'))).toBe(true);
    }
  });

  it('counts a control character as the six bytes of its \\u00XX escape, and stops soon after the limit', async () => {
    const payload = { data: '\u0001'.repeat(1_000_000) };
    expect(wireBytes(payload)).toBe(6_000_011);
    const made = await payloadJson(payload, 1_000_011, MiB, eagerClock());
    expect('tooLarge' in made && made.tooLarge).toBeGreaterThan(MiB);
    expect('tooLarge' in made && made.tooLarge).toBeLessThan(MiB + 200_000);
  });

  it('encrypts and encodes long texts in steps with the same result', async () => {
    const key = Buffer.alloc(32, 7);
    const json = JSON.stringify({ text: '中🚀\u0001'.repeat(30_000) });
    const sealed = await sealPayloadSliced(
      json,
      { kind: 'encrypt', key },
      eagerClock(),
      sealPayload,
    );
    expect(decryptPayload(JSON.parse(sealed), key)).toEqual({
      kind: 'ok',
      payload: JSON.parse(json),
    });
    expect(Object.keys(JSON.parse(sealed) as object)).toEqual(['alg', 'iv', 'tag', 'ciphertext']);
    expect((await utf8Sliced(json, eagerClock())).equals(Buffer.from(json, 'utf8'))).toBe(true);
  });

  it('one huge event is assembled in many slices: the host’s loop runs in between', async () => {
    const event: RecordedEvent = {
      id: '01J00000000000000000000001',
      traceId: '01J00000000000000000000000',
      sequence: 0,
      type: 'custom',
      startedAtMs: Date.parse('2026-01-01T00:00:00Z'),
      endedAtMs: null,
      durationMs: null,
      status: 'ok',
      errorMessage: null,
      parentEventId: null,
      payload: { name: 'big', data: 'é\u0001'.repeat(300_000) },
      payloadBytes: 600_030,
      bytes: 600_300,
    };
    for (const sealing of [
      { kind: 'plain' } as const,
      { kind: 'encrypt', key: Buffer.alloc(32, 1) } as const,
    ]) {
      let turns = 0;
      let running = true;
      const tick = () => {
        turns += 1;
        if (running) setImmediate(tick);
      };
      setImmediate(tick);
      const wire = await assembleItems(
        [{ trace: trace(), events: [event] }],
        sealing,
        { dropped: () => expect.fail('nothing is dropped') },
        {
          maxEventBytes: 4 * MiB,
          warnings: new WarningChannel(new RecordingLogger()),
          clock: eagerClock(),
        },
      );
      running = false;
      // 600,000 characters in steps of 16,384: dozens of slices, each followed by a turn of the loop
      expect(turns).toBeGreaterThanOrEqual(30);
      const payload = wire[0]?.events[0]?.payload as string;
      if (sealing.kind === 'plain') expect(payload).toBe(JSON.stringify(event.payload));
      else expect(decryptPayload(JSON.parse(payload), sealing.key)).toMatchObject({ kind: 'ok' });
    }
  });

  it('maxEventBytes holds on the wire: 1,000,000 control characters and 600,000 CJK characters are cut to the marker', async () => {
    const transport = new ScriptedTransport();
    const logger = new RecordingLogger();
    const client = new FlightlogClient({ apiKey: 'k', logger, flushOnExit: false }, { transport });
    const session = client.startSession({ inputSummary: 'huge' });
    session.custom({ name: 'controls', data: '\u0001'.repeat(1_000_000) });
    session.custom({ name: 'cjk', data: '中'.repeat(600_000) });
    session.custom({ name: 'fits', data: 'x'.repeat(MiB - 100) });
    session.custom({ name: 'fits too', data: 'é'.repeat(MiB / 2 - 100) });
    session.end();
    await client.close();
    const events = transport.requests.flatMap((b) => b.items.flatMap((i) => i.events));
    expect(events.map((e) => e.payload.truncated ?? e.payload.name)).toEqual([
      true,
      true,
      'fits',
      'fits too',
    ]);
    for (const event of events) expect(wireBytes(event.payload)).toBeLessThanOrEqual(MiB);
    // one warning when it happens; the second is held back by the throttle and counted at close
    const warned = logger.matching('larger than maxEventBytes');
    expect(warned).toHaveLength(2);
    expect(warned[1]).toMatch(/^warnings held back by the throttle since last shown: 1 ×/);
    expect(client.stats()).toMatchObject({ deliveredEvents: 4, droppedEvents: 0 });
  });
});

function trace() {
  return {
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
    eventCount: 1,
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
}
