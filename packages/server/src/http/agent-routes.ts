import {
  AgentNameSchema,
  AgentRenameSchema,
  CreatedAgentSchema,
  IsoDateTime,
  ProblemSchema,
  MemberUserIdSchema,
  StringEnum,
} from '@flightlog/protocol';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import {
  changeOwnedMember,
  createOwnedAgent,
  createOwnedKey,
  listOwnedKeys,
  listOwnedMembers,
  mayCreateAgents,
  readMemberAgent,
  renameOwnedAgent,
  revokeOwnedKey,
  type Refusal,
} from '../agents/agent-owner.js';
import type { IdentityVerifier } from '../auth/identity.js';
import { FlightlogError } from '../errors/flightlog-error.js';
import type { StreamAccessGuard } from '../live/stream-access-guard.js';
import { MEMBER_ROLES } from '../store/agent-store.js';
import type { Store } from '../store/open-store.js';
import { PageQuery, pageLimit, pageOrThrow } from './admin-routes.js';
import { requireUser, userOf } from './authentication.js';

export interface AgentRoutesOptions {
  store: Store;
  identity: IdentityVerifier;
  /** User ids that may create agents (AGENT_CREATORS). */
  agentCreators: readonly string[];
  /** Revoked keys leave this instance's cache at once. */
  apiKeys: { forgetKey(keyId: string): void };
  /** A removed member's live streams on this instance end at once. */
  streamAccess: Pick<StreamAccessGuard, 'memberRemoved'>;
}

const AgentParams = Type.Object({ id: Type.String({ maxLength: 1024 }) });
const KeyParams = Type.Object({
  id: Type.String({ maxLength: 1024 }),
  keyId: Type.String({ maxLength: 1024 }),
});
const MemberParams = Type.Object({
  id: Type.String({ maxLength: 1024 }),
  userId: MemberUserIdSchema,
});
const problems = {
  400: ProblemSchema,
  401: ProblemSchema,
  403: ProblemSchema,
  404: ProblemSchema,
  409: ProblemSchema,
};

const ONLY_OWNERS = 'Only owners of this agent manage its name, keys and members.';

/** An agent as a member sees it, with the caller's role. */
const MemberAgentSchema = Type.Object({
  id: Type.String(),
  name: Type.Union([Type.String(), Type.Null()]),
  createdAt: IsoDateTime,
  verifiedAt: Type.Union([IsoDateTime, Type.Null()]),
  role: StringEnum(MEMBER_ROLES),
});

/** The `403` or `404` a refusal stands for (the `404` says no more than the read API's). */
function refused(refusal: Refusal): FlightlogError {
  return refusal.kind === 'forbidden'
    ? new FlightlogError('forbidden', ONLY_OWNERS)
    : new FlightlogError('not-found', 'No such agent, or you have no access to it.');
}

function isRefusal(outcome: { kind: string }): outcome is Refusal {
  return outcome.kind === 'forbidden' || outcome.kind === 'not-found';
}

/**
 * Onboarding and owner management from the dashboard, authenticated by identity JWT: users in
 * AGENT_CREATORS create agents (and own them); owners issue and revoke keys and manage members.
 * The dashboard uses these like any other client.
 */
