import {
  AgentNameSchema,
  AgentRenameSchema,
  CreatedAgentSchema,
  IDENTIFIER_RULE,
  Identifier,
  ProblemSchema,
  MemberUserIdSchema,
  StringEnum,
} from '@flightlog/protocol';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import {
  ADMIN_PAGE_DEFAULT,
  ADMIN_PAGE_MAX,
  createAgent,
  createKey,
  deleteAgent,
  getAgent,
  grantMember,
  listKeys,
  listMembers,
  renameAgent,
  revokeKey,
  revokeMember,
  type PageOutcome,
} from '../agents/agent-admin.js';
import type { ApiKeyResolver } from '../auth/api-key-resolver.js';
import type { ShareLinks } from '../sharing/share-links.js';
import { adminShareRoutes } from './share-routes.js';
import type { KeyGuessLimiter } from '../auth/key-guess-limiter.js';
import { FlightlogError } from '../errors/flightlog-error.js';
import type { LiveBus } from '../live/live-bus.js';
import type { StreamAccessGuard } from '../live/stream-access-guard.js';
import { MEMBER_ROLES } from '../store/agent-store.js';
import type { Store } from '../store/open-store.js';
import { requireAdmin } from './authentication.js';
import {
  lifecycleAdminRoutes,
  type LifecycleAdminRoutesOptions,
} from './lifecycle-admin-routes.js';

export interface AdminRoutesOptions {
  store: Store;
  adminToken: string;
  /** Refusals answer as a route that does not exist (a token derived from the local secret). */
  hidden?: boolean;
  apiKeys: ApiKeyResolver;
  /** Ends this instance's live streams of a removed member or deleted agent at once. */
  streamAccess: Pick<StreamAccessGuard, 'memberRemoved' | 'agentDeleted'>;
  /** Its buffer of a deleted agent is dropped. */
  bus: Pick<LiveBus, 'forget'>;
  /** Wrong admin tokens per client address, apart from wrong API keys. */
  tokenGuesses: KeyGuessLimiter;
  /** Called for each request refused with `429` by `tokenGuesses`. */
  onGuessRefused: () => void;
  /** The data lifecycle's admin routes (lifecycle-admin-routes.ts), behind the same token. */
  lifecycle?: Omit<LifecycleAdminRoutesOptions, 'store'>;
  /** Sharing any run (share-routes.ts), behind the same token. */
  shares?: ShareLinks;
}

const AgentParams = Type.Object({ id: Type.String({ maxLength: 1024 }) });
const MemberParams = Type.Object({
  id: Type.String({ maxLength: 1024 }),
  userId: MemberUserIdSchema,
});
const problems = {
  400: ProblemSchema,
  401: ProblemSchema,
  404: ProblemSchema,
  409: ProblemSchema,
  429: ProblemSchema,
};
const noAgent = () => new FlightlogError('not-found', 'No agent with this id.');
export const PageQuery = Type.Object(
  {
    limit: Type.Optional(Type.String({ maxLength: 10 })),
    cursor: Type.Optional(Type.String({ maxLength: 1024 })),
  },
  { additionalProperties: false },
);

/** `limit` as a number, or the `400` naming it. */
export function pageLimit(text: string | undefined): number {
  if (text === undefined) return ADMIN_PAGE_DEFAULT;
  const limit = Number(text);
  if (!/^\d+$/.test(text) || limit < 1 || limit > ADMIN_PAGE_MAX)
    throw new FlightlogError('validation-failed', 'The request does not match the schema.', {
      fieldErrors: [
        {
          pointer: '/querystring/limit',
          detail: `must be a whole number from 1 to ${ADMIN_PAGE_MAX}`,
        },
      ],
    });
  return limit;
}

/** The page of an outcome, or the `400` / `404` it stands for. */
export function pageOrThrow<T>(outcome: PageOutcome<T>): { items: T[]; nextCursor: string | null } {
  if (outcome.kind === 'no-agent') throw noAgent();
  if (outcome.kind === 'bad-cursor')
    throw new FlightlogError('validation-failed', 'The request does not match the schema.', {
      fieldErrors: [
        { pointer: '/querystring/cursor', detail: 'is not a cursor returned by this endpoint' },
      ],
    });
  return outcome.page;
}

