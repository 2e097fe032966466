import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { FairAdmission } from '../admission/fair-admission.js';
import { FlightlogError } from '../errors/flightlog-error.js';
import type { Metrics } from '../observability/metrics.js';
import { onHandlerEnd } from './handler-end.js';

/**
 * The operator's view of the process is not a tenant's request: probes and metrics answer at
 * once, also while every slot is taken (they cost next to nothing, and a liveness probe kept
 * waiting would get a busy server restarted).
 */
const OPERATOR_ROUTES = new Set(['/healthz', '/readyz', '/metrics']);

/** The slot each admitted request holds, until its answer. */
const slots = new WeakMap<FastifyRequest, () => void>();

/**
 * Puts every request through `gate` once authentication has named its tenant: the agent of an
 * API key, the user of an identity token, the admin token, or the client address for anything
 * else. It takes its turn at `preValidation`, once its body has arrived: a slot covers the
 * server's own work (validation, the handler, the store), never the pace of a client's upload,
 * so a tenant sending bodies slowly holds no slot meanwhile. (Reading bodies is bounded
 * apart: MAX_BODY_BYTES, REQUEST_TIMEOUT_MS, and large bodies parsed by agent in turn.)
 * A request refused gets `429` with `Retry-After`.
 *
 * Its slot is freed exactly once, by the first of: its answer (`onSend`, which Fastify runs
 * even for a client that has gone), its handler returning (a hijacked reply gets no `onSend`),
 * or `releaseAdmission` (a live stream, once set up). A client that leaves while its request
 * waits takes it out of the line; one that leaves once it is admitted does not free the slot:
 * the request's work goes on for a client that has gone too, and counts until it is done.
 */
export function registerFairAdmission(
  app: FastifyInstance,
  gate: FairAdmission,
  metrics: Metrics,
): void {
  metrics.watchAdmission(() => ({ active: gate.active, waiting: gate.waiting }));
  app.addHook('preValidation', async (request, reply) => {
    if (OPERATOR_ROUTES.has(request.routeOptions.url ?? '')) return;
    const tenant = request.tenant ?? `ip:${request.ip}`;
    // a free slot, nobody waiting: no abort signal to set up (~10 µs a request)
    const now = gate.tryAdmit(tenant);
    if (now !== undefined) {
      slots.set(request, now.release);
      return;
    }
    const abort = new AbortController();
    const gone = () => abort.abort();
    reply.raw.once('close', gone);
    const started = performance.now();
    const admission = await gate.admit(tenant, abort.signal);
    reply.raw.off('close', gone);
    if (!admission.admitted) {
      metrics.admissionRefused.inc({ reason: admission.reason });
      if (admission.reason === 'closed')
        throw new FlightlogError('shutting-down', 'The service is shutting down.', {
          retryAfterSeconds: admission.retryAfterSeconds,
        });
      if (admission.reason === 'aborted')
        throw new FlightlogError(
          'malformed-request',
          'The connection closed while the request waited for its turn.',
        );
      throw new FlightlogError(
        'too-many-requests',
        'Too many requests of yours are waiting to be served; send this one again later.',
        { retryAfterSeconds: admission.retryAfterSeconds },
      );
    }
    const waitedMs = performance.now() - started;
    if (waitedMs >= 1) metrics.admissionWait.observe(waitedMs / 1000);
    slots.set(request, admission.release);
  });
  // a handler that hijacks its reply gets no onSend: its slot is free when it returns at the latest
  onHandlerEnd(app, (request) => slots.get(request)?.());
  app.addHook('onSend', async (request, _reply, payload) => {
    slots.get(request)?.();
    return payload;
  });
}

/**
 * Frees the request's slot now: for a reply taken over by its handler (a live stream), once
 * set up. What it sends from then on is paced by its client and bounded by the stream limits.
 */
export function releaseAdmission(request: FastifyRequest): void {
  slots.get(request)?.();
}
