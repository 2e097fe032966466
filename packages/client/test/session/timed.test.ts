import { describe, expect, it, vi } from 'vitest';
import { FlightlogClient, startTimer } from '../../src/index.js';
import { RecordingLogger } from '@flightlog/test-support';
import { ScriptedTransport } from '../harness/scripted-transport.js';

function setup() {
  const transport = new ScriptedTransport();
  const logger = new RecordingLogger();
  const client = new FlightlogClient({ apiKey: 'k', logger, flushOnExit: false }, { transport });
  const session = client.startSession({ inputSummary: 'timed' });
  const events = async () => {
    await client.close();
    return transport.requests.flatMap((b) => b.items.flatMap((i) => i.events));
  };
  return { session, logger, events };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('timing helper: session.timed and startTimer', () => {
  it('returns exactly what a sync function returned, and records start, end, duration, ok', async () => {
    const { session, events } = setup();
    const value = { route: 'orca' };
    const result = session.timed(
      'tool_call',
      () => value,
      (o) => ({
        name: 'quote',
        output: o.ok ? o.value : null,
      }),
    );
    expect(result).toBe(value);
    const [event] = await events();
    expect(event).toMatchObject({ type: 'tool_call', status: 'ok', errorMessage: null });
    expect(event?.payload).toEqual({ name: 'quote', output: { route: 'orca' } });
    expect(Date.parse(event!.endedAt!)).toBeGreaterThanOrEqual(Date.parse(event!.startedAt));
  });

  it('rethrows the very error a sync function threw, and records it as an error event', async () => {
    const { session, events } = setup();
    const boom = new RangeError('slippage exceeded');
    let caught: unknown;
    const failing = (): number => {
      throw boom;
    };
    try {
      session.timed('tool_call', failing, () => ({ name: 'swap' }));
    } catch (error) {
      caught = error;
    }
    expect(caught).toBe(boom);
    const [event] = await events();
    expect(event).toMatchObject({ status: 'error', errorMessage: 'slippage exceeded' });
  });

  it('settles like an async function did: same value, same rejection reason, with the duration', async () => {
    const { session, events } = setup();
    const value = await session.timed(
      'llm_call',
      async () => {
        await sleep(30);
        return 'answer';
      },
      (o) => ({
        provider: 'p',
        model: 'm',
        input: { messages: [] },
        output: { content: o.ok ? o.value : '', finishReason: 'stop' },
        usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 },
        costUsd: 0,
        streamed: false,
      }),
    );
    expect(value).toBe('answer');
    const reason = new Error('rpc timeout');
    const rejected = session.timed(
      'chain_tx',
      async () => {
        await sleep(5);
        throw reason;
      },
      () => ({ signature: null, lamports: '0' }),
    );
    await expect(rejected).rejects.toBe(reason);
    const [llm, tx] = await events();
    expect(llm?.durationMs).toBeGreaterThanOrEqual(25);
    expect(llm?.payload.output).toEqual({ content: 'answer', finishReason: 'stop' });
    expect(tx).toMatchObject({ status: 'error', errorMessage: 'rpc timeout' });
  });

  it('reserves the event id and sequence at the start, so events inside nest under it', async () => {
    const { session, events } = setup();
    await session.timed(
      'mcp_call',
      async (span) => {
        session.toolCall({ name: 'inner' }, { parentEventId: span.eventId });
        await sleep(1);
      },
      () => ({ server: 's', method: 'tools/call' }),
    );
    const recorded = await events();
    const outer = recorded.find((e) => e.type === 'mcp_call');
    const inner = recorded.find((e) => e.type === 'tool_call');
    expect(inner?.parentEventId).toBe(outer?.id);
    expect(outer?.sequence).toBe(0);
    expect(inner?.sequence).toBe(1);
  });

  it('a describe() that throws costs the event (with a warning), never the host', async () => {
    const { session, logger, events } = setup();
    const result = session.timed(
      'tool_call',
      () => 7,
      () => {
        throw new Error('bad describe');
      },
    );
    expect(result).toBe(7);
    expect(await events()).toEqual([]);
    expect(logger.matching('describe() threw: bad describe')).toHaveLength(1);
  });

  it('returns the very object run returned: a sync value, a native promise that resolves, one that rejects', async () => {
    const { session, events } = setup();
    const value = { route: 'orca' };
    expect(
      session.timed(
        'tool_call',
        () => value,
        () => ({ name: 'sync' }),
      ),
    ).toBe(value);

    const resolving = (async () => {
      await sleep(10);
      return 'done';
    })();
    const returned = session.timed(
      'tool_call',
      () => resolving,
      () => ({ name: 'resolves' }),
    );
    expect(returned).toBe(resolving); // same object, not a copy
    expect(await returned).toBe('done');

    const reason = new TypeError('quote endpoint down');
    const rejecting = (async () => {
      await sleep(10);
      throw reason;
    })();
    const failed = session.timed(
      'tool_call',
      () => rejecting,
      () => ({ name: 'rejects' }),
    );
    expect(failed).toBe(rejecting);
    await expect(failed).rejects.toBe(reason); // the caller's rejection, unchanged

    const recorded = await events();
    expect(recorded.map((e) => [e.payload.name, e.status, e.errorMessage])).toEqual([
      ['sync', 'ok', null],
      ['resolves', 'ok', null],
      ['rejects', 'error', 'quote endpoint down'],
    ]);
    expect(recorded[1]?.durationMs).toBeGreaterThanOrEqual(5); // observed until it settled
  });

  it('never calls then on a thenable that is not a native promise (lazy query builders): returned as is, recorded when run returns', async () => {
    const { session, events } = setup();
    const then = vi.fn();
    const query = { then, where: () => query }; // like a Knex or Prisma query: runs when awaited
    const returned = session.timed(
      'tool_call',
      () => query,
      (o) => ({
        name: 'db.query',
        output: o.ok ? 'deferred' : 'failed',
      }),
    );
    expect(returned).toBe(query);
    expect(returned.where).toBe(query.where); // its own methods, not a Promise's
    class LazyPromise<T> extends Promise<T> {} // a subclass may be lazy too: left alone
    const lazy = new LazyPromise<number>(() => undefined);
    const lazyThen = vi.spyOn(lazy, 'then');
    expect(
      session.timed(
        'tool_call',
        () => lazy,
        () => ({ name: 'subclass' }),
      ),
    ).toBe(lazy);
    expect(then).not.toHaveBeenCalled();
    expect(lazyThen).not.toHaveBeenCalled();
    expect((await events()).map((e) => [e.payload.name, e.status, e.payload.output])).toEqual([
      ['db.query', 'ok', 'deferred'],
      ['subclass', 'ok', undefined],
    ]);
  });

  it('a disabled client’s timed returns the very same objects, and throws the very same errors', async () => {
    const client = new FlightlogClient({ apiKey: 'k', enabled: false });
    const session = client.startSession({ inputSummary: 'off' });
    const value = {};
    const promise = Promise.resolve(1);
    const then = vi.fn();
    const thenable = { then };
    const boom = new Error('boom');
    expect(
      session.timed(
        'custom',
        () => value,
        () => ({ name: 'x' }),
      ),
    ).toBe(value);
    expect(
      session.timed(
        'custom',
        () => promise,
        () => ({ name: 'x' }),
      ),
    ).toBe(promise);
    expect(
      session.timed(
        'custom',
        () => thenable,
        () => ({ name: 'x' }),
      ),
    ).toBe(thenable);
    expect(() =>
      session.timed(
        'custom',
        () => {
          throw boom;
        },
        () => ({ name: 'x' }),
      ),
    ).toThrow(boom);
    expect(then).not.toHaveBeenCalled();
    await client.close();
  });

  it('startTimer gives the fields of a step timed by hand', async () => {
    const { session, events } = setup();
    const timer = startTimer();
    await sleep(20);
    session.toolCall({ name: 'by hand' }, timer.stop());
    const [event] = await events();
    expect(event?.durationMs).toBeGreaterThanOrEqual(15);
    expect(event?.startedAt).toBe(timer.startedAt.toISOString());
  });
});
