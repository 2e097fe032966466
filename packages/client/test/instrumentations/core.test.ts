import { describe, expect, it } from 'vitest';
import { MODEL_PRICES, costOf, findModelPrice } from '../../src/index.js';
import { proxyTree } from '../../src/instrumentations/method-proxy.js';
import { beginStep } from '../../src/instrumentations/observed-step.js';
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
    const outer = beginStep(wrapper, 'tool_call');
    const inner = outer?.run(() => beginStep(wrapper, 'custom'));
    inner?.fail(() => ({ name: 'inner' }), new Error('no route'));
    outer?.ok(() => ({ name: 'outer' }));
    await new Promise((r) => setImmediate(r)); // recorded one microtask after the end, there
    const events = await recorded.events();
    const [innerEvent, outerEvent] = events;
    expect(outerEvent).toMatchObject({ type: 'tool_call', status: 'ok' });
    expect(innerEvent).toMatchObject({
      type: 'custom',
      status: 'error',
      errorMessage: 'no route',
      parentEventId: outerEvent?.id,
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
