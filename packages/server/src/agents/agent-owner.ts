import type {
  AgentKey,
  AgentMember,
  AgentRow,
  AgentStore,
  MemberRole,
} from '../store/agent-store.js';
import {
  createAgent,
  createKey,
  listKeys,
  listMembers,
  renameAgent,
  type CreatedAgent,
  type PageOutcome,
  type PageQuery,
} from './agent-admin.js';

/**
 * What a user may do with one agent through the owner API: an owner manages it; any other
 * role learns only that it may not (`forbidden`); without a role the agent is `not-found`, as
 * the read API hides whether it exists.
 */
export type Refusal = { kind: 'forbidden' } | { kind: 'not-found' };

async function refusal(
  agents: AgentStore,
  userId: string,
  agentId: string,
): Promise<Refusal | undefined> {
  const role = await agents.roleOf(userId, agentId);
  if (role === undefined) return { kind: 'not-found' };
  return role === 'owner' ? undefined : { kind: 'forbidden' };
}

/** Whether `userId` may create agents: listed in AGENT_CREATORS. */
export const mayCreateAgents = (creators: readonly string[], userId: string) =>
  creators.includes(userId);

/**
 * Creates an agent owned by its creator (one transaction: no agent is ever left without its
 * owner), with the same key and verify token as the admin API's.
 */
export async function createOwnedAgent(
  agents: AgentStore,
  creators: readonly string[],
  userId: string,
  name: string | undefined,
): Promise<{ kind: 'created'; agent: CreatedAgent } | { kind: 'forbidden' }> {
  if (!mayCreateAgents(creators, userId)) return { kind: 'forbidden' };
  const outcome = await createAgent(agents, { name, ownerId: userId });
  // a generated ULID: neither a conflict nor an invalid id can happen
  if (outcome.kind !== 'created') throw new Error(`agent creation failed: ${outcome.kind}`);
  return outcome;
}

/** An agent as a member of any role sees it, with that role. */
export async function readMemberAgent(
  agents: AgentStore,
  userId: string,
  agentId: string,
): Promise<(AgentRow & { role: MemberRole }) | undefined> {
  const role = await agents.roleOf(userId, agentId);
  if (role === undefined) return undefined;
  const agent = await agents.getAgent(agentId);
  return agent && { ...agent, role };
}

/** Renames the agent (see {@link renameAgent}); the agent as its owner now sees it. */
export async function renameOwnedAgent(
  agents: AgentStore,
  userId: string,
  agentId: string,
  name: string | null,
): Promise<Refusal | { kind: 'renamed'; agent: AgentRow & { role: MemberRole } }> {
  const refused = await refusal(agents, userId, agentId);
  if (refused) return refused;
  const agent = await renameAgent(agents, agentId, name);
  // deleted between the role check and the update: as if it never was
  return agent ? { kind: 'renamed', agent: { ...agent, role: 'owner' } } : { kind: 'not-found' };
}

export async function listOwnedKeys(
  agents: AgentStore,
  userId: string,
  agentId: string,
  query: PageQuery,
): Promise<Refusal | PageOutcome<AgentKey>> {
  return (await refusal(agents, userId, agentId)) ?? listKeys(agents, agentId, query);
}

export async function listOwnedMembers(
  agents: AgentStore,
  userId: string,
  agentId: string,
  query: PageQuery,
): Promise<Refusal | PageOutcome<AgentMember>> {
  return (await refusal(agents, userId, agentId)) ?? listMembers(agents, agentId, query);
}

export async function createOwnedKey(
  agents: AgentStore,
  userId: string,
  agentId: string,
): Promise<Refusal | { kind: 'created'; key: { keyId: string; apiKey: string } }> {
  const refused = await refusal(agents, userId, agentId);
  if (refused) return refused;
  const key = await createKey(agents, agentId);
  // deleted between the role check and the insert: as if it never was
  return key ? { kind: 'created', key } : { kind: 'not-found' };
}

/**
 * Revokes one of the agent's keys, then drops it from this instance's key cache, as the admin
 * API does: refused here at once, on other instances within API_KEY_CACHE_MS.
 */
export async function revokeOwnedKey(
  agents: AgentStore,
  userId: string,
  agentId: string,
  keyId: string,
  keys: { forgetKey(keyId: string): void },
): Promise<Refusal | { kind: 'revoked' } | { kind: 'no-key' }> {
  const refused = await refusal(agents, userId, agentId);
  if (refused) return refused;
  if (!(await agents.revokeAgentKey(agentId, keyId))) return { kind: 'no-key' };
  keys.forgetKey(keyId);
  return { kind: 'revoked' };
}

export type MemberChange =
  Refusal | { kind: 'done' } | { kind: 'no-member' } | { kind: 'last-owner' };

/**
 * Grants `role` to `memberId` (`null` removes them), never leaving the agent without an owner.
 * A removed member's live streams on this instance end at once (elsewhere at the next access
 * check); a demoted one keeps reading, as any role may.
 */
export async function changeOwnedMember(
  agents: AgentStore,
  userId: string,
  agentId: string,
  memberId: string,
  role: MemberRole | null,
  streams: { memberRemoved(agentId: string, userId: string): void },
): Promise<MemberChange> {
  const refused = await refusal(agents, userId, agentId);
  if (refused) return refused;
  const outcome = await agents.changeMemberKeepingOwner(agentId, memberId, role);
  if (outcome === 'no-agent') return { kind: 'not-found' };
  if (outcome === 'done' && role === null) streams.memberRemoved(agentId, memberId);
  return { kind: outcome };
}
