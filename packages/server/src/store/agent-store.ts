import {
  TRACE_COUNT_CAP,
  type AgentKey,
  type AgentMember,
  type AgentSummary,
  type MemberRole,
} from '@flightlog/protocol';
import type { SqlClient } from './sql-client.js';
import { deleteAgentInSteps } from './run-rows.js';
import { isoFromRow, isoOrNullFromRow } from './row-dates.js';

export { MEMBER_ROLES, type MemberRole } from '@flightlog/protocol';

export type { AgentKey, AgentMember } from '@flightlog/protocol';

export interface AgentRow {
  id: string;
  name: string | null;
  createdAt: string;
  verifiedAt: string | null;
}

/** A user and an agent: whom a live stream was opened for, and on which agent. */
export interface AccessPair {
  agentId: string;
  userId: string;
}

export interface NewAgent {
  id: string;
  name: string | null;
  keyId: string;
  keyHash: string;
  verifyTokenHash: string;
  /** Made the agent's owner in the same transaction (the dashboard's "New agent"). */
  ownerId?: string | undefined;
}

const AGENT_COLUMNS = 'id, name, created_at AS "createdAt", verified_at AS "verifiedAt"';

interface StoredAgent {
  id: string;
  name: string | null;
  createdAt: Date | string;
  verifiedAt: Date | string | null;
}

const agentRow = (agent: StoredAgent): AgentRow => ({
  id: agent.id,
  name: agent.name,
  createdAt: isoFromRow(agent.createdAt),
  verifiedAt: isoOrNullFromRow(agent.verifiedAt),
});

/** Agents, their API keys (hashes), verify tokens (hashes) and members. */
export class AgentStore {
  constructor(private readonly sql: SqlClient) {}

  /** False when an agent with this id exists already. */
  async createAgent(agent: NewAgent): Promise<boolean> {
    return this.sql.transaction(async (tx) => {
      const created = await tx.query(
        'INSERT INTO agents (id, name) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING RETURNING id',
        [agent.id, agent.name],
      );
      if (created.length === 0) return false;
      await tx.query('INSERT INTO api_keys (id, agent_id, key_hash) VALUES ($1, $2, $3)', [
        agent.keyId,
        agent.id,
        agent.keyHash,
      ]);
      await tx.query('INSERT INTO verify_tokens (token_hash, agent_id) VALUES ($1, $2)', [
        agent.verifyTokenHash,
        agent.id,
      ]);
      if (agent.ownerId !== undefined)
        await tx.query("INSERT INTO members (agent_id, user_id, role) VALUES ($1, $2, 'owner')", [
          agent.id,
          agent.ownerId,
        ]);
      return true;
    });
  }

  /** False when the agent does not exist. */
  async addKey(agentId: string, keyId: string, keyHash: string): Promise<boolean> {
    const rows = await this.sql.query(
      `INSERT INTO api_keys (id, agent_id, key_hash)
       SELECT $1, id, $3 FROM agents WHERE id = $2 RETURNING id`,
      [keyId, agentId, keyHash],
    );
    return rows.length > 0;
  }

  /** False when no such key exists. Revoking twice is harmless. */
  async revokeKey(keyId: string): Promise<boolean> {
    const rows = await this.sql.query(
      'UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1 RETURNING id',
      [keyId],
    );
    return rows.length > 0;
  }

  /** Revokes a key of this agent only; false when the agent has no key with this id. */
  async revokeAgentKey(agentId: string, keyId: string): Promise<boolean> {
    const rows = await this.sql.query(
      `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now())
       WHERE id = $1 AND agent_id = $2 RETURNING id`,
      [keyId, agentId],
    );
    return rows.length > 0;
  }

