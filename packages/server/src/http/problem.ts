import type { FieldError, Problem } from '@flightlog/protocol';
import { PROBLEM_CONTENT_TYPE } from '@flightlog/protocol';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { FlightlogError, validationFailed, type ErrorCode } from '../errors/flightlog-error.js';
import type { Metrics } from '../observability/metrics.js';

/** The single map from error codes to HTTP. */
const HTTP: Record<ErrorCode, { status: number; title: string }> = {
  'malformed-json': { status: 400, title: 'Malformed request body' },
  'malformed-request': { status: 400, title: 'Malformed request' },
  'validation-failed': { status: 400, title: 'Validation failed' },
  unauthorized: { status: 401, title: 'Unauthorized' },
  forbidden: { status: 403, title: 'Forbidden' },
  'not-found': { status: 404, title: 'Not found' },
  'request-timeout': { status: 408, title: 'Request timeout' },
  'id-conflict': { status: 409, title: 'Id already in use' },
  'last-owner': { status: 409, title: 'Last owner' },
  'payload-too-large': { status: 413, title: 'Payload too large' },
  'uri-too-long': { status: 414, title: 'URI too long' },
  'unsupported-media-type': { status: 415, title: 'Unsupported media type' },
  'headers-too-large': { status: 431, title: 'Request header fields too large' },
  'too-many-requests': { status: 429, title: 'Too many requests' },
  'store-unavailable': { status: 503, title: 'Service unavailable' },
  'live-unavailable': { status: 503, title: 'Service unavailable' },
  'sharing-unavailable': { status: 503, title: 'Sharing is not set up' },
  'shutting-down': { status: 503, title: 'Service unavailable' },
  internal: { status: 500, title: 'Internal server error' },
};

export function problemType(code: ErrorCode): string {
  return `urn:flightlog:problem:${code}`;
}

export function problemFor(error: FlightlogError, instance?: string): Problem {
  const { status, title } = HTTP[error.code];
  return {
    type: problemType(error.code),
    title,
    status,
    detail: error.message,
    ...(instance ? { instance } : {}),
    ...(error.fieldErrors ? { errors: error.fieldErrors } : {}),
  };
}

export function sendProblem(
  request: FastifyRequest,
  reply: FastifyReply,
  error: FlightlogError,
): FastifyReply {
  const problem = problemFor(error, request.url.split('?')[0]);
  if (error.retryAfterSeconds !== undefined)
    reply.header('retry-after', String(error.retryAfterSeconds));
  if (error.code === 'unauthorized') reply.header('www-authenticate', 'Bearer');
  return reply
    .code(problem.status)
    .type(PROBLEM_CONTENT_TYPE)
    .send(JSON.stringify({ ...problem, requestId: request.id }));
}

interface AjvError {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
}

/** Ajv's errors as one entry per offending field, each with its JSON pointer. */
export function fieldErrorsFromAjv(errors: readonly AjvError[], prefix = ''): FieldError[] {
  const byPointer = new Map<string, string[]>();
  for (const e of errors) {
    let pointer = prefix + e.instancePath;
    let message = e.message ?? 'is invalid';
    if (e.keyword === 'required') {
      pointer += `/${escapePointer(String(e.params.missingProperty))}`;
      message = 'is required';
    } else if (e.keyword === 'additionalProperties') {
      pointer += `/${escapePointer(String(e.params.additionalProperty))}`;
      message = 'is not an allowed field';
    } else if (e.keyword === 'enum' && Array.isArray(e.params.allowedValues)) {
      message = `must be one of: ${e.params.allowedValues.join(', ')}`;
    } else if (e.keyword === 'pattern') {
      message = 'has characters or a form that is not allowed';
    } else if (e.keyword === 'format') {
      message = `must be a ${String(e.params.format)} (RFC 3339 with time zone)`;
    } else if (e.keyword === 'anyOf') {
      continue; // the alternatives' own messages say it better
    }
    const messages = byPointer.get(pointer) ?? [];
    if (!messages.includes(message)) messages.push(message);
    byPointer.set(pointer, messages);
  }
  return [...byPointer].map(([pointer, messages]) => ({
    pointer,
    detail: messages.join(' or '),
  }));
}

function escapePointer(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}

