import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { FlightlogError } from '../errors/flightlog-error.js';
import type { Metrics } from '../observability/metrics.js';
import type { Store } from '../store/open-store.js';

export interface OpsRoutesOptions {
  store: Store;
  metrics: Metrics;
  /** Bounds /readyz: a store that does not answer in this time is "not ready". */
  readyTimeoutMs: number;
}

/** Liveness, readiness, metrics and the OpenAPI document. */
export const opsRoutes: FastifyPluginAsyncTypebox<OpsRoutesOptions> = async (app, options) => {
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));

  app.get('/readyz', { schema: { hide: true } }, async () => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('ping timed out')), options.readyTimeoutMs);
      timer.unref();
    });
    try {
      await Promise.race([options.store.ping(), timeout]);
    } catch (error) {
      throw new FlightlogError('store-unavailable', 'The trace store is not reachable.', {
        retryAfterSeconds: 1,
        cause: error,
      });
    } finally {
      clearTimeout(timer);
    }
    return { status: 'ready', store: options.store.engine };
  });

  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    const body = await options.metrics.registry.metrics();
    return reply.type(options.metrics.registry.contentType).send(body);
  });

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
};
