import { ProblemSchema } from '@flightlog/protocol';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { IdentityVerifier } from '../auth/identity.js';
import { FlightlogError } from '../errors/flightlog-error.js';
import { LIVE_BUFFER, type LiveBus, type Subscription } from '../live/live-bus.js';
import { openLiveStream } from '../live/live-stream.js';
import type { QueueBudget } from '../live/queue-budget.js';
import { SseStream } from '../live/sse-stream.js';
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

      const sse = new SseStream(reply.raw, {
        heartbeatMs: options.heartbeatMs,
        retryMs: options.retryMs,
        maxQueueBytes: options.maxQueueBytes,
        queueBudget: options.queueBudget,
        stallTimeoutMs: options.stallTimeoutMs,
        warn: (details, message) => request.log.warn({ agentId, ...details }, message),
      });
      // Registered with who watches which agent, so that losing the role ends the stream.
      const release = options.streams.open({
        userId,
        agentId,
        end: () => sse.end(),
        send: (chunk) => sse.send(chunk),
      });
      if (release === 'closed')
        throw new FlightlogError('shutting-down', 'The service is shutting down.', {
          retryAfterSeconds: 1,
        });
      if (release === 'at-cap')
        throw new FlightlogError('too-many-requests', 'Too many live streams open for this user.', {
          retryAfterSeconds: 5,
        });
      let subscription: Subscription | undefined;
      sse.onEnd(() => subscription?.unsubscribe());
      sse.onEnd(release);

      reply.hijack();
      // set up: from here the stream is paced by its client and bounded by the stream limits,
      // and must not hold one of the slots every tenant's requests are served in
      releaseAdmission(request);
      const clientGone = request.raw.socket?.destroyed === true;
      if (!sse.start({ 'x-request-id': request.id }, request.userExpiresAt, clientGone)) return;

      const lastEventId = request.headers['last-event-id'];
      const opened = await openLiveStream(
        options.bus,
        agentId,
        typeof lastEventId === 'string' ? lastEventId : undefined,
        sse,
        {
          maxHeld: LIVE_BUFFER,
          onError: (error) => request.log.warn({ err: error }, 'live bus unavailable'),
        },
      );
      if (sse.ended()) opened.unsubscribe();
      else subscription = opened;
    },
  );
};