  /**
   * Grants `role` (or removes the member when `role` is null) unless that would leave the agent
   * without an owner. The agent's row is locked first, so that two owners demoting each other
   * at once are served one after the other and the second is refused.
   */
  async changeMemberKeepingOwner(
    agentId: string,
    userId: string,
    role: MemberRole | null,
  ): Promise<'done' | 'no-agent' | 'no-member' | 'last-owner'> {
    return this.sql.transaction(async (tx) => {
      const agent = await tx.query('SELECT id FROM agents WHERE id = $1 FOR UPDATE', [agentId]);
      if (agent.length === 0) return 'no-agent';
      const [current] = await tx.query<{ role: MemberRole }>(
        'SELECT role FROM members WHERE agent_id = $1 AND user_id = $2',
        [agentId, userId],
      );
      if (role === null && !current) return 'no-member';
      if (current?.role === 'owner' && role !== 'owner') {
        const [owners] = await tx.query<{ n: number | string }>(
          "SELECT count(*)::int AS n FROM members WHERE agent_id = $1 AND role = 'owner'",
          [agentId],
        );
        if (Number(owners?.n ?? 0) <= 1) return 'last-owner';
      }
      if (role === null)
        await tx.query('DELETE FROM members WHERE agent_id = $1 AND user_id = $2', [
          agentId,
          userId,
        ]);
      else
        await tx.query(
          `INSERT INTO members (agent_id, user_id, role) VALUES ($1, $2, $3)
           ON CONFLICT (agent_id, user_id) DO UPDATE SET role = EXCLUDED.role`,
          [agentId, userId, role],
        );
      return 'done';
    });
  }

  /** The agent a live (unrevoked) key belongs to. */
  async agentForKey(keyHash: string): Promise<{ agentId: string; keyId: string } | undefined> {
    const [row] = await this.sql.query<{ agentId: string; keyId: string }>(
      `SELECT agent_id AS "agentId", id AS "keyId" FROM api_keys
       WHERE key_hash = $1 AND revoked_at IS NULL`,
      [keyHash],
    );
    return row;
  }

  /** False when the agent does not exist. */
  async putMember(agentId: string, userId: string, role: MemberRole): Promise<boolean> {
    const rows = await this.sql.query(
      `INSERT INTO members (agent_id, user_id, role)
       SELECT id, $2, $3 FROM agents WHERE id = $1
       ON CONFLICT (agent_id, user_id) DO UPDATE SET role = EXCLUDED.role
       RETURNING user_id`,
      [agentId, userId, role],
    );
    return rows.length > 0;
  }

  /** False when there was no such membership. */
  async removeMember(agentId: string, userId: string): Promise<boolean> {
    const rows = await this.sql.query(
      'DELETE FROM members WHERE agent_id = $1 AND user_id = $2 RETURNING user_id',
      [agentId, userId],
    );
    return rows.length > 0;
  }

  async roleOf(userId: string, agentId: string): Promise<MemberRole | undefined> {
    const [row] = await this.sql.query<{ role: MemberRole }>(
      'SELECT role FROM members WHERE agent_id = $1 AND user_id = $2',
      [agentId, userId],
    );
    return row?.role;
  }

  /**
   * Those of `pairs` whose user still has a role on the agent, in one statement however many
   * pairs there are (the members primary key answers each).
   */
  async withRole(pairs: readonly AccessPair[]): Promise<AccessPair[]> {
    if (pairs.length === 0) return [];
    return this.sql.query<AccessPair>(
      `SELECT m.agent_id AS "agentId", m.user_id AS "userId"
       FROM unnest($1::text[], $2::text[]) AS p (agent_id, user_id)
       JOIN members m ON m.agent_id = p.agent_id AND m.user_id = p.user_id`,
      [pairs.map((p) => p.agentId), pairs.map((p) => p.userId)],
    );
  }

  /**
   * Deletes an agent with everything of it (keys, verify tokens, members, traces, events,
   * batch ids, analysis jobs: the schema cascades from `agents`). False when it did not exist.
   */
  /**
   * Deletes the agent and all it holds in bounded statements (see run-rows.ts): its keys are
   * refused and its members gone before its data goes, `rowsPerStatement` rows at a time.
   */
  async deleteAgent(id: string, actor = 'admin', rowsPerStatement = 1_000): Promise<boolean> {
    return deleteAgentInSteps(this.sql, id, rowsPerStatement, actor);
  }

  async getAgent(id: string): Promise<AgentRow | undefined> {
    const [agent] = await this.sql.query<StoredAgent>(
      `SELECT ${AGENT_COLUMNS} FROM agents WHERE id = $1`,
      [id],
    );
    return agent && agentRow(agent);
  }

