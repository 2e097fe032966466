import { once } from 'node:events';
import { createGunzip, gunzipSync } from 'node:zlib';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { FlightlogError, validationFailed } from '../errors/flightlog-error.js';
import { decodeExportRequest } from '../otlp/otlp-protobuf.js';
import type { BodyParsePool } from './body-parse-pool.js';
import { prototypeKeyErrors, type DataPath } from './prototype-keys.js';
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
 * Gzip bodies declared at most this many bytes (a small batch is 0.2–2 KB) are inflated at once
 * on the event loop, up to SMALL_INFLATED_MAX bytes: a zlib stream costs the loop ~70 µs to set
 * up and drive through the thread pool, where inflating such a body at once costs ~5–15 µs. One
 * that inflates past that (a bomb, or a body that compresses unusually well) is inflated again
 * through the stream, off the loop, so that no body holds the loop for more than ~0.3 ms.
 */
const SMALL_COMPRESSED_MAX = 16 * 1024;
const SMALL_INFLATED_MAX = 256 * 1024;

/** One buffer as a stream. */
async function* only(chunk: Buffer): AsyncIterable<Buffer> {
  yield chunk;
}

/** Inflates a small gzip body at once, or through the stream when it inflates past the cap. */
async function inflateSmall(compressed: Buffer, limit: number): Promise<Buffer> {
  const most = Math.min(limit, SMALL_INFLATED_MAX);
  try {
    return gunzipSync(compressed, { maxOutputLength: most });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ERR_BUFFER_TOO_LARGE') throw error;
    if (most >= limit) throw tooLarge(limit, 'inflated');
    return inflate(only(compressed), limit);
  }
}

/**
 * The body of a request as bytes: read as a stream, inflated as a stream when gzip-encoded (a
 * small one at once: see SMALL_COMPRESSED_MAX), and cut off at `maxBytes` on either side. A gzip
 * bomb is refused after inflating at most the limit (plus one zlib chunk), whatever its declared
 * or real size.
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
    if (encoding === 'identity') return await collect(stream, limits.maxBytes, 'request');
    // (the declared length is what the HTTP parser holds the body to)
    if (contentLength !== undefined && Number(contentLength) <= SMALL_COMPRESSED_MAX)
      return await inflateSmall(
        await collect(stream, limits.maxBytes, 'compressed'),
        limits.maxBytes,
      );
    return await inflate(stream, limits.maxBytes);
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

/**
 * Parses JSON text strictly: valid UTF-8, and no `__proto__` or `constructor.prototype` keys
 * except inside `dataPaths` (a route's agent data, such as event payloads), where they are kept
 * as data. Such keys are safe as data: `JSON.parse` makes them own properties, never prototypes,
 * and the service only ever serialises payloads (JSON.stringify keeps them as keys); what must not
 * happen is an object of ours taking them as its fields, hence the refusal elsewhere, with the
 * pointer of each, so a client knows which event (or item) to drop and can send the rest.
 */
export function parseJson(bytes: Buffer, dataPaths: readonly DataPath[] = []): unknown {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new FlightlogError('malformed-json', 'The body is not valid UTF-8.');
  }
  if (text.trim().length === 0) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch (error) {
    throw new FlightlogError(
      'malformed-json',
      `The body is not valid JSON: ${(error as SyntaxError).message}`,
    );
  }
  if (typeof value !== 'object' || value === null || !mayHoldPrototypeKey(text)) return value;
  const refused = prototypeKeyErrors(value, dataPaths);
  if (refused.length > 0) throw validationFailed(refused);
  return value;
}

/**
 * Whether JSON text may hold a `__proto__` or `constructor` key anywhere: a superset, found with
 * three substring searches. JSON can spell a letter or `_` of a key only as itself or as a `\u`
 * escape. (secure-json-parse's two regular expressions, tried at every quote of the text, cost
 * ~30 µs on a 21 KB batch; these searches a few.) Only then is the parsed value walked.
 */
function mayHoldPrototypeKey(text: string): boolean {
  return text.includes('__proto__') || text.includes('constructor') || text.includes('\\u');
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
      const dataPaths = request.routeOptions.config.jsonDataPaths ?? [];
      if (large && bytes.length >= large.minBytes)
        return large.pool.parse(
          request.agent ? `agent:${request.agent.agentId}` : `ip:${request.ip}`,
          bytes,
          routeBodySchema(request),
          dataPaths,
        );
      return parseJson(bytes, dataPaths);
    },
  );
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * Where the route's body holds agent data whose keys are the agent's own (see
     * {@link parseJson}): `__proto__` and `constructor.prototype` keys are kept there as data.
     * Default: nowhere.
     */
    jsonDataPaths?: readonly DataPath[];
  }
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
          [],
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
