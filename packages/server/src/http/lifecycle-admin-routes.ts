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
import { AUDIT_ACTIONS } from '../store/audit-store.js';
import type { Store } from '../store/open-store.js';
import { decodePageCursor, encodePageCursor } from '../store/page-cursor.js';
import {
  EXPORT_PROBLEMS,
  EXPORT_SUMMARY,
  ExportQuerySchema,
  exportRangeOrThrow,
  sendExport,
  type ExportStreaming,
} from './export-routes.js';
import { deletionAnswered } from './lifecycle-routes.js';

export interface LifecycleAdminRoutesOptions {
  store: Store;
  /** The server's defaults, which an agent's null settings take. */
  defaults: LifecycleConfig;
  deletion: RunDeletionContext;
  /** Told of each run deleted (metrics). */
  onRunDeleted?: () => void;
  /** Exports share the instance's slots with the users' (export-routes.ts). */
  exports: ExportStreaming;
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

/** Audit entries per page: `limit` 1–200, 100 unless asked (as the admin API's other lists). */
const AUDIT_PAGE_DEFAULT = 100;
const AUDIT_PAGE_MAX = 200;

const AuditEntrySchema = Type.Object({
  id: Type.String(),
  at: Type.String(),
  actor: Type.String(),
  action: Type.Union(AUDIT_ACTIONS.map((action) => Type.Literal(action))),
  agentId: Type.Union([Type.String(), Type.Null()]),
  traceId: Type.Union([Type.String(), Type.Null()]),
  details: Type.Record(Type.String(), Type.Unknown()),
});

const badQuery = (pointer: string, detail: string) =>
  new FlightlogError('validation-failed', 'The request does not match the schema.', {
    fieldErrors: [{ pointer, detail }],
  });

const problems = {
  400: ProblemSchema,
  401: ProblemSchema,
  404: ProblemSchema,
  429: ProblemSchema,
};
const noAgent = () => new FlightlogError('not-found', 'No agent with this id.');

/**
 * The data lifecycle in the admin API: an agent's run time-out and retention, deleting a run,
 * the audit log, exporting an agent's runs. Registered inside adminRoutes, whose admin token
 * check it shares.
 */
export const lifecycleAdminRoutes: FastifyPluginAsyncTypebox<LifecycleAdminRoutesOptions> = async (
  app,
  { store, defaults, deletion, onRunDeleted, exports },
) => {
  app.get(
    '/admin/v1/agents/:id/export',
    {
      schema: {
        summary: `${EXPORT_SUMMARY}. Any agent: what flightlog export reads from a running server`,
        params: AgentParams,
        querystring: ExportQuerySchema,
        response: EXPORT_PROBLEMS,
      },
    },
    async (request, reply) => {
      const range = exportRangeOrThrow(request.query);
      const agentId = request.params.id;
      if (!(await store.agents.getAgent(agentId))) throw noAgent();
      return sendExport(request, reply, exports, store.exports, agentId, range);
    },
  );

  app.get(
    '/admin/v1/audit',
    {
      schema: {
        summary:
          'The audit log, newest first: every deletion (runs, agents, expired runs) and change ' +
          "of an agent's lifecycle settings, who did it and when; of one agent with agentId",
        querystring: Type.Object(
          {
            agentId: Type.Optional(Type.String({ maxLength: 1024 })),
            limit: Type.Optional(Type.String({ maxLength: 10 })),
            cursor: Type.Optional(Type.String({ maxLength: 1024 })),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({
            entries: Type.Array(AuditEntrySchema),
            nextCursor: Type.Union([Type.String(), Type.Null()]),
          }),
          ...problems,
        },
      },
    },
    async (request) => {
      const { agentId, cursor } = request.query;
      const text = request.query.limit;
      const limit = text === undefined ? AUDIT_PAGE_DEFAULT : Number(text);
      if (text !== undefined && (!/^\d+$/.test(text) || limit < 1 || limit > AUDIT_PAGE_MAX))
        throw badQuery('/querystring/limit', `must be a whole number from 1 to ${AUDIT_PAGE_MAX}`);
      let before: string | undefined;
      if (cursor !== undefined) {
        before = decodePageCursor(
          cursor,
          (kind) => kind === 'audit',
          (id) => /^\d{1,18}$/.test(id),
        )?.[1];
        if (before === undefined)
          throw badQuery('/querystring/cursor', 'is not a cursor returned by this endpoint');
      }
      const rows = await store.audit.list({ agentId, before, limit: limit + 1 });
      const entries = rows.slice(0, limit);
      const last = entries.at(-1);
      return {
        entries,
        nextCursor: rows.length > limit && last ? encodePageCursor('audit', last.id) : null,
      };
    },
  );

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
        'admin',
      );
      if (!settings) throw noAgent();
      return settings;
    },
  );
};
