import { describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { decryptPayload } from '@flightlog/protocol';
import { MODEL_PRICES, costOf, findModelPrice } from '../../src/index.js';
import { proxyTree } from '../../src/instrumentations/method-proxy.js';
import { beginStep } from '../../src/instrumentations/observed-step.js';
import { observeStream, type StreamEnd } from '../../src/instrumentations/stainless-results.js';
import { recordedSession } from '../harness/recorded-session.js';

describe('the price table', () => {
  it('finds a model by its id, its longest dated prefix, or past a provider prefix', () => {
    expect(findModelPrice('gpt-4o')).toBe(MODEL_PRICES['gpt-4o']);
    expect(findModelPrice('gpt-4o-mini-2024-07-18')).toBe(MODEL_PRICES['gpt-4o-mini']);
    expect(findModelPrice('claude-sonnet-4-5-20250929')).toBe(MODEL_PRICES['claude-sonnet-4-5']);
    expect(findModelPrice('openai/gpt-4.1')).toBe(MODEL_PRICES['gpt-4.1']);
    expect(findModelPrice('gpt-4ox')).toBeUndefined();
    expect(findModelPrice('constructor')).toBeUndefined();
    const mine = { input: 1, output: 1 };
    expect(findModelPrice('gpt-4o-2024-08-06', { 'gpt-4o': mine })).toBe(mine);
  });

  it('computes costs exactly, in integer picodollars', () => {
    expect(costOf({ input: 2.5, output: 10 }, { input: 12, output: 0 })).toBe(0.00003);
    expect(costOf({ input: 0.15, output: 0.6 }, { input: 7, output: 3 })).toBe(0.00000285);
    expect(
      costOf(
        { input: 3, output: 15, cachedInput: 0.3, cacheWrite: 3.75 },
        { input: 100, output: 10, cachedInput: 1000, cacheWrite: 200 },
      ),
    ).toBe(0.0015);
    // 0.1 + 0.2 in floats is not 0.3; in picodollars it is
    expect(costOf({ input: 0.1, output: 0.2 }, { input: 1_000_000, output: 1_000_000 })).toBe(0.3);
  });
});

describe('the step core', () => {
  it('nests a timed step under the step it runs in, across awaits, and only in its own trace', async () => {
    const recorded = recordedSession();
    const other = recorded.client.startSession({ inputSummary: 'other run' });
    const { session } = recorded;
    await session.timed(
      'tool_call',
      async () => {
        await new Promise((r) => setTimeout(r, 1));
        await session.timed(
          'custom',
          async () => undefined,
          () => ({ name: 'inner' }),
        );
        other.timed(
          'custom',
          () => 1,
          () => ({ name: 'elsewhere' }),
        );
      },
      () => ({ name: 'outer' }),
    );
    session.timed(
      'custom',
      () => 2,
      () => ({ name: 'after' }),
    );
    const events = await recorded.events();
    const byName = (name: string) =>
      events.find((e) => (e.payload as { name: string }).name === name);
    expect(byName('inner')?.parentEventId).toBe(byName('outer')?.id);
    expect(byName('elsewhere')?.parentEventId).toBeNull();
    expect(byName('after')?.parentEventId).toBeNull();
    expect(byName('outer')?.parentEventId).toBeNull();
  });

  it('ends a step once, and a builder that throws costs the event only', async () => {
    const recorded = recordedSession();
    const step = beginStep(recorded.session, 'custom');
    step?.ok(() => ({ name: 'first' }));
    step?.fail(() => ({ name: 'second' }), new Error('late'));
    const broken = beginStep(recorded.session, 'custom');
    broken?.ok(() => {
      throw new Error('builder bug');
    });
    const events = await recorded.events();
    expect(events.map((e) => (e.payload as { name: string }).name)).toEqual(['first']);
    expect(recorded.logger.matching('builder bug')).toHaveLength(1);
  });

  it('records through the public timed on a session of another make (a wrapper of the host)', async () => {
    const recorded = recordedSession();
    const { session } = recorded;
    const wrapper = {
      traceId: session.traceId,
      timed: session.timed.bind(session),
    } as unknown as typeof session;
    let inner: ReturnType<typeof beginStep<'custom'>>;
    await session.timed(
      'tool_call',
      async () => {
        await Promise.resolve();
        inner = beginStep(wrapper, 'custom');
      },
      () => ({ name: 'outer' }),
    );
    inner?.fail(() => ({ name: 'inner' }), new Error('no route'));
    await new Promise((r) => setImmediate(r)); // recorded one microtask after the end, there
    const events = await recorded.events();
    const outerEvent = events.find((e) => e.type === 'tool_call');
    const innerEvent = events.find((e) => e.type === 'custom');
    expect(innerEvent).toMatchObject({
      status: 'error',
      errorMessage: 'no route',
      parentEventId: outerEvent?.id,
    });
  });
});

describe('payload encryption', () => {
  it('applies to what the instrumentations record, as to every event', async () => {
    const key = randomBytes(32).toString('base64');
    const recorded = recordedSession({}, { SERVICE_MASTER_KEY: key });
    beginStep(recorded.session, 'mcp_call')?.ok(() => ({
      server: 's',
      method: 'tools/call',
      input: { secret: 'prompt' },
    }));
    const [event] = await recorded.events();
    expect(event?.payloadEncrypted).toBe(true);
    expect(JSON.stringify(event?.payload)).not.toContain('prompt');
    expect(decryptPayload(event?.payload, key)).toEqual({
      kind: 'ok',
      payload: { server: 's', method: 'tools/call', input: { secret: 'prompt' } },
    });
  });
});

describe('the proxy of an SDK object', () => {
  class Sdk {
    #secret = 41;
    static label = 'sdk';
    readonly resource = { calls: 0, run: (x: number) => x + 1 };
    answer(this: Sdk) {
      return this.#secret + 1;
    }
    get viaGetter() {
      return this.#secret;
    }
  }

  it('keeps prototype, private-field methods and getters, frozen properties and constructors', () => {
    const sdk = new Sdk();
    Object.defineProperty(sdk, 'frozen', {
      value: () => 'f',
      writable: false,
      configurable: false,
    });
    const seen: unknown[] = [];
    const proxy = proxyTree(sdk, {
      children: {
        resource: {
          methods: {
            run: (original, thisArg, args) => {
              seen.push(args);
              return Reflect.apply(original, thisArg, args);
            },
          },
        },
      },
    });
    expect(proxy).toBeInstanceOf(Sdk);
    expect(proxy.answer()).toBe(42);
    expect(proxy.viaGetter).toBe(41);
    expect(proxy.constructor).toBe(Sdk);
    expect((proxy as unknown as { frozen: () => string }).frozen()).toBe('f');
    expect(proxy.resource.run(1)).toBe(2);
    expect(proxy.resource).toBe(proxy.resource);
    expect(proxy.answer).toBe(proxy.answer);
    expect(seen).toEqual([[1]]);
    expect(sdk.resource.run(5)).toBe(6);
    expect(seen).toHaveLength(1);
  });
});

describe('a watched SDK stream', () => {
  /** A stand-in of the SDK's Stream: an own `iterator` method that `for await` reads through. */
  function sdkStream(next: () => unknown) {
    const stream = {
      iterator: (): AsyncIterator<unknown> => ({
        next: next as () => Promise<IteratorResult<unknown>>,
      }),
      [Symbol.asyncIterator]() {
        return stream.iterator();
      },
    };
    return stream;
  }
  function itemsOf(items: unknown[]) {
    let at = 0;
    return () =>
      Promise.resolve(at < items.length ? { done: false, value: items[at++] } : { done: true });
  }
  /** What `run` resolved to, and the rejections left unhandled meanwhile. */
  async function unhandledDuring<T>(run: () => Promise<T>): Promise<[T, unknown[]]> {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const result = await run();
      await new Promise((resolve) => setTimeout(resolve, 10));
      return [result, unhandled];
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  }
  async function withoutUnhandled<T>(run: () => Promise<T>): Promise<T> {
    const [result, unhandled] = await unhandledDuring(run);
    expect(unhandled).toEqual([]);
    return result;
  }
  /** Watches `stream`: the items seen and the ends reported. */
  function watch(stream: object) {
    const seen: unknown[] = [];
    const ends: StreamEnd[] = [];
    const watched = observeStream(
      stream,
      (item) => seen.push(item),
      (end) => ends.push(end),
      () => false,
    );
    return { seen, ends, watched };
  }

  it('hands every item to the caller unchanged, sees each once, and ends once', async () => {
    const items = [{ a: 1 }, 'two', 3];
    const stream = sdkStream(itemsOf(items));
    const { seen, ends, watched } = watch(stream);
    expect(watched).toBe(true);
    const read: unknown[] = [];
    for await (const item of stream) read.push(item);
    expect(read).toEqual(items);
    expect(read[0]).toBe(items[0]);
    expect(seen).toEqual(items);
    expect(ends).toEqual([{ kind: 'done' }]);
  });

  it('passes a failed read to the caller as it is, reported once and never unhandled', async () => {
    const failure = new Error('socket hang up');
    let calls = 0;
    const stream = sdkStream(() =>
      ++calls === 1 ? Promise.resolve({ done: false, value: 'first' }) : Promise.reject(failure),
    );
    const { ends } = watch(stream);
    const caught = await withoutUnhandled(async () => {
      try {
        for await (const item of stream) void item;
        return undefined;
      } catch (error) {
        return error;
      }
    });
    expect(caught).toBe(failure);
    expect(ends).toEqual([{ kind: 'error', error: failure }]);
  });

  it('leaves a failed read the host never handles unhandled, as without the wrapper', async () => {
    const failure = new Error('stream reset');
    const stream = sdkStream(() => Promise.reject(failure));
    const { ends } = watch(stream);
    // a host reading by hand that forgets to handle the failure
    const [, unhandled] = await unhandledDuring(async () => {
      void stream[Symbol.asyncIterator]().next();
    });
    expect(unhandled).toEqual([failure]);
    expect(ends).toEqual([{ kind: 'error', error: failure }]);
  });

  it('survives an item reader that throws and a malformed iterator result, changing nothing for the caller', async () => {
    const stream = sdkStream(itemsOf(['a', 'b']));
    observeStream(
      stream,
      () => {
        throw new Error('instrumentation bug');
      },
      () => {},
      () => false,
    );
    const read = await withoutUnhandled(async () => {
      const out: unknown[] = [];
      for await (const item of stream) out.push(item);
      return out;
    });
    expect(read).toEqual(['a', 'b']);

    // An iterator that resolves to null: the caller's `for await` fails exactly as unwrapped.
    const odd = sdkStream(() => Promise.resolve(null));
    watch(odd);
    const unwrapped = sdkStream(() => Promise.resolve(null));
    const failureOf = async (s: AsyncIterable<unknown>) => {
      try {
        for await (const item of s) void item;
        return undefined;
      } catch (error) {
        return error;
      }
    };
    const watched = await withoutUnhandled(() => failureOf(odd));
    const plain = await failureOf(unwrapped);
    expect(watched).toBeInstanceOf(TypeError);
    expect(String(watched)).toBe(String(plain));
  });

  it('reads through a next() that returns a thenable rather than a native promise', async () => {
    let at = 0;
    const stream = sdkStream(() => ({
      then(resolve: (value: IteratorResult<unknown>) => void) {
        resolve(at < 2 ? { done: false, value: at++ } : { done: true, value: undefined });
      },
    }));
    const { seen, ends } = watch(stream);
    const read: unknown[] = [];
    for await (const item of stream) read.push(item);
    expect(read).toEqual([0, 1]);
    expect(seen).toEqual([0, 1]);
    expect(ends).toEqual([{ kind: 'done' }]);
  });
});
