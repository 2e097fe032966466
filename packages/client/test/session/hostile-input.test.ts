import { describe, expect, it } from 'vitest';
import {
  FlightlogClient,
  type EventFields,
  type SessionOptions,
  type ToolCallPayload,
} from '../../src/index.js';
import { RecordingLogger } from '@flightlog/test-support';
import { ScriptedTransport } from '../harness/scripted-transport.js';

const ULID = /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/;

function setup(extra: Record<string, unknown> = {}) {
  const transport = new ScriptedTransport();
  const logger = new RecordingLogger();
  const client = new FlightlogClient(
    { apiKey: 'k', logger, flushOnExit: false, ...extra },
    { transport },
  );
  const sent = async () => {
    await client.close();
    return {
      traces: transport.requests.flatMap((b) => b.items.map((i) => i.trace)),
      events: transport.requests.flatMap((b) => b.items.flatMap((i) => i.events)),
    };
  };
  return { client, logger, transport, sent };
}

/** An object whose `key` getter throws when read. */
function throwingGetter<T extends object>(base: T, key: string): T {
  return Object.defineProperty({ ...base }, key, {
    enumerable: true,
    get() {
      throw new Error(`no ${key} for you`);
    },
  });
}

describe('getters that throw never reach the host: every public entry point reads caller objects safely', () => {
  it('startSession({ get traceId() { throw } }) on an enabled client: a warning, a ULID, a working session', async () => {
    const { client, logger, sent } = setup();
    const options = throwingGetter({ inputSummary: 'odd options' }, 'traceId') as SessionOptions;
    const session = client.startSession(options);
    expect(session.traceId).toMatch(ULID);
    expect(session.toolCall({ name: 'still recorded' })).toMatch(ULID);
    session.end();
    expect(
      logger.matching('startSession: reading traceId threw (no traceId for you)'),
    ).toHaveLength(1);
    const { traces, events } = await sent();
    expect(traces.at(-1)).toMatchObject({ id: session.traceId, status: 'completed' });
    expect(events).toHaveLength(1);
  });

  it('startSession with throwing getters on a disabled client returns a no-op session, never throws', () => {
    for (const settings of [{ apiKey: 'k', enabled: false }, { apiKey: '' }]) {
      const client = new FlightlogClient({ ...settings, logger: new RecordingLogger() });
      const session = client.startSession(
        throwingGetter({ inputSummary: 'x' }, 'traceId') as SessionOptions,
      );
      expect(session.traceId).toMatch(ULID);
      expect(session.llmCall({} as never)).toBe('');
    }
  });

  it('every other option getter that throws costs that option only', async () => {
    const { client, logger, sent } = setup({ environment: 'devnet' });
    const options = {
      get inputSummary(): string {
        throw new Error('summary');
      },
      get tags(): string[] {
        throw new Error('tags');
      },
      get startedAt(): Date {
        throw new Error('start');
      },
      get agentId(): string {
        throw new Error('agent');
      },
    } as SessionOptions;
    const session = client.startSession(options);
    session.end();
    const { traces } = await sent();
    expect(traces.at(-1)).toMatchObject({
      id: session.traceId,
      inputSummary: '(no inputSummary)',
      tags: ['env:devnet'],
      agentId: 'unknown',
      status: 'completed',
    });
    for (const key of ['inputSummary', 'tags', 'startedAt', 'agentId'])
      expect(logger.matching(`reading ${key} threw`), key).toHaveLength(1);
  });

  it('a payload or fields with a throwing getter refuse that event (invalidEvents), the trace stays intact', async () => {
    const { client, logger, sent } = setup();
    const session = client.startSession({ inputSummary: 'payloads' });
    const badPayload = throwingGetter({ name: 'x' }, 'name');
    expect(() => session.toolCall(badPayload)).not.toThrow();
    const badFields = throwingGetter({}, 'durationMs');
    session.toolCall({ name: 'fields' }, badFields);
    // A getter that answers well for the checks, then badly when the totals read it: the totals
    // are not poisoned. How often a well-behaved payload is read is counted first.
    const llm = (usage: () => object) => ({
      provider: 'p',
      model: 'm',
      input: { messages: [] },
      output: { content: '', finishReason: 'stop' },
      get usage() {
        return usage();
      },
      costUsd: 0,
      streamed: false,
    });
    let reads = 0;
    const counting = client.startSession({ inputSummary: 'counting' });
    counting.llmCall(
      llm(() => (reads++, { inputTokens: 1, outputTokens: 1, totalTokens: 2 })) as never,
    );
    let read = 0;
    session.llmCall(
      llm(() =>
        ++read < reads
          ? { inputTokens: 1, outputTokens: 1, totalTokens: 2 }
          : { totalTokens: 'two' },
      ) as never,
    );
    session.toolCall({ name: 'good' });
    session.end();
    expect(client.stats()).toMatchObject({ invalidEvents: 3, recordedEvents: 2 });
    expect(
      logger.matching('reading the payload or its fields threw: no name for you'),
    ).toHaveLength(1);
    expect(
      logger.matching('reading the payload or its fields threw: no durationMs for you'),
    ).toHaveLength(1);
    expect(logger.matching('payload changed while it was read (usage or costUsd)')).toHaveLength(1);
    const { traces, events } = await sent();
    expect(events.filter((e) => e.traceId === session.traceId).map((e) => e.payload.name)).toEqual([
      'good',
    ]);
    expect(traces.filter((t) => t.id === session.traceId).at(-1)).toMatchObject({
      eventCount: 1,
      totalTokens: 0,
      toolsCalled: ['good'],
    });
  });

  it('Proxies that throw (get, ownKeys, a revoked one) as payload or fields: the event is refused with a warning, never a throw', async () => {
    const { client, logger, sent } = setup();
    const session = client.startSession({ inputSummary: 'proxies' });
    const throwingGet = new Proxy(
      { name: 'x' },
      {
        get() {
          throw new Error('get trap');
        },
      },
    );
    // Answers reads (so the schema check passes) but cannot be enumerated (as JSON needs).
    const throwingKeys = new Proxy(
      { name: 'keys' },
      {
        ownKeys() {
          throw new Error('ownKeys trap');
        },
      },
    );
    const { proxy: revoked, revoke } = Proxy.revocable({ name: 'revoked' }, {});
    revoke();
    for (const payload of [throwingGet, throwingKeys, revoked])
      expect(() => session.toolCall(payload as ToolCallPayload)).not.toThrow();
    expect(() => session.toolCall({ name: 'fields' }, throwingGet as EventFields)).not.toThrow();
    let result: unknown;
    expect(() => {
      result = session.timed(
        'tool_call',
        () => 'ran',
        () => throwingKeys as ToolCallPayload,
      );
    }).not.toThrow();
    expect(result).toBe('ran');
    session.toolCall({ name: 'good' });
    session.end();
    expect(client.stats()).toMatchObject({ invalidEvents: 5, recordedEvents: 1 });
    expect(logger.lines.length).toBeGreaterThan(0);
    expect(logger.lines.every((l) => l.message.startsWith('tool_call event dropped: '))).toBe(true);
    expect(logger.matching('get trap').length).toBeGreaterThan(0);
    expect(logger.matching('ownKeys trap').length).toBeGreaterThan(0);
    const { traces, events } = await sent();
    expect(events.map((e) => e.payload.name)).toEqual(['good']);
    expect(traces.at(-1)).toMatchObject({ eventCount: 1, toolsCalled: ['good'] });
  });

  it('end() and fail() with throwing option getters still end the session', async () => {
    const { client, logger, sent } = setup();
    const a = client.startSession({ inputSummary: 'a' });
    const b = client.startSession({ inputSummary: 'b' });
    a.end(throwingGetter({ outputSummary: 'x' }, 'outputSummary'));
    b.fail(new Error('boom'), throwingGetter({}, 'endedAt'));
    expect([a.status, b.status]).toEqual(['completed', 'errored']);
    expect(logger.matching('end: reading outputSummary threw')).toHaveLength(1);
    expect(logger.matching('end: reading endedAt threw')).toHaveLength(1);
    const { traces } = await sent();
    expect(traces.filter((t) => t.status !== 'running').map((t) => t.status)).toEqual([
      'completed',
      'errored',
    ]);
  });

  it('timed() with a throwing fields getter records the event without a parent', async () => {
    const { client, sent } = setup();
    const session = client.startSession({ inputSummary: 't' });
    expect(
      session.timed(
        'custom',
        () => 5,
        () => ({ name: 'step' }),
        throwingGetter({}, 'parentEventId'),
      ),
    ).toBe(5);
    const { events } = await sent();
    expect(events).toMatchObject([{ payload: { name: 'step' }, parentEventId: null }]);
  });

  it('flush(), close() and completeTrace() with throwing getters still do their work', async () => {
    const { client, transport, logger } = setup();
    client.startSession({ inputSummary: 'x' }).toolCall({ name: 'a' });
    const odd = throwingGetter({}, 'timeoutMs');
    expect(await client.flush(odd)).toEqual({ timedOut: false });
    expect(transport.requests).toHaveLength(1);
    const outcome = await client.completeTrace('some-trace', throwingGetter({}, 'status'));
    expect(outcome).toMatchObject({ kind: 'failed', status: null });
    expect(transport.completes).toEqual([]);
    client.startSession({ inputSummary: 'y' }).toolCall({ name: 'b' });
    expect(await client.close(odd)).toEqual({ timedOut: false });
    expect(transport.requests).toHaveLength(2);
    expect(logger.matching('timeoutMs must be a non-negative number')).toHaveLength(2);
    // Later calls are no-ops, the client is closed.
    expect(client.startSession({ inputSummary: 'z' }).toolCall({ name: 'c' })).toBe('');
  });

  it('new FlightlogClient with a throwing settings getter disables the client with a warning, never throws', () => {
    const logger = new RecordingLogger();
    const settings = throwingGetter({ apiKey: 'k', logger }, 'flushIntervalMs');
    const client = new FlightlogClient(settings as never);
    expect(client.enabled).toBe(false);
    expect(client.stats().recordedEvents).toBe(0);
  });
});

