import type { AgentKey, AgentMember, CreatedAgent, MemberRole } from '@flightlog/protocol';
import { getJson, sendJson } from './api.js';

/** The owner API (`/v1/agents` and below): what the New agent and Settings pages call. */

export interface Me {
  userId: string;
  canCreateAgents: boolean;
}

export type { CreatedAgent } from '@flightlog/protocol';

export interface MemberAgent {
  id: string;
  name: string | null;
  createdAt: string;
  verifiedAt: string | null;
  role: MemberRole;
}

export type { AgentKey, AgentMember } from '@flightlog/protocol';

const agentUrl = (agentId: string) => `/v1/agents/${encodeURIComponent(agentId)}`;
const pageQuery = (cursor: string | null) =>
  cursor ? `?cursor=${encodeURIComponent(cursor)}` : '';

export const readMe = (signal?: AbortSignal) => getJson<Me>('/v1/me', signal);

export const createAgent = (name: string) =>
  sendJson<CreatedAgent>('POST', '/v1/agents', name ? { name } : {});

export const readAgent = (agentId: string, signal?: AbortSignal) =>
  getJson<MemberAgent>(agentUrl(agentId), signal);

/** Renames the agent; an empty name clears it (the agent is then shown by its id). */
export const renameAgent = (agentId: string, name: string) =>
  sendJson<MemberAgent>('PATCH', agentUrl(agentId), { name: name === '' ? null : name });

export const listKeys = (agentId: string, cursor: string | null, signal?: AbortSignal) =>
  getJson<{ keys: AgentKey[]; nextCursor: string | null }>(
    `${agentUrl(agentId)}/keys${pageQuery(cursor)}`,
    signal,
  );

export const createKey = (agentId: string) =>
  sendJson<{ keyId: string; apiKey: string }>('POST', `${agentUrl(agentId)}/keys`);

export const revokeKey = (agentId: string, keyId: string) =>
  sendJson<void>('DELETE', `${agentUrl(agentId)}/keys/${encodeURIComponent(keyId)}`);

export const listMembers = (agentId: string, cursor: string | null, signal?: AbortSignal) =>
  getJson<{ members: AgentMember[]; nextCursor: string | null }>(
    `${agentUrl(agentId)}/members${pageQuery(cursor)}`,
    signal,
  );

export const putMember = (agentId: string, userId: string, role: MemberRole) =>
  sendJson<AgentMember>('PUT', `${agentUrl(agentId)}/members/${encodeURIComponent(userId)}`, {
    role,
  });

export const removeMember = (agentId: string, userId: string) =>
  sendJson<void>('DELETE', `${agentUrl(agentId)}/members/${encodeURIComponent(userId)}`);
