import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  HOLDS_BIGINT,
  NOT_AN_OBJECT,
  TOO_DEEP,
  TOO_LARGE,
  snapshotPayload,
  type PayloadSnapshot,
} from '../../src/payload-size.js';

const LIMIT = 1024 * 1024;

/** The copy's JSON, which must be the host payload's JSON at the moment it was read. */
function copiedJson(payload: object): string {
  const snapshot = snapshotPayload(payload, LIMIT);
  if (typeof snapshot === 'number') throw new Error(`refused: ${snapshot}`);
  return JSON.stringify(snapshot.value);
}

describe('the payload copy taken when an event is recorded serialises exactly as the payload did', () => {
  it('for any JSON-like value (property-based)', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.anything({ withBoxedValues: true })), (payload) => {
        expect(copiedJson(payload)).toBe(JSON.stringify(payload));
      }),
      { numRuns: 2_000 },
    );
  });

  it('for what JSON treats specially: toJSON (with its key), boxed values, non-finite numbers, holes, __proto__ keys, class instances', () => {
    class Point {
      constructor(
        public x: number,
        public y: number,
      ) {}
      get hidden() {
        return 'not own';
      }
    }
    const withKey = { toJSON: (key: string) => `key=${key}` };
    const fn = Object.assign(() => 1, { toJSON: () => 'function with toJSON' });
    const payload = {
      date: new Date(Date.UTC(2026, 0, 2, 3, 4, 5)),
      invalidDate: new Date(Number.NaN),
      keyed: withKey,
      inArray: [withKey, withKey],
      boxed: [Object(1), Object('s'), Object(true)],
      numbers: [Number.NaN, Infinity, -Infinity, -0, 1e21, 5e-324],
      holes: [1, , undefined, () => 2, Symbol('s')], // eslint-disable-line no-sparse-arrays
      skipped: { u: undefined, f: () => 1, s: Symbol('x') },
      fn,
      ['__proto__']: { polluted: true },
      point: new Point(1, 2),
      map: new Map([['a', 1]]),
      set: new Set([1]),
      typed: new Uint8Array([1, 2]),
      buffer: Buffer.from('hi'),
      error: Object.assign(new Error('boom'), { code: 'E' }),
      nested: { a: [{ b: [{ c: null }] }] },
      text: 'lone \ud800 and nul \u0000 and 🚀',
    };
    Object.defineProperty(payload, 'hiddenProperty', { value: 1, enumerable: false });
    expect(copiedJson(payload)).toBe(JSON.stringify(payload));
    const snapshot = snapshotPayload(payload, LIMIT) as PayloadSnapshot;
    // the copy's `__proto__` is an own key, not its prototype
    expect(Object.getPrototypeOf(snapshot.value)).toBe(Object.prototype);
  });

  it('reads each property once, as JSON.stringify does, and owns everything it keeps', () => {
    let reads = 0;
    const inner = { list: [1, 2] };
    const payload = {
      get counted() {
        reads += 1;
        return reads;
      },
      inner,
    };
    const snapshot = snapshotPayload(payload, LIMIT) as PayloadSnapshot;
    expect(reads).toBe(1);
    inner.list.push(3);
    expect(JSON.stringify(snapshot.value)).toBe('{"counted":1,"inner":{"list":[1,2]}}');
  });

  it('refuses what JSON or the service cannot take, and stops at the size limit', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(snapshotPayload(cyclic, LIMIT)).toBe(TOO_DEEP);
    let deep: object = {};
    for (let i = 0; i < 64; i++) deep = { d: deep };
    expect(snapshotPayload(deep, LIMIT)).toBe(TOO_DEEP);
    expect(snapshotPayload({ a: [1n] }, LIMIT)).toBe(HOLDS_BIGINT);
    expect(snapshotPayload({ a: Object(1n) as object }, LIMIT)).toBe(HOLDS_BIGINT);
    expect(snapshotPayload({ toJSON: () => 'text' }, LIMIT)).toBe(NOT_AN_OBJECT);
    expect(snapshotPayload({ toJSON: () => [1] }, LIMIT)).toBe(NOT_AN_OBJECT);
    expect(snapshotPayload({ big: 'x'.repeat(2_000) }, 1_024)).toBe(TOO_LARGE);
    // a huge array is not walked to its end
    const huge = new Array<number>(10_000_000).fill(0);
    const started = performance.now();
    expect(snapshotPayload({ huge }, 1_024)).toBe(TOO_LARGE);
    expect(performance.now() - started).toBeLessThan(200);
    expect(() =>
      snapshotPayload(
        {
          toJSON() {
            throw new Error('toJSON down');
          },
        },
        LIMIT,
      ),
    ).toThrow('toJSON down');
  });

  it('a getter that records another event while the payload is read does not disturb the outer read', () => {
    const payload = {
      get a() {
        expect(typeof snapshotPayload({ inner: 'x'.repeat(500) }, 600)).toBe('object');
        return 'a';
      },
      b: 'y'.repeat(700),
    };
    const snapshot = snapshotPayload(payload, 1_000) as PayloadSnapshot;
    expect(JSON.stringify(snapshot.value)).toBe(JSON.stringify({ a: 'a', b: 'y'.repeat(700) }));
    expect(snapshotPayload(payload, 600)).toBe(TOO_LARGE);
  });
});
