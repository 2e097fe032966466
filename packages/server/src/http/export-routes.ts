import { Readable } from 'node:stream';
import { IsoDateTime, ProblemSchema } from '@flightlog/protocol';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { IdentityVerifier } from '../auth/identity.js';
import { FlightlogError, validationFailed } from '../errors/flightlog-error.js';
import {
  exportLines,
  exportRange,
  type ExportQuery,
  type ExportRange,
  type ExportSource,
} from '../lifecycle/export.js';
import {
  ExportAbortedError,
  type ExportSlots,
  type ExportTicket,
} from '../lifecycle/export-slots.js';
import type { Store } from '../store/open-store.js';
import { requireUser, userOf } from './authentication.js';

/** How exports stream on this instance: their slots and how long a stalled reader is kept. */
export interface ExportStreaming {
  slots: ExportSlots;
  /** A reader that takes nothing for this long is disconnected (`EXPORT_STALL_TIMEOUT_MS`). */
  stallTimeoutMs: number;
}

export interface ExportRoutesOptions {
  store: Store;
  identity: IdentityVerifier;
  streaming: ExportStreaming;
}

/** The query string of both export routes (user and admin). */
export const ExportQuerySchema = Type.Object(
  {
    since: Type.Optional(IsoDateTime),
    until: Type.Optional(IsoDateTime),
    cursor: Type.Optional(Type.String({ maxLength: 1024 })),
  },
  { additionalProperties: false },
);

export const EXPORT_SUMMARY =
  "An agent's runs as NDJSON, oldest first: one line per run, " +
  '{"trace", "events", "cursor"}, trace and events as the read API returns them (encrypted ' +
  'payloads as stored). since (inclusive) and until (exclusive) filter on startedAt; cursor, ' +
  'the last line received, resumes after its run';

export const EXPORT_PROBLEMS = {
  400: ProblemSchema,
  401: ProblemSchema,
  404: ProblemSchema,
  429: ProblemSchema,
  503: ProblemSchema,
};

/** Media type of an export. */
export const NDJSON = 'application/x-ndjson; charset=utf-8';

/** Bytes of the stream's own buffer: the export reads on only once the socket took them. */
const STREAM_BUFFER_BYTES = 64 * 1024;

/** The range of an export's query, or the `400` naming the field. */
export function exportRangeOrThrow(query: ExportQuery): ExportRange {
  const outcome = exportRange(query);
  if (outcome.kind === 'invalid') throw validationFailed(outcome.errors);
  return outcome.range;
}

/**
 * Answers with the agent's runs in `range` as NDJSON streamed at the client's pace (the reads
 * wait while the socket's buffers are full) within one of the instance's export slots; refused
 * `429` past them. The export stops before its next read when the client goes away or the
 * server shuts down (then the connection is cut: a client sees an incomplete chunked answer,
 * never a short one that looks whole), and a client that reads nothing for `stallTimeoutMs` is
 * disconnected. A failure before the first line is an ordinary problem answer.
 */
export function sendExport(
  request: FastifyRequest,
  reply: FastifyReply,
  streaming: ExportStreaming,
  source: ExportSource,
  agentId: string,
  range: ExportRange,
): FastifyReply {
  const slot = streaming.slots.open(request.tenant ?? `ip:${request.ip}`);
  if (slot === 'closed')
    throw new FlightlogError('shutting-down', 'The service is shutting down.', {
      retryAfterSeconds: 1,
    });
  if (slot === 'tenant-at-cap' || slot === 'at-cap')
    throw new FlightlogError(
      'too-many-requests',
      slot === 'tenant-at-cap'
        ? 'Too many exports of yours are running; send this one again once one has ended.'
        : 'Too many exports are running on this instance; send this one again later.',
      { retryAfterSeconds: 5 },
    );
  const ticket: ExportTicket = slot;
  const gone = new AbortController();
  const signal = AbortSignal.any([ticket.signal, gone.signal]);
  let started = false;
  const res = reply.raw;
  res.once('close', () => {
    gone.abort(new ExportAbortedError('the client went away'));
    // an export that never read holds nothing but its slot
    if (!started) ticket.finished();
  });
  // shutting down: an export streaming to its client ends now (one waiting for its reader would
  // not reach its next read, where it stops, until the reader took more)
  ticket.signal.addEventListener(
    'abort',
    () => {
      if (res.headersSent) res.destroy();
    },
    { once: true },
  );
  res.setTimeout(streaming.stallTimeoutMs, () => {
    request.log.warn({ agentId }, 'export client stalled; disconnecting');
    res.destroy();
  });
  async function* lines(): AsyncGenerator<string, void, undefined> {
    started = true;
    try {
      yield* exportLines(source, agentId, range, { signal });
    } catch (error) {
      // before the first line the client gets a problem answer: shutting down, not a bug
      if (error instanceof ExportAbortedError && ticket.signal.aborted)
        throw new FlightlogError('shutting-down', 'The service is shutting down.', {
          retryAfterSeconds: 1,
          cause: error,
        });
      throw error;
    } finally {
      ticket.finished();
    }
  }
  return reply
    .type(NDJSON)
    .header('cache-control', 'no-store')
    .send(Readable.from(lines(), { objectMode: false, highWaterMark: STREAM_BUFFER_BYTES }));
}

/**
 * `GET /v1/agents/:id/export` for dashboard users (identity JWT): any role on the agent may
 * export it; a user without one gets the read API's `404`.
 */
export const exportRoutes: FastifyPluginAsyncTypebox<ExportRoutesOptions> = async (
  app,
  { store, identity, streaming },
) => {
  app.addHook('onRequest', requireUser(identity));

  app.get(
    '/v1/agents/:id/export',
    {
      schema: {
        summary: EXPORT_SUMMARY,
        params: Type.Object({ id: Type.String({ maxLength: 1024 }) }),
        querystring: ExportQuerySchema,
        response: EXPORT_PROBLEMS,
      },
    },
    async (request, reply) => {
      const range = exportRangeOrThrow(request.query);
      const agentId = request.params.id;
      if ((await store.agents.roleOf(userOf(request), agentId)) === undefined)
        throw new FlightlogError('not-found', 'No such agent, or you have no access to it.');
      return sendExport(request, reply, streaming, store.exports, agentId, range);
    },
  );
};