/** Agent, key and member administration; registered only when ADMIN_TOKEN is set. */
export const adminRoutes: FastifyPluginAsyncTypebox<AdminRoutesOptions> = async (app, options) => {
  const { agents } = options.store;
  app.addHook(
    'onRequest',
    requireAdmin(
      options.adminToken,
      options.tokenGuesses,
      options.onGuessRefused,
      options.hidden === true,
    ),
  );

  app.post(
    '/admin/v1/agents',
    {
      schema: {
        summary: 'Create an agent with its first API key and a verify token (shown once)',
        body: Type.Object(
          {
            id: Type.Optional(Identifier),
            name: Type.Optional(AgentNameSchema),
          },
          { additionalProperties: false },
        ),
        response: {
          201: CreatedAgentSchema,
          ...problems,
        },
      },
      preValidation: async (request) => {
        if (request.body === undefined || request.body === null) request.body = {};
      },
    },
    async (request, reply) => {
      const outcome = await createAgent(agents, request.body);
      if (outcome.kind === 'invalid-id')
        throw new FlightlogError('validation-failed', 'The request does not match the schema.', {
          fieldErrors: [{ pointer: '/id', detail: `must be ${IDENTIFIER_RULE}` }],
        });
      if (outcome.kind === 'exists')
        throw new FlightlogError('id-conflict', 'An agent with this id exists already.', {
          fieldErrors: [{ pointer: '/id', detail: 'is already in use' }],
        });
      return reply.code(201).send(outcome.agent);
    },
  );

  app.get(
    '/admin/v1/agents/:id',
    {
      schema: {
        summary:
          'An agent with the first 100 of its keys (ids only) and of its members, and the ' +
          'cursors of the rest',
        params: AgentParams,
      },
    },
    async (request) => {
      const agent = await getAgent(agents, request.params.id);
      if (!agent) throw noAgent();
      return agent;
    },
  );

  app.patch(
    '/admin/v1/agents/:id',
    {
      schema: {
        summary: 'Rename an agent (null or a blank name clears it)',
        params: AgentParams,
        body: AgentRenameSchema,
      },
    },
    async (request) => {
      const agent = await renameAgent(agents, request.params.id, request.body.name);
      if (!agent) throw noAgent();
      return agent;
    },
  );

  app.get(
    '/admin/v1/agents/:id/keys',
    {
      schema: {
        summary: "A page of an agent's keys (ids only), in the order they were issued",
        params: AgentParams,
        querystring: PageQuery,
      },
    },
    async (request) => {
      const { cursor, limit } = request.query;
      const page = pageOrThrow(
        await listKeys(agents, request.params.id, { cursor, limit: pageLimit(limit) }),
      );
      return { keys: page.items, nextCursor: page.nextCursor };
    },
  );

  app.get(
    '/admin/v1/agents/:id/members',
    {
      schema: {
        summary: "A page of an agent's members, in user id order",
        params: AgentParams,
        querystring: PageQuery,
      },
    },
    async (request) => {
      const { cursor, limit } = request.query;
      const page = pageOrThrow(
        await listMembers(agents, request.params.id, { cursor, limit: pageLimit(limit) }),
      );
      return { members: page.items, nextCursor: page.nextCursor };
    },
  );

  app.delete(
    '/admin/v1/agents/:id',
    {
      schema: {
        summary:
          'Delete an agent with its keys, members, traces and analyses (its keys are refused ' +
          'and its live streams end everywhere within 5 s)',
        params: AgentParams,
      },
    },
    async (request, reply) => {
      const { id } = request.params;
      const deleted = await deleteAgent(agents, id, {
        keys: options.apiKeys,
        streams: options.streamAccess,
        bus: options.bus,
        onBusError: (error) =>
          request.log.warn({ err: error, agentId: id }, 'live buffer of a deleted agent kept'),
      });
      if (!deleted) throw noAgent();
      return reply.code(204).send();
    },
  );

  app.post(
    '/admin/v1/agents/:id/keys',
    {
      schema: {
        summary: 'Issue another API key for an agent (shown once)',
        params: AgentParams,
        response: {
          201: Type.Object({ keyId: Type.String(), apiKey: Type.String() }),
          ...problems,
        },
      },
    },
    async (request, reply) => {
      const key = await createKey(agents, request.params.id);
      if (!key) throw noAgent();
      return reply.code(201).send(key);
    },
  );

  app.delete(
    '/admin/v1/keys/:keyId',
    {
      schema: {
        summary: 'Revoke an API key (refused everywhere within 5 s)',
        params: Type.Object({ keyId: Type.String({ maxLength: 1024 }) }),
      },
    },
    async (request, reply) => {
      if (!(await revokeKey(agents, request.params.keyId)))
        throw new FlightlogError('not-found', 'No API key with this id.');
      options.apiKeys.forgetKey(request.params.keyId);
      return reply.code(204).send();
    },
  );

  app.put(
    '/admin/v1/agents/:id/members/:userId',
    {
      schema: {
        summary: 'Grant a user a role on an agent (or change it)',
        params: MemberParams,
        body: Type.Object({ role: StringEnum(MEMBER_ROLES) }, { additionalProperties: false }),
      },
    },
    async (request) => {
      const { id, userId } = request.params;
      if (!(await grantMember(agents, id, userId, request.body.role))) throw noAgent();
      return { agentId: id, userId, role: request.body.role };
    },
  );

  app.delete(
    '/admin/v1/agents/:id/members/:userId',
    { schema: { summary: "Remove a user's role on an agent", params: MemberParams } },
    async (request, reply) => {
      const { id, userId } = request.params;
      if (!(await revokeMember(agents, id, userId)))
        throw new FlightlogError('not-found', 'This user has no role on this agent.');
      // other instances end theirs at their next access check
      options.streamAccess.memberRemoved(id, userId);
      return reply.code(204).send();
    },
  );

  if (options.lifecycle)
    await app.register(lifecycleAdminRoutes, { store: options.store, ...options.lifecycle });
  if (options.shares) await app.register(adminShareRoutes, { shares: options.shares });
};