  /** Sets an agent's name (`null`: none); the agent as it is now, or undefined when there is none. */
  async renameAgent(id: string, name: string | null): Promise<AgentRow | undefined> {
    const [agent] = await this.sql.query<StoredAgent>(
      `UPDATE agents SET name = $2 WHERE id = $1 RETURNING ${AGENT_COLUMNS}`,
      [id, name],
    );
    return agent && agentRow(agent);
  }

  /**
   * Up to `limit` keys of an agent in key id order (the order they were issued), after the key
   * id `after`: one range of an index, however many keys the agent has.
   */
  async listKeys(agentId: string, after: string | undefined, limit: number): Promise<AgentKey[]> {
    const rows = await this.sql.query<{ keyId: string; createdAt: Date; revokedAt: Date | null }>(
      `SELECT id AS "keyId", created_at AS "createdAt", revoked_at AS "revokedAt"
       FROM api_keys WHERE agent_id = $1 AND id > $2 ORDER BY agent_id, id LIMIT $3`,
      [agentId, after ?? '', limit],
    );
    return rows.map((k) => ({
      keyId: k.keyId,
      createdAt: isoFromRow(k.createdAt),
      revokedAt: isoOrNullFromRow(k.revokedAt),
    }));
  }

  /** Up to `limit` members of an agent in user id order, after the user id `after`. */
  listMembers(agentId: string, after: string | undefined, limit: number): Promise<AgentMember[]> {
    return this.sql.query<AgentMember>(
      `SELECT user_id AS "userId", role FROM members
       WHERE agent_id = $1 AND user_id > $2 ORDER BY agent_id, user_id LIMIT $3`,
      [agentId, after ?? '', limit],
    );
  }

  /**
   * Up to `limit` of the agents `userId` has a role on, in agent id order, after the agent id
   * `after`, each with its trace count and newest trace, in one statement. The page is cut
   * first (a range of members_user_agent_idx, in a subquery, so that no plan joins or counts
   * beyond it), then the lateral subqueries run for its rows only: the count reads at most
   * TRACE_COUNT_CAP + 1 entries of traces_agent_started_idx (index only), the newest trace
   * one. Uncapped, an agent with 100,000 traces cost 17 ms on PostgreSQL; capped, 1.3 ms.
   */
  async listForMember(
    userId: string,
    after: string | undefined,
    limit: number,
  ): Promise<AgentSummary[]> {
    const rows = await this.sql.query<{
      agentId: string;
      name: string | null;
      role: MemberRole;
      createdAt: Date | string;
      verifiedAt: Date | string | null;
      traceCount: number | string;
      lastTraceAt: Date | string | null;
    }>(
      `SELECT m.agent_id AS "agentId", a.name, m.role, a.created_at AS "createdAt",
              a.verified_at AS "verifiedAt", c.n AS "traceCount", l.started_at AS "lastTraceAt"
       FROM (
         SELECT agent_id, role FROM members
         WHERE user_id = $1 AND agent_id > $2
         ORDER BY agent_id
         LIMIT $3
       ) m
       JOIN agents a ON a.id = m.agent_id
       CROSS JOIN LATERAL (
         SELECT count(*)::int AS n
         FROM (SELECT 1 FROM traces t WHERE t.agent_id = m.agent_id LIMIT $4) capped
       ) c
       LEFT JOIN LATERAL (
         SELECT t.started_at FROM traces t WHERE t.agent_id = m.agent_id
         ORDER BY t.started_at DESC, t.id DESC LIMIT 1
       ) l ON true
       ORDER BY m.agent_id`,
      [userId, after ?? '', limit, TRACE_COUNT_CAP + 1],
    );
    return rows.map((row) => {
      const counted = Number(row.traceCount);
      return {
        agentId: row.agentId,
        name: row.name,
        role: row.role,
        verifiedAt: isoOrNullFromRow(row.verifiedAt),
        createdAt: isoFromRow(row.createdAt),
        traceCount: Math.min(counted, TRACE_COUNT_CAP),
        traceCountCapped: counted > TRACE_COUNT_CAP,
        lastTraceAt: isoOrNullFromRow(row.lastTraceAt),
      };
    });
  }
}
