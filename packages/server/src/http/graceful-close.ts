import type { FastifyInstance } from 'fastify';

/**
 * Lets requests in flight finish when the app closes: counts them from arrival to the end of
 * their response (or the client going away), and once closing has begun answers with
 * `Connection: close`, so keep-alive sockets end with their last response instead of holding
 * the shutdown open until their idle timeout.
 */
export function registerGracefulClose(app: FastifyInstance): { drained(): Promise<void> } {
  let inFlight = 0;
  let closing = false;
  let waiters: (() => void)[] = [];
  app.addHook('onRequest', async (_request, reply) => {
    inFlight++;
    reply.raw.once('close', () => {
      inFlight--;
      if (inFlight === 0) {
        for (const wake of waiters) wake();
        waiters = [];
      }
    });
  });
  app.addHook('onSend', async (_request, reply) => {
    if (closing) reply.header('connection', 'close');
  });
  app.addHook('preClose', async () => {
    closing = true;
  });
  return {
    drained: () =>
      inFlight === 0 ? Promise.resolve() : new Promise<void>((resolve) => waiters.push(resolve)),
  };
}
