import { once } from 'node:events';
import { createGunzip } from 'node:zlib';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import secureJson from 'secure-json-parse';
import { FlightlogError } from '../errors/flightlog-error.js';
import { decodeExportRequest } from '../otlp/otlp-protobuf.js';
import type { BodyParsePool } from './body-parse-pool.js';
import { markPrevalidated } from './schema-validator.js';

export interface BodyLimits {
  /** Largest body accepted, counted both on the wire and after gzip inflation. */
  maxBytes: number;
}

/** Where large bodies are parsed: off the event loop, fairly between agents. */
export interface LargeBodies {
  pool: Pick<BodyParsePool, 'parse'>;
  /** Bodies of at least this many bytes (after inflation) go to the pool. */
  minBytes: number;
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

/**
 * Output chunk of the inflater: a typical batch (20 to 60 KB of JSON) inflates in one or two
 * steps on the thread pool, instead of the four or more of zlib's 16 KiB default.
 */
const INFLATE_CHUNK_BYTES = 64 * 1024;

/**
 * Inflates a gzip stream as it arrives, straight into the inflater (no intermediate streams),
 * refusing it as soon as either the compressed or the inflated bytes pass `limit`.
 */
async function inflate(source: AsyncIterable<Buffer>, limit: number): Promise<Buffer> {
  const gunzip = createGunzip({ chunkSize: INFLATE_CHUNK_BYTES });
  const chunks: Buffer[] = [];
  let size = 0;
  let refused: FlightlogError | undefined;
  const inflated = new Promise<void>((resolve, reject) => {
    gunzip.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) chunks.push(chunk);
      else {
        refused ??= tooLarge(limit, 'inflated');
        gunzip.destroy(refused);
      }
    });
    gunzip.once('end', resolve);
    gunzip.once('error', reject);
  });
  inflated.catch(() => {}); // awaited below; a failure before then must not go unhandled
  try {
    let compressed = 0;
    for await (const chunk of source) {
      compressed += chunk.length;
      if (compressed > limit) throw tooLarge(limit, 'compressed');
      if (!gunzip.write(chunk)) await Promise.race([once(gunzip, 'drain'), inflated]);
      if (refused) throw refused;
    }
    gunzip.end();
    await inflated;
  } finally {
    gunzip.destroy();
  }
  return Buffer.concat(chunks, size);
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

  try {
    return encoding === 'identity'
      ? await collect(stream, limits.maxBytes, 'request')
      : await inflate(stream, limits.maxBytes);
  } catch (error) {
    if (error instanceof FlightlogError) throw error;
    // The connection closed mid-body: the client hung up, or was cut off for sending too slowly
    // (it got its 408 then). A client's doing, not a server error, and nobody is left to answer.
    if ((error as NodeJS.ErrnoException).code === 'ECONNRESET')
      throw new FlightlogError(
        'malformed-request',
        'The connection closed before the whole body arrived.',
      );
    if (encoding === 'identity') throw error;
    throw new FlightlogError('malformed-json', 'The body is not valid gzip.');
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

/**
 * Replaces Fastify's body parsers: JSON only, plain or gzip, with hard caps. A body of
 * `large.minBytes` or more is parsed and validated by `large.pool`, taking turns by agent (the
 * credentials are checked before any body is read), or by client address where no agent is
 * known.
 */
export function registerJsonBody(
  app: FastifyInstance,
  limits: BodyLimits,
  large?: LargeBodies,
): void {
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
      if (large && bytes.length >= large.minBytes)
        return large.pool.parse(
          request.agent ? `agent:${request.agent.agentId}` : `ip:${request.ip}`,
          bytes,
          routeBodySchema(request),
        );
      return parseJson(bytes);
    },
  );
}

/**
 * Adds the OTLP protobuf body (`application/x-protobuf`) to the routes of `app` (an OTLP plugin's
 * scope), read with the same limits as JSON: plain or gzip, capped, large ones decoded and
 * validated by the pool in turns by agent. Any other content type is refused with a 415 that
 * names the two OTLP/HTTP encodings.
 */
export function registerOtlpProtobufBody(
  app: FastifyInstance,
  limits: BodyLimits,
  large?: LargeBodies,
): void {
  app.addContentTypeParser(
    'application/x-protobuf',
    async (request: FastifyRequest, payload: IncomingMessage) => {
      const bytes = await readBody(
        payload,
        request.headers['content-encoding'],
        request.headers['content-length'],
        limits,
      );
      if (large && bytes.length >= large.minBytes)
        return large.pool.parse(
          request.agent ? `agent:${request.agent.agentId}` : `ip:${request.ip}`,
          bytes,
          routeBodySchema(request),
          'otlp-protobuf',
        );
      // what protobuf decoded has the schema's types by construction (the mapping reads it
      // defensively all the same): the route's validator need not walk it again
      const decoded = decodeExportRequest(bytes);
      markPrevalidated(decoded);
      return decoded;
    },
  );
  app.addContentTypeParser('*', async () => {
    throw new FlightlogError(
      'unsupported-media-type',
      'Send Content-Type: application/x-protobuf or application/json (OTLP/HTTP).',
    );
  });
}

/** The body schema of the request's route (what its validator checks), if it has one. */
function routeBodySchema(request: FastifyRequest): object | undefined {
  const body = (request.routeOptions.schema as { body?: unknown } | undefined)?.body;
  return typeof body === 'object' && body !== null ? body : undefined;
}
