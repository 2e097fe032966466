import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { IdentityVerifier } from '../auth/identity.js';
import { FlightlogError } from '../errors/flightlog-error.js';
import {
  deleteRun,
  type RunDeletionContext,
  type RunDeletionOutcome,
} from '../lifecycle/run-deletion.js';
import { requireUser, userOf } from './authentication.js';

export interface LifecycleRoutesOptions {
  identity: IdentityVerifier;
  deletion: RunDeletionContext;
  /** Told of each run deleted (metrics). */
  onRunDeleted?: () => void;
}

const TraceParams = Type.Object({ id: Type.String({ maxLength: 1024 }) });

/** The `204` of a finished deletion, or the problem its outcome stands for. */
export function deletionAnswered(outcome: RunDeletionOutcome): void {
  if (outcome.kind === 'not-found')
    throw new FlightlogError('not-found', 'No such trace, or you have no access to it.');
  if (outcome.kind === 'forbidden')
    throw new FlightlogError('forbidden', 'Only owners of this agent delete its runs.');
  if (outcome.kind === 'live-not-cleared')
    throw new FlightlogError(
      'live-unavailable',
      'The run is deleted from the store, but the live buffer could not be reached to remove ' +
        'it from replays; send this request again.',
      { retryAfterSeconds: 1 },
    );
}

/**
 * The data lifecycle for dashboard users (identity JWT): deleting a run (owners). Thin: each
 * route calls one function of lifecycle/.
 */
export const lifecycleRoutes: FastifyPluginAsyncTypebox<LifecycleRoutesOptions> = async (
  app,
  options,
) => {
  app.addHook('onRequest', requireUser(options.identity));

  app.delete(
    '/v1/traces/:id',
    {
      schema: {
        summary:
          'Delete a run everywhere it is stored: events, analysis, live replay (owners); a ' +
          'batch of it arriving later does not write it back',
        params: TraceParams,
      },
    },
    async (request, reply) => {
      const outcome = await deleteRun(
        options.deletion,
        { kind: 'user', userId: userOf(request) },
        request.params.id,
      );
      if (outcome.kind === 'live-not-cleared')
        request.log.warn(
          { err: outcome.error, agentId: outcome.agentId },
          'live buffer not cleared',
        );
      deletionAnswered(outcome);
      options.onRunDeleted?.();
      return reply.code(204).send();
    },
  );
};
