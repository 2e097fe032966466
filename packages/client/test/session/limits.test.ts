import { gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { FlightlogClient, type ChainTxPayload, type LlmCallPayload } from '../../src/index.js';
import type { Transport, TransportOutcome } from '../../src/http-transport.js';
import { RecordingLogger, llmPayload } from '@flightlog/test-support';
import { OK, ScriptedTransport } from '../harness/scripted-transport.js';

function setup(extra: Record<string, unknown> = {}, transport = new ScriptedTransport()) {
  const logger = new RecordingLogger();
  const client = new FlightlogClient(
    { apiKey: 'k', logger, flushOnExit: false, ...extra },
    { transport },
  );
  return { client, logger, transport };
}

describe('limits: totals, tags, buffer accounting, payloads changed after recording', () => {
  it('a trace whose totalLamports would pass 80 digits keeps arriving, capped, with one warning', async () => {
    const { client, logger, transport } = setup();
    const session = client.startSession({ inputSummary: 'whale' });
    for (let i = 0; i < 5; i++) session.chainTx({ signature: null, lamports: '9'.repeat(80) });
    session.end({ outputSummary: 'done' });
    await client.close();
    const traces = transport.requests.flatMap((b) => b.items.map((i) => i.trace));
    expect(traces.at(-1)).toMatchObject({
      status: 'completed',
      chainTxCount: 5,
      eventCount: 5,
      totalLamports: '9'.repeat(80),
    });
    expect(client.stats()).toMatchObject({ deliveredEvents: 5, droppedEvents: 0 });
    expect(logger.matching('totalLamports of trace')).toHaveLength(1);
  });

  it('lamports: decimal strings of any size and whole numbers up to 2^53 − 1 count exactly; anything else is refused with a warning, not counted', async () => {
    const { client, logger, transport } = setup();
    const session = client.startSession({ inputSummary: 'lamports' });
    const tx = (lamports: unknown) =>
      session.chainTx({ signature: null, lamports } as unknown as ChainTxPayload);
    tx('18446744073709551615'); // past 2^64: BigInt, exact
    tx(1); // a number, exact
    tx(Number.MAX_SAFE_INTEGER);
    tx('0');
    for (const bad of [
      -1,
      1.5,
      Number.NaN,
      Infinity,
      2 ** 60,
      '-5',
      '01',
      '1e3',
      ' 1',
      '',
      null,
      10n,
    ])
      tx(bad);
    session.end();
    await client.close();
    expect(client.stats()).toMatchObject({ recordedEvents: 4, invalidEvents: 12 });
    expect(transport.requests.at(-1)?.items[0]?.trace).toMatchObject({
      chainTxCount: 4,
      eventCount: 4,
      // 18446744073709551615 + 1 + 9007199254740991
      totalLamports: '18455751272964292607',
    });
    const warnings = logger.lines.map((l) => l.message);
    const [heldBack, ...refusals] = warnings.reverse(); // close() counts what the throttle held
    expect(heldBack).toMatch(
      /^warnings held back by the throttle since last shown: \d+ × "chain_tx/,
    );
    expect(refusals.every((m) => m.startsWith('chain_tx event dropped: '))).toBe(true);
    expect(
      logger.matching(
        '/lamports must be a non-negative integer: a decimal string, or a number up to 2^53 − 1',
      ).length,
    ).toBeGreaterThan(0);
  });

  it('costUsd: each amount counts as String(value), exactly; NaN, Infinity and negatives are refused with a warning, not counted', async () => {
    const { client, logger, transport } = setup();
    const session = client.startSession({ inputSummary: 'costs' });
    const llm = (costUsd: number) => session.llmCall(llmPayload({ costUsd }));
    for (let i = 0; i < 10; i++) llm(0.1);
    llm(0.2);
    for (const bad of [Number.NaN, Infinity, -Infinity, -0.1]) llm(bad);
    session.end();
    await client.close();
    expect(client.stats()).toMatchObject({ recordedEvents: 11, invalidEvents: 4 });
    expect(transport.requests.at(-1)?.items[0]?.trace).toMatchObject({
      totalCostUsd: '1.2', // 0.1 ten times, plus 0.2: no floating-point drift
      totalTokens: 11 * 180,
    });
    expect(
      logger.matching('llm_call event dropped: payload is not a valid llm_call payload: /costUsd')
        .length,
    ).toBeGreaterThan(0);
    expect(logger.lines.every((l) => l.message.includes('/costUsd'))).toBe(true);
  });

  // The outcome is asserted; the timeout only guards against a hang (de-duplicating with
  // includes() before the cap took seconds for this input, quadratic in the tag count).
  it(
    '100,000 tags: the first 256 distinct are kept (env tag first), with one warning, without stalling',
    { timeout: 5_000 },
    async () => {
      const { client, logger, transport } = setup({ environment: 'mainnet' });
      const tags = Array.from({ length: 100_000 }, (_, i) => `tag-${i}`);
      const session = client.startSession({ inputSummary: 'tagged', tags });
      session.end();
      await client.close();
      const trace = transport.requests[0]?.items[0]?.trace;
      expect(trace?.tags).toHaveLength(256);
      expect(trace?.tags.slice(0, 3)).toEqual(['env:mainnet', 'tag-0', 'tag-1']);
      expect(trace?.tags.at(-1)).toBe('tag-254');
      expect(logger.matching('at most 256 tags are kept')).toHaveLength(1);
      // duplicates (and the env tag given again) are kept once, in first-seen order
      const again = setup({ environment: 'devnet' });
      again.client
        .startSession({ inputSummary: 'dups', tags: ['b', 'a', 'env:devnet', 'b', 'a'] })
        .end();
      await again.client.close();
      expect(again.transport.requests[0]?.items[0]?.trace.tags).toEqual(['env:devnet', 'b', 'a']);
      expect(again.logger.lines).toEqual([]);
    },
  );

  it('charges a snapshot’s growth (new tool names, an output summary) to the buffer: the estimate matches what is sent', async () => {
    const bodies: number[] = [];
    const transport: Transport = {
      sendBatch(body: Buffer): Promise<TransportOutcome> {
        bodies.push(gunzipSync(body).byteLength);
        return Promise.resolve(OK);
      },
      complete: () => Promise.resolve(OK),
    };
    const { client } = setup(
      { flushIntervalMs: 60_000, maxBufferBytes: 1024 * 1024 },
      transport as ScriptedTransport,
    );
    const session = client.startSession({ inputSummary: 'many tools' });
    // distinct 250-character names, each also joining the snapshot's toolsCalled
    for (let i = 0; i < 300; i++)
      session.toolCall({ name: `${String(i).padStart(4, '0')}${'t'.repeat(246)}` });
    session.end({ outputSummary: 'o'.repeat(20_000) });
    const estimated = client.stats().bufferedBytes;
    await client.close();
    expect(bodies).toHaveLength(1);
    const sent = bodies[0] ?? 0;
    // The estimate may be generous, never short: the snapshot's 300 names and summary are in it.
    expect(estimated).toBeGreaterThanOrEqual(sent);
    expect(estimated).toBeLessThan(sent * 1.3);
  });

  it('keeps flushes near maxBufferBytes when many traces grow their snapshots', async () => {
    const bodies: number[] = [];
    const transport: Transport = {
      sendBatch(body: Buffer): Promise<TransportOutcome> {
        bodies.push(gunzipSync(body).byteLength);
        return Promise.resolve(OK);
      },
      complete: () => Promise.resolve(OK),
    };
    const maxBufferBytes = 16_384;
    const { client } = setup(
      { flushIntervalMs: 60_000, maxBufferBytes },
      transport as ScriptedTransport,
    );
    const sessions = Array.from({ length: 20 }, (_, i) =>
      client.startSession({ inputSummary: `trace ${i}` }),
    );
    for (let round = 0; round < 20; round++)
      for (const session of sessions)
        session.toolCall({ name: `${String(round).padStart(3, '0')}${'t'.repeat(197)}` });
    await client.close();
    expect(client.stats()).toMatchObject({ deliveredEvents: 400, droppedEvents: 0 });
    expect(bodies.length).toBeGreaterThan(5);
    for (const bytes of bodies) expect(bytes).toBeLessThanOrEqual(maxBufferBytes);
  });

  it('reads the payload when the event is recorded: changing the object afterwards changes nothing sent', async () => {
    const { client, logger, transport } = setup({ flushIntervalMs: 60_000 });
    const session = client.startSession({ inputSummary: 'mutating host' });
    // A host that reuses one object for every call, and changes it after handing it over.
    const payload = {
      provider: 'openai',
      model: 'gpt-4o-mini',
      input: { messages: [{ role: 'user', content: 'first prompt' }] },
      output: { content: 'first answer', finishReason: 'stop' },
      usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 },
      costUsd: 0.1,
      streamed: false,
    } as LlmCallPayload & { extra?: unknown };
    session.llmCall(payload);
    payload.model = 'changed-model';
    payload.input.messages[0]!.content = 'second prompt';
    payload.usage.totalTokens = 1_000;
    session.llmCall(payload);
    payload.extra = { values: [10n] }; // no longer serialisable: costs nothing already recorded
    payload.input.messages.push({ role: 'user', content: 'third' });
    const custom = { name: 'custom', data: { values: [1, 2] as unknown[] } };
    session.custom(custom);
    custom.data.values.push(3);
    custom.name = 'renamed';
    session.end();
    await client.close();
    const events = transport.requests.flatMap((b) => b.items.flatMap((i) => i.events));
    expect(events.map((e) => e.payload)).toEqual([
      {
        provider: 'openai',
        model: 'gpt-4o-mini',
        input: { messages: [{ role: 'user', content: 'first prompt' }] },
        output: { content: 'first answer', finishReason: 'stop' },
        usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 },
        costUsd: 0.1,
        streamed: false,
      },
      {
        provider: 'openai',
        model: 'changed-model',
        input: { messages: [{ role: 'user', content: 'second prompt' }] },
        output: { content: 'first answer', finishReason: 'stop' },
        usage: { inputTokens: 1, outputTokens: 1, totalTokens: 1_000 },
        costUsd: 0.1,
        streamed: false,
      },
      { name: 'custom', data: { values: [1, 2] } },
    ]);
    // the totals agree with what was sent
    expect(transport.requests.at(-1)?.items[0]?.trace).toMatchObject({
      eventCount: 3,
      totalTokens: 1_002,
      totalCostUsd: '0.2',
    });
    expect(logger.lines).toEqual([]);
    expect(client.stats()).toMatchObject({
      recordedEvents: 3,
      deliveredEvents: 3,
      droppedEvents: 0,
    });
  });

  it('a payload that cannot become JSON is refused when recorded (toJSON that throws or gives no object), never later', async () => {
    const { client, logger, transport } = setup({ flushIntervalMs: 60_000 });
    const session = client.startSession({ inputSummary: 'odd payloads' });
    session.custom({
      name: 'throws',
      data: {
        toJSON() {
          throw new Error('toJSON down');
        },
      },
    });
    session.custom({ name: 'not an object', toJSON: () => 'text' });
    session.custom({ name: 'fine' });
    session.end();
    expect(client.stats()).toMatchObject({ invalidEvents: 2, recordedEvents: 1 });
    expect(
      logger.matching('custom event dropped: payload cannot be serialised: toJSON down'),
    ).toHaveLength(1);
    expect(logger.matching('payload does not serialise to a JSON object')).toHaveLength(1);
    await client.close();
    const events = transport.requests.flatMap((b) => b.items.flatMap((i) => i.events));
    expect(events.map((e) => e.payload.name)).toEqual(['fine']);
    expect(client.stats()).toMatchObject({ deliveredEvents: 1, droppedEvents: 0 });
  });
});
