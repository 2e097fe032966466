import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import secureJson from 'secure-json-parse';
import { FlightlogError } from '../errors/flightlog-error.js';

export interface BodyLimits {
  /** Largest body accepted, counted both on the wire and after gzip inflation. */
  maxBytes: number;
}

const tooLarge = (limit: number, what: string) =>
  new FlightlogError('payload-too-large', `The ${what} body exceeds ${limit} bytes.`);

/** Reads a stream into one buffer, refusing it as soon as it passes `limit` bytes. */
async function collect(
  source: AsyncIterable<Buffer>,
  limit: number,
  what: string,
): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of source) {
    size += chunk.length;
    if (size > limit) throw tooLarge(limit, what);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size);
}

/** Counts the compressed bytes flowing into the inflater, with the same cap. */
async function* capped(source: AsyncIterable<Buffer>, limit: number): AsyncGenerator<Buffer> {
  let size = 0;
  for await (const chunk of source) {
    size += chunk.length;
    if (size > limit) throw tooLarge(limit, 'compressed');
    yield chunk;
  }
}

/**
 * The body of a request as bytes: read as a stream, inflated as a stream when gzip-encoded,
 * and cut off at `maxBytes` on either side. A gzip bomb is refused after inflating at most
 * the limit (plus one zlib chunk), whatever its declared or real size.
 */
export async function readBody(
  stream: AsyncIterable<Buffer>,
  contentEncoding: string | undefined,
  contentLength: string | undefined,
  limits: BodyLimits,
): Promise<Buffer> {
  const encoding = (contentEncoding ?? 'identity').trim().toLowerCase();
  if (encoding !== 'identity' && encoding !== 'gzip' && encoding !== 'x-gzip')
    throw new FlightlogError(
      'unsupported-media-type',
      `Content-Encoding "${encoding}" is not supported; send gzip or no encoding.`,
    );
  if (contentLength !== undefined && Number(contentLength) > limits.maxBytes)
    throw tooLarge(limits.maxBytes, 'request');
  if (encoding === 'identity') return collect(stream, limits.maxBytes, 'request');

  const gunzip = createGunzip();
  const compressed = Readable.from(capped(stream, limits.maxBytes));
  compressed.on('error', (error) => gunzip.destroy(error));
  compressed.pipe(gunzip);
  try {
    return await collect(gunzip, limits.maxBytes, 'inflated');
  } catch (error) {
    if (error instanceof FlightlogError) throw error;
    throw new FlightlogError('malformed-json', 'The body is not valid gzip.');
  } finally {
    compressed.destroy();
    gunzip.destroy();
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Parses JSON text strictly: valid UTF-8, no `__proto__` or `constructor.prototype` keys. */
export function parseJson(bytes: Buffer): unknown {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new FlightlogError('malformed-json', 'The body is not valid UTF-8.');
  }
  if (text.trim().length === 0) return undefined;
  try {
    return secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' });
  } catch (error) {
    const reason =
      error instanceof SyntaxError
        ? error.message
        : 'it uses a forbidden key (__proto__ or constructor.prototype)';
    throw new FlightlogError('malformed-json', `The body is not valid JSON: ${reason}`);
  }
}

/** Replaces Fastify's body parsers: JSON only, plain or gzip, with hard caps. */
export function registerJsonBody(app: FastifyInstance, limits: BodyLimits): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    'application/json',
    async (request: FastifyRequest, payload: IncomingMessage) => {
      const bytes = await readBody(
        payload,
        request.headers['content-encoding'],
        request.headers['content-length'],
        limits,
      );
      return parseJson(bytes);
    },
  );
}
