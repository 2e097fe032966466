import { ProblemSchema } from '@flightlog/protocol';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { IdentityVerifier } from '../auth/identity.js';
import { FlightlogError } from '../errors/flightlog-error.js';
import {
  LIVE_BUFFER,
  type LiveBus,
  type LiveMessage,
  type Subscription,
} from '../live/live-bus.js';
import { openLiveStream } from '../live/live-stream.js';
import type { QueueAccount, QueueBudget } from '../live/queue-budget.js';
import type { StreamRegistry } from '../live/stream-registry.js';
import type { Store } from '../store/open-store.js';
import { requireUser, userOf } from './authentication.js';
import { releaseAdmission } from './fair-admission-hook.js';

export interface LiveRoutesOptions {
  store: Store;
  identity: IdentityVerifier;
  bus: LiveBus;
  streams: StreamRegistry;
  heartbeatMs: number;
  maxQueueBytes: number;
  /** What all the streams of this instance may have waiting, together (LIVE_MAX_TOTAL_QUEUE_BYTES). */
  queueBudget: QueueBudget;
  retryMs: number;
  /** Longest the stream waits for a drain before it gives up on the client. */
  stallTimeoutMs: number;
}

const WARNING = `event: warning\ndata: ${JSON.stringify({ message: 'live stream interrupted' })}\n\n`;
/** How long a stream's backlog may stay over LIVE_MAX_QUEUE_BYTES before the client is cut. */
const SLOW_CLIENT_GRACE_MS = 500;
/** setTimeout's largest delay; a token expiring later is re-checked then. */
const MAX_TIMER_MS = 2_147_483_647;

