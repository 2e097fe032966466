import { ProblemSchema } from '@flightlog/protocol';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { FlightlogError } from '../errors/flightlog-error.js';
import { changeLifecycleSettings, readLifecycleSettings } from '../lifecycle/agent-settings.js';
import {
  RETENTION_MAX_DAYS,
  RUN_TIMEOUT_MAX_MS,
  type LifecycleConfig,
} from '../lifecycle/lifecycle-config.js';
import { deleteRun, type RunDeletionContext } from '../lifecycle/run-deletion.js';
import type { Store } from '../store/open-store.js';
import { deletionAnswered } from './lifecycle-routes.js';

export interface LifecycleAdminRoutesOptions {
  store: Store;
  /** The server's defaults, which an agent's null settings take. */
  defaults: LifecycleConfig;
  deletion: RunDeletionContext;
  /** Told of each run deleted (metrics). */
  onRunDeleted?: () => void;
}

const AgentParams = Type.Object({ id: Type.String({ maxLength: 1024 }) });
const Nullable = <T extends ReturnType<typeof Type.Integer>>(schema: T) =>
  Type.Union([schema, Type.Null()]);

export const LifecycleSettingsSchema = Type.Object({
  agentId: Type.String(),
  runTimeoutMs: Nullable(Type.Integer()),
  retentionDays: Nullable(Type.Integer()),
  effective: Type.Object({
    runTimeoutMs: Nullable(Type.Integer()),
    retentionDays: Nullable(Type.Integer()),
  }),
});

const problems = {
  400: ProblemSchema,
  401: ProblemSchema,
  404: ProblemSchema,
  429: ProblemSchema,
};
const noAgent = () => new FlightlogError('not-found', 'No agent with this id.');

/**
 * The data lifecycle in the admin API: an agent's run time-out and retention, deleting a run. Registered
 * inside adminRoutes, whose admin token check it shares.
 */
export const lifecycleAdminRoutes: FastifyPluginAsyncTypebox<LifecycleAdminRoutesOptions> = async (
  app,
  { store, defaults, deletion, onRunDeleted },
) => {
  app.delete(
    '/admin/v1/traces/:id',
    {
      schema: {
        summary:
          "Delete any agent's run everywhere it is stored: events, analysis, live replay; a " +
          'batch of it arriving later does not write it back',
        params: Type.Object({ id: Type.String({ maxLength: 1024 }) }),
      },
    },
    async (request, reply) => {
      const outcome = await deleteRun(deletion, { kind: 'admin' }, request.params.id);
      if (outcome.kind === 'live-not-cleared')
        request.log.warn(
          { err: outcome.error, agentId: outcome.agentId },
          'live buffer not cleared',
        );
      deletionAnswered(outcome);
      onRunDeleted?.();
      return reply.code(204).send();
    },
  );

  app.get(
    '/admin/v1/agents/:id/lifecycle',
    {
      schema: {
        summary:
          "An agent's run time-out and retention: its own (null: the server's default) and " +
          'in force',
        params: AgentParams,
        response: { 200: LifecycleSettingsSchema, ...problems },
      },
    },
    async (request) => {
      const settings = await readLifecycleSettings(store.lifecycle, defaults, request.params.id);
      if (!settings) throw noAgent();
      return settings;
    },
  );

  app.patch(
    '/admin/v1/agents/:id/lifecycle',
    {
      schema: {
        summary:
          "Change an agent's run time-out (ms without a batch) or retention (days): 0 never, " +
          "null the server's default; absent fields stay as they are",
        params: AgentParams,
        body: Type.Object(
          {
            runTimeoutMs: Type.Optional(
              Nullable(Type.Integer({ minimum: 0, maximum: RUN_TIMEOUT_MAX_MS })),
            ),
            retentionDays: Type.Optional(
              Nullable(Type.Integer({ minimum: 0, maximum: RETENTION_MAX_DAYS })),
            ),
          },
          { additionalProperties: false },
        ),
        response: { 200: LifecycleSettingsSchema, ...problems },
      },
    },
    async (request) => {
      const settings = await changeLifecycleSettings(
        store.lifecycle,
        defaults,
        request.params.id,
        request.body,
      );
      if (!settings) throw noAgent();
      return settings;
    },
  );
};