describe('fail(error) accepts anything thrown: the session ends as errored with a sensible message', () => {
  it.each([
    ['an Error', new RangeError('slippage exceeded'), 'slippage exceeded'],
    ['an Error without message', new TypeError(), 'TypeError'],
    ['a string', 'rpc down', 'rpc down'],
    [
      'an Error whose message is a number',
      Object.assign(new Error(), { message: 42 }),
      'Error: 42',
    ],
    ['an object with a non-string message', { message: { code: 7 } }, '{"code":7}'],
    ['an object with a string message', { message: 'plain object' }, 'plain object'],
    ['a plain object', { code: 'E_RPC', retry: false }, '{"code":"E_RPC","retry":false}'],
    ['null', null, 'unknown error (null)'],
    ['undefined', undefined, 'unknown error (undefined)'],
    ['a number', 404, '404'],
    ['a symbol', Symbol('sym'), 'Symbol(sym)'],
    [
      'a cyclic object',
      (() => {
        const o: Record<string, unknown> = {};
        o.self = o;
        return o;
      })(),
      '[object Object]',
    ],
    [
      'an Error whose message getter throws',
      Object.defineProperty(new Error('x'), 'message', {
        get() {
          throw new Error('nope');
        },
      }),
      'unprintable error',
    ],
  ])('%s', async (_label, thrown, message) => {
    const { client, sent } = setup();
    const session = client.startSession({ inputSummary: 'fails' });
    session.fail(thrown);
    expect(session.status).toBe('errored');
    // timed's error path rethrows the very value
    let caught: unknown = 'nothing';
    try {
      // `() => never` matches the Promise overload; nothing is returned, it throws
      void session.timed(
        'custom',
        () => {
          throw thrown;
        },
        () => ({ name: 'x' }),
      );
    } catch (error) {
      caught = error;
    }
    expect(caught).toBe(thrown);
    const { traces } = await sent();
    expect(traces.at(-1)).toMatchObject({ status: 'errored', errorMessage: message });
  });

  it('timed records an error event with the same message for any thrown value', async () => {
    const { client, sent } = setup();
    const session = client.startSession({ inputSummary: 't' });
    const values: unknown[] = [Object.assign(new Error(), { message: 42 }), null, { message: 5 }];
    for (const value of values) {
      const rejected = session.timed(
        'custom',
        () => Promise.reject(value as Error),
        () => ({ name: 'step' }),
      );
      await rejected.catch(() => undefined);
    }
    const { events } = await sent();
    expect(events.map((e) => [e.status, e.errorMessage])).toEqual([
      ['error', 'Error: 42'],
      ['error', 'unknown error (null)'],
      ['error', '5'],
    ]);
  });
});