/** Anything thrown by a route, a hook or Fastify itself, as a coded error. */
export function asFlightlogError(error: FastifyError | Error): FlightlogError {
  if (error instanceof FlightlogError) return error;
  const fastifyError = error as FastifyError;
  if (fastifyError.validation) {
    const context = fastifyError.validationContext;
    const prefix = context && context !== 'body' ? `/${context}` : '';
    return validationFailed(
      fieldErrorsFromAjv(fastifyError.validation as AjvError[], prefix),
      'The request does not match the schema.',
    );
  }
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new FlightlogError('unsupported-media-type', 'Send Content-Type: application/json.');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new FlightlogError('payload-too-large', 'The request body is too large.');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new FlightlogError('malformed-json', fastifyError.message);
  }
  const status = fastifyError.statusCode;
  if (status === 408) return new FlightlogError('request-timeout', 'The request took too long.');
  if (status === 413)
    return new FlightlogError('payload-too-large', 'The request body is too large.');
  if (status === 415) return new FlightlogError('unsupported-media-type', fastifyError.message);
  if (status !== undefined && status >= 400 && status < 500)
    return new FlightlogError('malformed-request', fastifyError.message);
  return new FlightlogError('internal', 'Something went wrong on our side.', { cause: error });
}

/** How long a connection an error answer closes is still read (what arrives is dropped). */
const LINGER_MS = 2_000;

/**
 * When an answer closes its connection, closes it as a lingering close does: FIN after the
 * answer, then whatever the client still sends is read and dropped (Node dumps the rest of the
 * body) until it closes its side too, or for at most LINGER_MS. Node would destroy the socket as
 * soon as the answer is out, and a socket closed with unread bytes sends a reset that can
 * overtake the answer: a client still sending a refused body would see ECONNRESET instead of
 * the 413 (or 400), and retry a batch that can never be taken.
 */
function lingerOnClose(reply: FastifyReply): void {
  const socket = reply.raw.socket;
  if (!socket) return;
  // how Node's HTTP server ends the socket of a `Connection: close` answer once it is sent
  socket.destroySoon = () => {
    socket.end();
    const timer = setTimeout(() => socket.destroy(), LINGER_MS);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  };
}

/** Registers the one error handler and the not-found handler of the app. */
export function registerProblemHandler(app: FastifyInstance, metrics: Metrics): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const coded = asFlightlogError(error);
    metrics.rejections.inc({ reason: coded.code });
    if (coded.code === 'internal') request.log.error({ err: error }, 'request failed');
    else if (coded.code === 'store-unavailable')
      request.log.warn({ err: coded.cause }, 'trace store unreachable');
    // A body we refused before reading it all cannot be drained cheaply: close the connection.
    if (coded.code === 'payload-too-large') reply.header('connection', 'close');
    // (Fastify closes it too after a body it could not parse.) Either way, close it lingering.
    lingerOnClose(reply);
    return sendProblem(request, reply, coded);
  });
  // Refused before its body is read: Fastify would otherwise parse (and inflate) the body of a
  // request to an unknown route before its not-found handler runs, work for anyone unauthenticated.
  app.addHook('onRequest', async (request) => {
    if (request.is404) throw noRoute(request);
  });
  app.setNotFoundHandler((request, reply) => {
    metrics.rejections.inc({ reason: 'not-found' });
    return sendProblem(request, reply, noRoute(request));
  });
}

/**
 * Fastify's router refuses a path it cannot route before any handler runs: a segment longer
 * than `maxParamLength` (no id is that long) or percent-encoding that is not UTF-8. Its own
 * answer is a JSON body of its own shape that quotes the whole path; these are problems like
 * every other refusal. Fastify's `frameworkErrors`.
 */
export function answerFrameworkError(
  error: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
): FastifyReply {
  const coded =
    error.code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? new FlightlogError('uri-too-long', 'A segment of the path is longer than any id.')
      : error.code === 'FST_ERR_BAD_URL'
        ? new FlightlogError('malformed-request', 'The path is not valid percent-encoded UTF-8.')
        : asFlightlogError(error);
  return sendProblem(request, reply, coded);
}

export function noRoute(request: FastifyRequest): FlightlogError {
  return new FlightlogError(
    'not-found',
    `No route ${request.method} ${request.url.split('?')[0]}.`,
  );
}

/**
 * Errors Node's HTTP parser meets before there is a request to route (a request not received
 * in time, headers too large, bytes that are not HTTP), answered as problem+json too where the
 * socket can still take an answer. Fastify's `clientErrorHandler`.
 */
export function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) {
    socket.destroy();
    return;
  }
  const coded =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? new FlightlogError('request-timeout', 'The request was not received in time.')
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? new FlightlogError('headers-too-large', 'The request headers are too large.')
        : new FlightlogError('malformed-request', 'The request is not valid HTTP/1.1.');
  const body = JSON.stringify(problemFor(coded));
  const { status } = HTTP[coded.code];
  if (socket.writable)
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n` +
        `Content-Type: ${PROBLEM_CONTENT_TYPE}\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  socket.destroy();
}
