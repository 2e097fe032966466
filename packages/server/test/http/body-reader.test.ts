import { Readable } from 'node:stream';
import { createGzip, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { FlightlogError } from '../../src/errors/flightlog-error.js';
import { parseJson, readBody } from '../../src/http/json-body.js';

const code = (error: unknown) => (error instanceof FlightlogError ? error.code : String(error));

/** A gzip stream of `size` zero bytes, made on the fly, in 64 KiB chunks. */
async function gzipOfZeros(size: number): Promise<Buffer> {
  const zeros = Buffer.alloc(64 * 1024);
  async function* source() {
    for (let sent = 0; sent < size; sent += zeros.length) yield zeros;
  }
  const chunks: Buffer[] = [];
  for await (const chunk of Readable.from(source()).pipe(createGzip({ level: 9 })))
    chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** Feeds `body` in 1 KiB chunks and records how much of it the reader consumed. */
function metered(body: Buffer) {
  const meter = { consumed: 0 };
  async function* chunks() {
    for (let i = 0; i < body.length; i += 1024) {
      const chunk = body.subarray(i, i + 1024);
      meter.consumed += chunk.length;
      yield chunk;
    }
  }
  return { stream: chunks(), meter };
}

describe('readBody', () => {
  it('returns a plain body as sent', async () => {
    const { stream } = metered(Buffer.from('{"a":1}'));
    expect((await readBody(stream, undefined, undefined, { maxBytes: 100 })).toString()).toBe(
      '{"a":1}',
    );
  });

  it('inflates gzip', async () => {
    const { stream } = metered(gzipSync('{"a":1}'));
    expect((await readBody(stream, 'gzip', undefined, { maxBytes: 100 })).toString()).toBe(
      '{"a":1}',
    );
  });

  it('refuses a 100 MB gzip bomb after inflating at most the cap, without reading the rest', async () => {
    const bomb = await gzipOfZeros(100 * 1024 * 1024);
    const { stream, meter } = metered(bomb);
    const cap = 1024 * 1024;
    const error = await readBody(stream, 'gzip', String(bomb.length), { maxBytes: cap }).catch(
      (e) => e,
    );
    expect(code(error)).toBe('payload-too-large');
    // 1 MiB of 100 MB is 1 %: the reader stops after about that share of the compressed input
    // (plus the stream buffers in between), nowhere near all of it.
    expect(meter.consumed).toBeLessThan(bomb.length * 0.2);
  });

  it('refuses a plain body that passes the cap while streaming, even with no Content-Length', async () => {
    const { stream, meter } = metered(Buffer.alloc(50_000, 0x20));
    const error = await readBody(stream, undefined, undefined, { maxBytes: 10_000 }).catch(
      (e) => e,
    );
    expect(code(error)).toBe('payload-too-large');
    expect(meter.consumed).toBeLessThanOrEqual(11 * 1024);
  });

  it('refuses a declared Content-Length over the cap before reading anything', async () => {
    const { stream, meter } = metered(Buffer.alloc(10));
    const error = await readBody(stream, undefined, '999999', { maxBytes: 1000 }).catch((e) => e);
    expect(code(error)).toBe('payload-too-large');
    expect(meter.consumed).toBe(0);
  });

  it('refuses a compressed body over the cap on the wire', async () => {
    const random = Buffer.from(
      Array.from({ length: 40_000 }, () => Math.floor(Math.random() * 256)),
    );
    const { stream } = metered(gzipSync(random));
    const error = await readBody(stream, 'gzip', undefined, { maxBytes: 20_000 }).catch((e) => e);
    expect(code(error)).toBe('payload-too-large');
  });

  it.each(['br', 'deflate', 'compress'])(
    'refuses Content-Encoding %s as unsupported',
    async (encoding) => {
      const { stream } = metered(Buffer.from('{}'));
      const error = await readBody(stream, encoding, undefined, { maxBytes: 100 }).catch((e) => e);
      expect(code(error)).toBe('unsupported-media-type');
    },
  );

  describe('a small gzip body with its Content-Length, inflated at once', () => {
    const read = (body: Buffer, maxBytes: number) =>
      readBody(metered(body).stream, 'gzip', String(body.length), { maxBytes });

    it('inflates it, several gzip members too', async () => {
      const text = JSON.stringify({ items: Array.from({ length: 50 }, (_, i) => ({ i })) });
      expect((await read(gzipSync(text), 10_000)).toString()).toBe(text);
      const members = Buffer.concat([gzipSync('{"a":'), gzipSync('1}')]);
      expect((await read(members, 100)).toString()).toBe('{"a":1}');
    });

    it('refuses one that inflates past the cap', async () => {
      const bomb = gzipSync(Buffer.alloc(100_000));
      expect(bomb.length).toBeLessThan(1024);
      expect(code(await read(bomb, 50_000).catch((e) => e))).toBe('payload-too-large');
    });

    it('inflates one past the at-once cap through the stream, and refuses it past the limit', async () => {
      // 2 MiB of zeros compress to ~2 KB: over the 256 KiB inflated at once, under the limit
      const zeros = Buffer.alloc(2 * 1024 * 1024);
      const small = gzipSync(zeros);
      expect(small.length).toBeLessThan(16 * 1024);
      expect((await read(small, 4 * 1024 * 1024)).equals(zeros)).toBe(true);
      expect(code(await read(small, 1024 * 1024).catch((e) => e))).toBe('payload-too-large');
    });

    it('calls broken or trailing-garbage gzip malformed', async () => {
      expect(code(await read(Buffer.from('not gzip at all'), 100).catch((e) => e))).toBe(
        'malformed-json',
      );
      const trailing = Buffer.concat([gzipSync('{"a":1}'), Buffer.from('xx')]);
      expect(code(await read(trailing, 100).catch((e) => e))).toBe('malformed-json');
      const truncated = gzipSync('{"a":1}').subarray(0, 12);
      expect(code(await read(truncated, 100).catch((e) => e))).toBe('malformed-json');
    });
  });

  it('calls broken gzip malformed', async () => {
    const { stream } = metered(Buffer.from('not gzip at all'));
    const error = await readBody(stream, 'gzip', undefined, { maxBytes: 100 }).catch((e) => e);
    expect(code(error)).toBe('malformed-json');
  });
});

describe('parseJson', () => {
  it('parses JSON and treats an empty body as absent', () => {
    expect(parseJson(Buffer.from('{"a":[1,"x"]}'))).toEqual({ a: [1, 'x'] });
    expect(parseJson(Buffer.from('  '))).toBeUndefined();
  });

  it.each([
    ['invalid UTF-8', Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x7d])],
    ['a syntax error', Buffer.from('{"a":')],
    ['NaN', Buffer.from('{"a":NaN}')],
    ['a syntax error after a __proto__ key', Buffer.from('{"__proto__":{"x":1},')],
  ])('refuses %s as malformed', (_name, bytes) => {
    expect(() => parseJson(bytes)).toThrow(expect.objectContaining({ code: 'malformed-json' }));
  });

  it('refuses __proto__ and constructor.prototype keys outside data paths, naming each by its pointer', () => {
    const text =
      '\ufeff{"a":[{"__proto__":{"x":1}}],"b":{"constructor":{"prototype":{}}},"c/~":{"__proto__":null},' +
      '"items":[{"events":[{"payload":{"__proto__":{"kept":true},"constructor":{"prototype":1}}}]}]}';
    const refused = (paths: string[][]) => {
      try {
        parseJson(Buffer.from(text), paths);
      } catch (error) {
        return error as { code: string; fieldErrors: { pointer: string }[] };
      }
      throw new Error('not refused');
    };
    const error = refused([['items', '*', 'events', '*', 'payload']]);
    expect(error.code).toBe('validation-failed');
    expect(error.fieldErrors.map((e) => e.pointer)).toEqual([
      '/a/0/__proto__',
      '/b/constructor/prototype',
      '/c~1~0/__proto__',
    ]);
    // without the data path, the payload's keys are refused too
    expect(refused([]).fieldErrors.map((e) => e.pointer)).toContain(
      '/items/0/events/0/payload/__proto__',
    );
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });

  it('finds them spelt with \\u escapes, and passes text that only mentions them', () => {
    // every letter of a key may come as an escape: `\u005f\u005fproto__`, `constructo\u0072`
    const escaped = Buffer.from(
      '{"a":{"\\u005f\\u005fproto__":{"x":1}},"b":{"constructo\\u0072":{"prototype":{}}}}',
    );
    expect(() => parseJson(escaped)).toThrow(
      expect.objectContaining({
        code: 'validation-failed',
        fieldErrors: [
          expect.objectContaining({ pointer: '/a/__proto__' }),
          expect.objectContaining({ pointer: '/b/constructor/prototype' }),
        ],
      }),
    );
    // the words in values, or a constructor key without a prototype, are no prototype keys
    const mentions = '{"text":"__proto__ and constructor","constructor":"x","e":"\\u0041"}';
    expect(parseJson(Buffer.from(mentions))).toEqual({
      text: '__proto__ and constructor',
      constructor: 'x',
      e: 'A',
    });
  });

  it('keeps them as data inside data paths: own keys, no prototype set anywhere', () => {
    const value = parseJson(
      Buffer.from('{"items":[{"events":[{"payload":{"__proto__":{"x":1},"n":{"__proto__":2}}}]}]}'),
      [['items', '*', 'events', '*', 'payload']],
    ) as { items: { events: { payload: object }[] }[] };
    const payload = value.items[0]!.events[0]!.payload;
    expect(Object.keys(payload)).toEqual(['__proto__', 'n']);
    expect(Object.getPrototypeOf(payload)).toBe(Object.prototype);
    expect(JSON.stringify(payload)).toBe('{"__proto__":{"x":1},"n":{"__proto__":2}}');
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });
});
