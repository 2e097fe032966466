import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/**
 * Calls `ended` when each route's handler has returned or thrown. A handler that hijacks its
 * reply (a live stream) gets no `onSend`: this is where its request's own work ends. Only async
 * handlers are wrapped (ours all are); a callback-style one keeps its own timing. Register it
 * before the routes it should see.
 */
export function onHandlerEnd(
  app: FastifyInstance,
  ended: (request: FastifyRequest, reply: FastifyReply) => void,
): void {
  app.addHook('onRoute', (route) => {
    const handler = route.handler;
    if (handler.constructor.name !== 'AsyncFunction') return;
    route.handler = async function (this: FastifyInstance, request, reply) {
      try {
        return (await handler.call(this, request, reply)) as unknown;
      } finally {
        ended(request, reply);
      }
    };
  });
}
