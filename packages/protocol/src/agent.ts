import { Type, type Static } from '@sinclair/typebox';
import { Count, Identifier, IsoDateTime, Nullable, StringEnum, Text } from './primitives.js';

/** A dashboard user's role on an agent. */
export const MEMBER_ROLES = ['owner', 'editor', 'viewer'] as const;
export type MemberRole = (typeof MEMBER_ROLES)[number];

/** An agent's API key as the admin and owner APIs list it (ids only, never the key). */
export interface AgentKey {
  keyId: string;
  createdAt: string;
  revokedAt: string | null;
}

/** A user's role on an agent, as the admin and owner APIs list members. */
export interface AgentMember {
  userId: string;
  role: MemberRole;
}

/**
 * Counts stop here: `traceCount` of an agent with more traces is this number, with
 * `traceCountCapped` true ("10,000+"), so that a page of agents costs at most this many index
 * entries per agent, however many traces each has.
 */
export const TRACE_COUNT_CAP = 10_000;

/** One agent the caller has a role on, as `GET /v1/agents` lists it. */
export const AgentSummarySchema = Type.Object(
  {
    agentId: Identifier,
    name: Nullable(Type.String()),
    /** The caller's role on the agent. */
    role: StringEnum(MEMBER_ROLES),
    /** When the agent's first batch carried its verify token; null until then. */
    verifiedAt: Nullable(IsoDateTime),
    createdAt: IsoDateTime,
    /** The agent's traces, up to TRACE_COUNT_CAP. */
    traceCount: Count,
    /** True when the agent has more than TRACE_COUNT_CAP traces (traceCount is then the cap). */
    traceCountCapped: Type.Boolean(),
    /** `startedAt` of the agent's newest trace (the first of its runs list); null without one. */
    lastTraceAt: Nullable(IsoDateTime),
  },
  { additionalProperties: false },
);
export type AgentSummary = Static<typeof AgentSummarySchema>;

/** Body of `GET /v1/agents`: one page of the caller's agents, by agent id. */
export const AgentListSchema = Type.Object(
  {
    agents: Type.Array(AgentSummarySchema),
    /** Where the next page starts; null on the last page. */
    nextCursor: Nullable(Type.String()),
  },
  { additionalProperties: false },
);
export type AgentList = Static<typeof AgentListSchema>;

/**
 * Characters a member's user id never holds: controls (C0, DEL, C1), zero-width and bidi
 * formatting characters, the byte-order mark, NUL and lone surrogates. Each can make two ids
 * that look the same on a page (`mallory` and `mallory\u200B`, or text reversed by U+202E) or
 * one that looks empty, so a grant could seem to name someone it does not.
 */
const HIDDEN_CHARACTERS =
  '\\u0000-\\u001F\\u007F-\\u009F\\u200B-\\u200F\\u202A-\\u202E\\u2060-\\u2069\\uFEFF\\uD800-\\uDFFF';

/**
 * A member's user id (the identity token's `sub`) as the owner and admin APIs take it: 1 to 256
 * characters, none hidden (see above), not starting or ending with white space.
 */
export const MemberUserIdSchema = Type.String({
  minLength: 1,
  maxLength: 256,
  pattern: `^(?!\\s)(?![\\s\\S]*\\s$)[^${HIDDEN_CHARACTERS}]+$`,
});

const MEMBER_USER_ID = new RegExp(MemberUserIdSchema.pattern as string, 'u');

/** Whether `value` is a user id a member may have (MemberUserIdSchema), for callers without Ajv. */
export function isMemberUserId(value: string): boolean {
  return value.length <= 256 && MEMBER_USER_ID.test(value);
}

/** An agent's display name, as the admin and owner APIs take it. */
export const AgentNameSchema = Text(256);

/**
 * Body of renaming an agent (`PATCH /v1/agents/:id`, `PATCH /admin/v1/agents/:id`): the new
 * name; `null`, `""` or a name of only white space clears it (the agent is then shown by its id).
 */
export const AgentRenameSchema = Type.Object(
  { name: Nullable(AgentNameSchema) },
  { additionalProperties: false },
);
export type AgentRename = Static<typeof AgentRenameSchema>;

/** `201` of creating an agent (admin or owner API): its key and verify token, shown once. */
export const CreatedAgentSchema = Type.Object({
  agentId: Type.String(),
  apiKey: Type.String(),
  verifyToken: Type.String(),
});
export type CreatedAgent = Static<typeof CreatedAgentSchema>;
