import type { TransportBatchPayload } from '@flightlog/protocol';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FlightlogClient } from '../../src/index.js';
import type { TransportOutcome } from '../../src/http-transport.js';
import { RecordingLogger } from '@flightlog/test-support';
import { OK, ScriptedTransport, until } from '../harness/scripted-transport.js';

function makeClient(transport: ScriptedTransport, extra: Record<string, unknown> = {}) {
  const logger = new RecordingLogger();
  const client = new FlightlogClient(
    {
      apiKey: 'k',
      logger,
      flushOnExit: false,
      flushIntervalMs: 60_000,
      retry: { initialDelayMs: 100, maxDelayMs: 1_000, maxAttempts: 3 },
      ...extra,
    },
    { transport, random: () => 1 },
  );
  return { client, logger };
}

/** The 409 the service answers when an item's trace id belongs to another agent. */
const traceIdConflict = (index: number): TransportOutcome => ({
  kind: 'failed',
  status: 409,
  detail: 'An id in this batch is already used by another trace.',
  fieldErrors: [{ pointer: `/items/${index}/trace/id`, detail: 'is already in use' }],
});

const itemOf = (batch: TransportBatchPayload | undefined, traceId: string) =>
  batch?.items.find((i) => i.trace.id === traceId);

describe('refusals naming items: only those are dropped, the rest is sent again (no I/O)', () => {
  it('409 on one trace id: that item is dropped with a warning naming it, the others go again in a new batch', async () => {
    const transport = new ScriptedTransport();
    transport.answer = (batch) => {
      const index = batch.items.findIndex((i) => i.trace.id === 'taken-id');
      return index >= 0 ? traceIdConflict(index) : OK;
    };
    const { client, logger } = makeClient(transport);
    const mine = client.startSession({ inputSummary: 'mine' });
    const taken = client.startSession({ inputSummary: 'clashes', traceId: 'taken-id' });
    mine.toolCall({ name: 'a' });
    taken.toolCall({ name: 'b' });
    taken.toolCall({ name: 'c' });
    await client.flush();

    expect(transport.requests).toHaveLength(2);
    const [refused, resent] = transport.requests;
    expect(refused?.items.map((i) => i.trace.id)).toEqual([mine.traceId, 'taken-id']);
    expect(resent?.items.map((i) => i.trace.id)).toEqual([mine.traceId]);
    expect(resent?.batchId).not.toBe(refused?.batchId); // nothing of the refused one was stored
    expect(itemOf(resent, mine.traceId)?.events.map((e) => e.payload.name)).toEqual(['a']);
    expect(logger.matching('the service refused trace taken-id with 409')).toHaveLength(1);
    expect(logger.lines[0]?.context).toMatchObject({
      status: 409,
      detail: 'An id in this batch is already used by another trace.',
      traceId: 'taken-id',
    });
    expect(client.stats()).toMatchObject({
      deliveredEvents: 1,
      droppedEvents: 2,
      failedBatches: 0,
      sentBatches: 1,
    });

    // Later flushes are not poisoned: the refused trace's items are dropped without being sent
    // (one warning), the other session's go through in one request each.
    taken.toolCall({ name: 'd' });
    mine.toolCall({ name: 'e' });
    await client.flush();
    taken.toolCall({ name: 'f' });
    mine.end();
    taken.end();
    await client.close();
    expect(transport.requests).toHaveLength(4);
    for (const batch of transport.requests.slice(2))
      expect(batch.items.map((i) => i.trace.id)).toEqual([mine.traceId]);
    expect(transport.requests.at(-1)?.items[0]?.trace.status).toBe('completed');
    expect(logger.matching('events of trace taken-id are dropped without being sent')).toHaveLength(
      1,
    );
    expect(client.stats()).toMatchObject({
      recordedEvents: 6,
      deliveredEvents: 2,
      droppedEvents: 4,
    });
  });

  it('a refusal naming every item leaves nothing to resend: the batch counts as failed', async () => {
    const transport = new ScriptedTransport();
    transport.answer = () => traceIdConflict(0);
    const { client, logger } = makeClient(transport);
    const session = client.startSession({ inputSummary: 'alone', traceId: 'taken-id' });
    session.toolCall({ name: 'a' });
    await client.close();
    expect(transport.requests).toHaveLength(1);
    expect(client.stats()).toMatchObject({ droppedEvents: 1, failedBatches: 1, sentBatches: 0 });
    expect(logger.matching('the service refused trace taken-id with 409')).toHaveLength(1);
  });

  it('400 naming events drops only those events; the rest of their item and batch is sent again', async () => {
    const transport = new ScriptedTransport();
    transport.answer = (_batch, n) =>
      n === 1
        ? {
            kind: 'failed',
            status: 400,
            detail: 'The request does not match the schema.',
            fieldErrors: [
              { pointer: '/items/1/events/0/payload', detail: 'must not nest deeper than 64' },
              { pointer: '/items/1/events/2/payload/x', detail: 'is not allowed' },
            ],
          }
        : OK;
    const { client, logger } = makeClient(transport);
    const a = client.startSession({ inputSummary: 'a' });
    const b = client.startSession({ inputSummary: 'b' });
    a.toolCall({ name: 'a0' });
    for (const name of ['b0', 'b1', 'b2', 'b3']) b.toolCall({ name });
    await client.close();
    expect(transport.requests).toHaveLength(2);
    const resent = transport.requests[1];
    expect(itemOf(resent, a.traceId)?.events.map((e) => e.payload.name)).toEqual(['a0']);
    expect(itemOf(resent, b.traceId)?.events.map((e) => e.payload.name)).toEqual(['b1', 'b3']);
    expect(
      logger.matching(`the service refused 2 event(s) of trace ${b.traceId} with 400`),
    ).toHaveLength(1);
    expect(client.stats()).toMatchObject({ deliveredEvents: 3, droppedEvents: 2 });
  });

  it('a refusal that does not name items (401, or a pointer outside /items/<i>) drops the whole batch', async () => {
    for (const outcome of [
      { kind: 'failed', status: 401, detail: 'The API key is not valid.' },
      {
        kind: 'failed',
        status: 400,
        detail: 'too many items',
        fieldErrors: [{ pointer: '/items', detail: 'must NOT have more than 1000 items' }],
      },
      {
        kind: 'failed',
        status: 400,
        detail: 'mixed',
        fieldErrors: [
          { pointer: '/items/0/trace/status', detail: 'x' },
          { pointer: '/batchId', detail: 'must be a ULID' },
        ],
      },
    ] as TransportOutcome[]) {
      const transport = new ScriptedTransport();
      transport.answer = () => outcome;
      const { client, logger } = makeClient(transport);
      const session = client.startSession({ inputSummary: 'x' });
      session.toolCall({ name: 'a' });
      session.toolCall({ name: 'b' });
      await client.close();
      expect(transport.requests).toHaveLength(1);
      expect(client.stats()).toMatchObject({ droppedEvents: 2, failedBatches: 1 });
      expect(
        logger.matching(`refused a batch with ${outcome.kind === 'failed' && outcome.status}`),
      ).toHaveLength(1);
    }
  });
});

