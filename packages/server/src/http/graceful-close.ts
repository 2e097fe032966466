import type { FastifyInstance, FastifyReply } from 'fastify';
import { onHandlerEnd } from './handler-end.js';

/**
 * Lets requests in flight finish when the app closes, and once closing has begun answers with
 * `Connection: close`, so keep-alive sockets end with their last response instead of holding
 * the shutdown open until their idle timeout.
 *
 * A request counts until both its connection is done with it and its handler has answered: a
 * client that goes away mid-request does not stop the handler, which may still be writing to
 * the store, so the store must not close under it. The handler's answer is seen in `onSend`,
 * which Fastify runs even when the client has gone, or when the handler returns.
 */
export function registerGracefulClose(app: FastifyInstance): { drained(): Promise<void> } {
  let inFlight = 0;
  let closing = false;
  let waiters: (() => void)[] = [];
  const release = () => {
    inFlight--;
    if (inFlight === 0) {
      for (const wake of waiters) wake();
      waiters = [];
    }
  };
  // per request: marks its handler as having answered
  const answeredBy = new WeakMap<FastifyReply, () => void>();
  app.addHook('onRequest', async (_request, reply) => {
    inFlight++;
    let answered = false;
    let connectionDone = false;
    const settle = () => {
      if (answered && connectionDone) release();
    };
    answeredBy.set(reply, () => {
      if (answered) return;
      answered = true;
      settle();
    });
    reply.raw.once('close', () => {
      connectionDone = true;
      // a hijacked reply (a live stream) or a finished one has no handler left to wait for
      if (reply.sent && !answered) answered = true;
      settle();
    });
  });
  onHandlerEnd(app, (_request, reply) => answeredBy.get(reply)?.());
  app.addHook('onSend', async (_request, reply, payload) => {
    if (closing) reply.header('connection', 'close');
    answeredBy.get(reply)?.();
    return payload;
  });
  app.addHook('preClose', async () => {
    closing = true;
  });
  return {
    drained: () =>
      inFlight === 0 ? Promise.resolve() : new Promise<void>((resolve) => waiters.push(resolve)),
  };
}