/** `GET /v1/agents/:id/live`: an agent's batches as Server-Sent Events, replay then real time. */
export const liveRoutes: FastifyPluginAsyncTypebox<LiveRoutesOptions> = async (app, options) => {
  app.addHook('onRequest', requireUser(options.identity));

  app.get(
    '/v1/agents/:id/live',
    {
      schema: {
        summary: "Stream an agent's trace updates (Server-Sent Events)",
        params: Type.Object({ id: Type.String({ maxLength: 1024 }) }),
        // No length limit: a value that is not a message id is ignored (full replay).
        headers: Type.Object({ 'last-event-id': Type.Optional(Type.String()) }),
        response: { 401: ProblemSchema, 403: ProblemSchema, 429: ProblemSchema },
      },
    },
    async (request, reply) => {
      const userId = userOf(request);
      const agentId = request.params.id;
      // 403 also for an agent that does not exist, so existence is not revealed.
      if ((await options.store.agents.roleOf(userId, agentId)) === undefined)
        throw new FlightlogError('forbidden', 'You have no role on this agent.');

      const res = reply.raw;
      let subscription: Subscription | undefined;
      const timers: { heartbeat?: NodeJS.Timeout; expiry?: NodeJS.Timeout } = {};
      let ended = false;
      // set once the stream is admitted; `end` frees its part of the instance's budget
      const budget: { account?: QueueAccount } = {};
      const end = () => {
        if (ended) return;
        ended = true;
        if (budget.account) options.queueBudget.release(budget.account);
        clearInterval(timers.heartbeat);
        clearTimeout(timers.expiry);
        subscription?.unsubscribe();
        if (typeof release === 'function') release();
        if (!res.writableEnded) res.end();
      };
      // Registered with who watches which agent, so that losing the role ends the stream.
      const release = options.streams.open({
        userId,
        agentId,
        end,
        send: (chunk) => {
          if (!ended && res.headersSent) res.write(chunk);
        },
      });
      if (release === 'closed')
        throw new FlightlogError('shutting-down', 'The service is shutting down.', {
          retryAfterSeconds: 1,
        });
      if (release === 'at-cap')
        throw new FlightlogError('too-many-requests', 'Too many live streams open for this user.', {
          retryAfterSeconds: 5,
        });

      const queued = (budget.account = options.queueBudget.account());
      reply.hijack();
      // set up: from here the stream is paced by its client and bounded by the stream limits,
      // and must not hold one of the slots every tenant's requests are served in
      releaseAdmission(request);
      res.on('close', end);
      // A client gone while its token and role were checked has had its 'close' already: it
      // would never end this stream, which would hold its slot until the token expires.
      if (res.destroyed || request.raw.socket?.destroyed === true) {
        end();
        return;
      }
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache, no-transform',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
        'x-request-id': request.id,
      });
      // A client that cannot keep up with real-time messages is cut off (it may resume with
      // Last-Event-ID) rather than letting its unsent messages grow this process's memory. The
      // replay is paced by the connection; a burst may pass the limit for a moment, so the
      // client is cut only if its backlog is still over it after a grace period.
      let grace: NodeJS.Timeout | undefined;
      const cutIfStillBehind = () => {
        grace = undefined;
        if (ended || res.writableLength <= options.maxQueueBytes) return;
        request.log.warn({ agentId }, 'live stream client too slow; disconnecting');
        end();
        res.destroy();
      };
      res.on('drain', () => {
        clearTimeout(grace);
        grace = undefined;
        options.queueBudget.update(queued, 0);
      });
      res.on('close', () => clearTimeout(grace));
      const write = (chunk: string): boolean => {
        if (ended) return true;
        // Over the instance's budget, a client holding more than its share is cut at once,
        // not after the grace period: what it would buffer meanwhile is what the budget bounds.
        // (String length: bytes for the ASCII of most JSON, and no pass over the chunk.)
        if (!options.queueBudget.admits(queued, chunk.length)) {
          request.log.warn(
            { agentId, waitingBytes: res.writableLength },
            'live streams over LIVE_MAX_TOTAL_QUEUE_BYTES; disconnecting a slow client',
          );
          end();
          res.destroy();
          return true;
        }
        const more = res.write(chunk);
        options.queueBudget.update(queued, res.writableLength);
        if (res.writableLength > options.maxQueueBytes && grace === undefined) {
          grace = setTimeout(cutIfStillBehind, SLOW_CLIENT_GRACE_MS);
          grace.unref();
        }
        return more;
      };
      // The replay waits for drains, so a client that stops reading during it never passes
      // LIVE_MAX_QUEUE_BYTES: it is cut when a drain does not come in time (it may resume).
      const drained = () =>
        new Promise<void>((resolve) => {
          if (ended) return resolve();
          const stall = setTimeout(() => {
            done();
            if (ended) return;
            request.log.warn({ agentId }, 'live stream client stalled; disconnecting');
            end();
            res.destroy();
          }, options.stallTimeoutMs);
          stall.unref();
          const done = () => {
            clearTimeout(stall);
            res.off('drain', done);
            res.off('close', done);
            resolve();
          };
          res.on('drain', done);
          res.on('close', done);
        });
      write(`: connected\nretry: ${options.retryMs}\n\n`);
      timers.heartbeat = setInterval(() => write(': heartbeat\n\n'), options.heartbeatMs);
      timers.heartbeat.unref();
      const expiresAt = request.userExpiresAt ?? Date.now() + MAX_TIMER_MS;
      timers.expiry = setTimeout(end, Math.min(Math.max(expiresAt - Date.now(), 0), MAX_TIMER_MS));
      timers.expiry.unref();

      const lastEventId = request.headers['last-event-id'];
      const opened = await openLiveStream(
        options.bus,
        agentId,
        typeof lastEventId === 'string' ? lastEventId : undefined,
        {
          message: (m: LiveMessage) =>
            ended || write(`id: ${m.id}\nevent: ${m.event ?? 'trace'}\ndata: ${m.data}\n\n`),
          drained,
          ended: () => ended,
          warning: () => void write(WARNING),
          overflow: () => {
            request.log.warn(
              { agentId },
              'live stream client too slow for its replay; disconnecting',
            );
            end();
            res.destroy();
          },
        },
        {
          maxHeld: LIVE_BUFFER,
          onError: (error) => request.log.warn({ err: error }, 'live bus unavailable'),
        },
      );
      if (ended) opened.unsubscribe();
      else subscription = opened;
    },
  );
};