export const agentRoutes: FastifyPluginAsyncTypebox<AgentRoutesOptions> = async (app, options) => {
  const { agents } = options.store;
  app.addHook('onRequest', requireUser(options.identity));

  app.get(
    '/v1/me',
    {
      schema: {
        summary: 'Who the identity token names, and whether they may create agents',
        response: {
          200: Type.Object({ userId: Type.String(), canCreateAgents: Type.Boolean() }),
          401: ProblemSchema,
        },
      },
    },
    async (request) => {
      const userId = userOf(request);
      return { userId, canCreateAgents: mayCreateAgents(options.agentCreators, userId) };
    },
  );

  app.post(
    '/v1/agents',
    {
      schema: {
        summary:
          'Create an agent owned by the caller (AGENT_CREATORS only), with its first API key ' +
          'and a verify token (shown once)',
        body: Type.Object(
          { name: Type.Optional(AgentNameSchema) },
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
      const outcome = await createOwnedAgent(
        agents,
        options.agentCreators,
        userOf(request),
        request.body.name,
      );
      if (outcome.kind === 'forbidden')
        throw new FlightlogError(
          'forbidden',
          'You may not create agents here: the server lists who may in AGENT_CREATORS.',
        );
      return reply.code(201).send(outcome.agent);
    },
  );

  app.get(
    '/v1/agents/:id',
    {
      schema: {
        summary: 'An agent as its member sees it: name, verification, the caller’s role',
        params: AgentParams,
        response: {
          200: MemberAgentSchema,
          401: ProblemSchema,
          404: ProblemSchema,
        },
      },
    },
    async (request) => {
      const agent = await readMemberAgent(agents, userOf(request), request.params.id);
      if (!agent) throw refused({ kind: 'not-found' });
      return agent;
    },
  );

  app.patch(
    '/v1/agents/:id',
    {
      schema: {
        summary: 'Rename an agent (owners; null or a blank name clears it)',
        params: AgentParams,
        body: AgentRenameSchema,
        response: { 200: MemberAgentSchema, ...problems },
      },
    },
    async (request) => {
      const outcome = await renameOwnedAgent(
        agents,
        userOf(request),
        request.params.id,
        request.body.name,
      );
      if (isRefusal(outcome)) throw refused(outcome);
      return outcome.agent;
    },
  );

  app.get(
    '/v1/agents/:id/keys',
    {
      schema: {
        summary: "A page of an agent's keys (ids only), in the order they were issued (owners)",
        params: AgentParams,
        querystring: PageQuery,
      },
    },
    async (request) => {
      const { cursor, limit } = request.query;
      const outcome = await listOwnedKeys(agents, userOf(request), request.params.id, {
        cursor,
        limit: pageLimit(limit),
      });
      if (isRefusal(outcome)) throw refused(outcome);
      const page = pageOrThrow(outcome);
      return { keys: page.items, nextCursor: page.nextCursor };
    },
  );

  app.post(
    '/v1/agents/:id/keys',
    {
      schema: {
        summary: 'Issue another API key for an agent (owners; shown once)',
        params: AgentParams,
        response: {
          201: Type.Object({ keyId: Type.String(), apiKey: Type.String() }),
          ...problems,
        },
      },
    },
    async (request, reply) => {
      const outcome = await createOwnedKey(agents, userOf(request), request.params.id);
      if (isRefusal(outcome)) throw refused(outcome);
      return reply.code(201).send(outcome.key);
    },
  );

  app.delete(
    '/v1/agents/:id/keys/:keyId',
    {
      schema: {
        summary: "Revoke one of an agent's API keys (owners; refused everywhere within 5 s)",
        params: KeyParams,
      },
    },
    async (request, reply) => {
      const { id, keyId } = request.params;
      const outcome = await revokeOwnedKey(agents, userOf(request), id, keyId, options.apiKeys);
      if (isRefusal(outcome)) throw refused(outcome);
      if (outcome.kind === 'no-key')
        throw new FlightlogError('not-found', 'This agent has no API key with this id.');
      return reply.code(204).send();
    },
  );

  app.get(
    '/v1/agents/:id/members',
    {
      schema: {
        summary: "A page of an agent's members, in user id order (owners)",
        params: AgentParams,
        querystring: PageQuery,
      },
    },
    async (request) => {
      const { cursor, limit } = request.query;
      const outcome = await listOwnedMembers(agents, userOf(request), request.params.id, {
        cursor,
        limit: pageLimit(limit),
      });
      if (isRefusal(outcome)) throw refused(outcome);
      const page = pageOrThrow(outcome);
      return { members: page.items, nextCursor: page.nextCursor };
    },
  );

  app.put(
    '/v1/agents/:id/members/:userId',
    {
      schema: {
        summary: 'Grant a user a role on an agent, or change it (owners; never the last owner)',
        params: MemberParams,
        body: Type.Object({ role: StringEnum(MEMBER_ROLES) }, { additionalProperties: false }),
      },
    },
    async (request) => {
      const { id, userId } = request.params;
      const outcome = await changeOwnedMember(
        agents,
        userOf(request),
        id,
        userId,
        request.body.role,
        options.streamAccess,
      );
      throwUnlessDone(outcome);
      return { agentId: id, userId, role: request.body.role };
    },
  );

  app.delete(
    '/v1/agents/:id/members/:userId',
    {
      schema: {
        summary: "Remove a user's role on an agent (owners; never the last owner)",
        params: MemberParams,
      },
    },
    async (request, reply) => {
      const { id, userId } = request.params;
      const outcome = await changeOwnedMember(
        agents,
        userOf(request),
        id,
        userId,
        null,
        options.streamAccess,
      );
      throwUnlessDone(outcome);
      return reply.code(204).send();
    },
  );
};

function throwUnlessDone(outcome: Awaited<ReturnType<typeof changeOwnedMember>>): void {
  if (isRefusal(outcome)) throw refused(outcome);
  if (outcome.kind === 'no-member')
    throw new FlightlogError('not-found', 'This user has no role on this agent.');
  if (outcome.kind === 'last-owner')
    throw new FlightlogError(
      'last-owner',
      'This is the last owner of the agent: make another member an owner first.',
    );
}