describe('verifyToken stays pending until a batch carrying it is acknowledged (fake timers, no I/O)', () => {
  beforeEach(() => {
    vi.useFakeTimers({
      toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'],
    });
  });
  afterEach(() => vi.useRealTimers());

  const verifyClient = (transport: ScriptedTransport) =>
    makeClient(transport, { agentId: 'bot-1', verifyToken: 'flv_once' });
  const tokens = (transport: ScriptedTransport) =>
    transport.requests.map((b) => [b.agentId ?? null, b.verifyToken ?? null]);

  it('a batch refused with 401 does not use it up: the next batch carries it, and only until a 202', async () => {
    const transport = new ScriptedTransport();
    transport.answer = (_b, n) =>
      n === 1 ? { kind: 'failed', status: 401, detail: 'The API key is not valid.' } : OK;
    const { client } = verifyClient(transport);
    const session = client.startSession({ inputSummary: 'verify' });
    for (const name of ['a', 'b', 'c']) {
      session.toolCall({ name });
      await client.flush();
    }
    expect(tokens(transport)).toEqual([
      ['bot-1', 'flv_once'], // refused: nothing stored, token not consumed
      ['bot-1', 'flv_once'], // acknowledged: consumed
      [null, null],
    ]);
    await client.close();
  });

  it('a batch given up after its retries does not use it up either; every retry of it carries it', async () => {
    const transport = new ScriptedTransport();
    transport.answer = (_b, n) => (n <= 3 ? { kind: 'retryable', reason: 'HTTP 503' } : OK);
    const { client } = verifyClient(transport);
    const session = client.startSession({ inputSummary: 'verify' });
    session.toolCall({ name: 'a' });
    const first = client.flush();
    await until(() => transport.requests.length === 1);
    await vi.advanceTimersByTimeAsync(1_000); // both retry delays (100 ms, 200 ms)
    await until(() => client.stats().failedBatches === 1);
    await first;
    expect(client.stats()).toMatchObject({ failedBatches: 1, droppedEvents: 1 });
    session.toolCall({ name: 'b' });
    await client.flush();
    session.toolCall({ name: 'c' });
    await client.flush();
    expect(tokens(transport)).toEqual([
      ['bot-1', 'flv_once'],
      ['bot-1', 'flv_once'],
      ['bot-1', 'flv_once'], // three attempts of the first batch, given up
      ['bot-1', 'flv_once'], // the next batch still carries it, and is acknowledged
      [null, null],
    ]);
    await client.close();
  });
});
