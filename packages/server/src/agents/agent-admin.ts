import { isIdentifier } from '@flightlog/protocol';
import { ulid } from 'ulidx';
import { generateApiKey, generateVerifyToken, hashSecret, newKeyId } from '../auth/secrets.js';
import type {
  AgentKey,
  AgentMember,
  AgentRow,
  AgentStore,
  MemberRole,
} from '../store/agent-store.js';
import { decodePageCursor, encodePageCursor } from '../store/page-cursor.js';

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
  request: { id?: string | undefined; name?: string | undefined; ownerId?: string | undefined },
): Promise<CreateAgentOutcome> {
  if (request.id !== undefined && !isIdentifier(request.id)) return { kind: 'invalid-id' };
  const agentId = request.id ?? ulid();
  const apiKey = generateApiKey();
  const verifyToken = generateVerifyToken();
  const created = await agents.createAgent({
    id: agentId,
    name: storedName(request.name ?? null),
    keyId: newKeyId(),
    keyHash: hashSecret(apiKey),
    verifyTokenHash: hashSecret(verifyToken),
    ownerId: request.ownerId,
  });
  return created
    ? { kind: 'created', agent: { agentId, apiKey, verifyToken } }
    : { kind: 'exists' };
}

/** The name as kept: none for a blank one (see `renameAgent`). */
function storedName(name: string | null): string | null {
  return name === null || name.trim() === '' ? null : name;
}

/**
 * Renames an agent; undefined when it does not exist. `null`, an empty name and one of only
 * white space all clear it: an agent without a name is shown by its id everywhere, while a blank
 * one would be an empty link in every list of agents. Any other name is kept exactly as sent.
 */
export function renameAgent(
  agents: AgentStore,
  agentId: string,
  name: string | null,
): Promise<AgentRow | undefined> {
  return agents.renameAgent(agentId, storedName(name));
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
  /** Who asks, for the audit log: `admin` (default) or `cli`. */
  actor?: string;
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
  if (!(await agents.deleteAgent(agentId, traces.actor ?? 'admin'))) return false;
  traces.keys?.forgetAgent(agentId);
  traces.streams?.agentDeleted(agentId);
  await traces.bus?.forget(agentId).catch((error: unknown) => traces.onBusError?.(error));
  return true;
}

/** Keys or members per page of the admin API: `limit` 1–200 (as the read API's lists), 100 unless asked. */
export const ADMIN_PAGE_DEFAULT = 100;
export const ADMIN_PAGE_MAX = 200;

/** A page of an agent's keys or members; `nextCursor` null on the last one. */
export interface AdminPage<T> {
  items: T[];
  nextCursor: string | null;
}

/** An agent with the first page of its keys and of its members. */
export interface AgentRecord extends AgentRow {
  keys: AgentKey[];
  /** Where `GET /admin/v1/agents/:id/keys` goes on, or null when `keys` holds them all. */
  keysNextCursor: string | null;
  members: AgentMember[];
  membersNextCursor: string | null;
}

export type PageOutcome<T> =
  { kind: 'page'; page: AdminPage<T> } | { kind: 'no-agent' } | { kind: 'bad-cursor' };

type List = 'keys' | 'members';
type Read<T> = (after: string | undefined, limit: number) => Promise<T[]>;

/** One page of `list` after `after` (one more row is read to know whether another follows). */
async function pageOf<T>(
  list: List,
  read: Read<T>,
  idOf: (item: T) => string,
  after: string | undefined,
  limit: number,
): Promise<AdminPage<T>> {
  const rows = await read(after, limit + 1);
  const items = rows.slice(0, limit);
  const last = items.at(-1);
  // a cursor names its list, so one of members is refused by the keys endpoint
  const more = rows.length > limit && last !== undefined;
  return { items, nextCursor: more ? encodePageCursor(list, idOf(last)) : null };
}

const keyId = (key: AgentKey) => key.keyId;
const userId = (member: AgentMember) => member.userId;

/**
 * An agent with the first page of its keys and of its members: an agent may have any number
 * of either (keys are issued one request at a time, without a limit), and one answer listing
 * 100,000 of each was 11 MB and held PGlite, so every agent's batches, for 2 s.
 */
export async function getAgent(
  agents: AgentStore,
  agentId: string,
): Promise<AgentRecord | undefined> {
  const agent = await agents.getAgent(agentId);
  if (!agent) return undefined;
  const first = ADMIN_PAGE_DEFAULT;
  const keys = await pageOf('keys', readKeys(agents, agentId), keyId, undefined, first);
  const members = await pageOf('members', readMembers(agents, agentId), userId, undefined, first);
  return {
    ...agent,
    keys: keys.items,
    keysNextCursor: keys.nextCursor,
    members: members.items,
    membersNextCursor: members.nextCursor,
  };
}

const readKeys =
  (agents: AgentStore, agentId: string): Read<AgentKey> =>
  (after, limit) =>
    agents.listKeys(agentId, after, limit);
const readMembers =
  (agents: AgentStore, agentId: string): Read<AgentMember> =>
  (after, limit) =>
    agents.listMembers(agentId, after, limit);

export interface PageQuery {
  cursor?: string | undefined;
  limit: number;
}

/** A page of an agent's keys, in the order they were issued, after `query.cursor`. */
export function listKeys(
  agents: AgentStore,
  agentId: string,
  query: PageQuery,
): Promise<PageOutcome<AgentKey>> {
  return listPage(agents, agentId, query, 'keys', readKeys(agents, agentId), keyId);
}

/** A page of an agent's members, in user id order, after `query.cursor`. */
export function listMembers(
  agents: AgentStore,
  agentId: string,
  query: PageQuery,
): Promise<PageOutcome<AgentMember>> {
  return listPage(agents, agentId, query, 'members', readMembers(agents, agentId), userId);
}

async function listPage<T>(
  agents: AgentStore,
  agentId: string,
  query: PageQuery,
  list: List,
  read: Read<T>,
  idOf: (item: T) => string,
): Promise<PageOutcome<T>> {
  let after: string | undefined;
  if (query.cursor !== undefined) {
    after = decodePageCursor(
      query.cursor,
      (kind) => kind === list,
      (id) => id.length > 0,
    )?.[1];
    if (after === undefined) return { kind: 'bad-cursor' };
  }
  if (!(await agents.getAgent(agentId))) return { kind: 'no-agent' };
  return { kind: 'page', page: await pageOf(list, read, idOf, after, query.limit) };
}
