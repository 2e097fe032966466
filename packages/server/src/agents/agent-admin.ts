import { isIdentifier } from '@flightlog/protocol';
import { ulid } from 'ulidx';
import { generateApiKey, generateVerifyToken, hashSecret, newKeyId } from '../auth/secrets.js';
import type { AgentRecord, AgentStore, MemberRole } from '../store/agent-store.js';

export interface CreatedAgent {
  agentId: string;
  /** Shown once; only its hash is stored. */
  apiKey: string;
  /** One-time onboarding token; shown once, only its hash is stored. */
  verifyToken: string;
}

export type CreateAgentOutcome =
  { kind: 'created'; agent: CreatedAgent } | { kind: 'exists' } | { kind: 'invalid-id' };

/**
 * Registers an agent with its first API key and a verify token. The id rule is checked here,
 * where every way of creating an agent passes (the admin API's schema checks it too, the CLI
 * has none): an agent's id is in every URL of its traces, so an empty one or one outside the
 * documented characters would make it unreachable.
 */
export async function createAgent(
  agents: AgentStore,
  request: { id?: string | undefined; name?: string | undefined },
): Promise<CreateAgentOutcome> {
  if (request.id !== undefined && !isIdentifier(request.id)) return { kind: 'invalid-id' };
  const agentId = request.id ?? ulid();
  const apiKey = generateApiKey();
  const verifyToken = generateVerifyToken();
  const created = await agents.createAgent({
    id: agentId,
    name: request.name ?? null,
    keyId: newKeyId(),
    keyHash: hashSecret(apiKey),
    verifyTokenHash: hashSecret(verifyToken),
  });
  return created
    ? { kind: 'created', agent: { agentId, apiKey, verifyToken } }
    : { kind: 'exists' };
}

/** Issues one more API key for an agent; undefined when the agent does not exist. */
export async function createKey(
  agents: AgentStore,
  agentId: string,
): Promise<{ keyId: string; apiKey: string } | undefined> {
  const keyId = newKeyId();
  const apiKey = generateApiKey();
  return (await agents.addKey(agentId, keyId, hashSecret(apiKey))) ? { keyId, apiKey } : undefined;
}

export function revokeKey(agents: AgentStore, keyId: string): Promise<boolean> {
  return agents.revokeKey(keyId);
}

export function grantMember(
  agents: AgentStore,
  agentId: string,
  userId: string,
  role: MemberRole,
): Promise<boolean> {
  return agents.putMember(agentId, userId, role);
}

export function revokeMember(
  agents: AgentStore,
  agentId: string,
  userId: string,
): Promise<boolean> {
  return agents.removeMember(agentId, userId);
}

/** Deletes an agent and everything of it; false when it did not exist. */
/** What else holds an agent's data or access on this instance, beyond the store. */
export interface AgentTraces {
  /** Cached key lookups (refused at once here; elsewhere within API_KEY_CACHE_MS). */
  keys?: { forgetAgent(agentId: string): void };
  /** Open live streams (ended at once here; elsewhere at the next access check). */
  streams?: { agentDeleted(agentId: string): void };
  /** The live buffer, so that no replay shows the agent's batches again. */
  bus?: { forget(agentId: string): Promise<void> };
  /** A live buffer that could not be cleared (the bus is unreachable): the deletion stands. */
  onBusError?: (error: unknown) => void;
}

/**
 * Deletes an agent with everything of it in the store, then what this instance holds of it.
 * False when there was no such agent.
 */
export async function deleteAgent(
  agents: AgentStore,
  agentId: string,
  traces: AgentTraces = {},
): Promise<boolean> {
  if (!(await agents.deleteAgent(agentId))) return false;
  traces.keys?.forgetAgent(agentId);
  traces.streams?.agentDeleted(agentId);
  await traces.bus?.forget(agentId).catch((error: unknown) => traces.onBusError?.(error));
  return true;
}

export function getAgent(agents: AgentStore, agentId: string): Promise<AgentRecord | undefined> {
  return agents.getAgent(agentId);
}
