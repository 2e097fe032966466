import { afterAll, beforeAll, expect, it } from 'vitest';
import { createAgent } from '../../src/agents/agent-admin.js';
import {
  MAX_PAIRS_PER_CHECK,
  StreamAccessGuard,
  type RevokedVia,
} from '../../src/live/stream-access-guard.js';
import {
  ACCESS_REVOKED_EVENT,
  StreamRegistry,
  type RegisteredStream,
} from '../../src/live/stream-registry.js';
import { AgentStore } from '../../src/store/agent-store.js';
import type { SqlClient } from '../../src/store/sql-client.js';
import { describeEngines, openTestStore, type TestStore } from '../harness/engines.js';
import { until } from './live-helpers.js';

/** A registered stream as the live route registers one, recording what it was sent. */
interface FakeStream extends RegisteredStream {
  sent: string[];
  ended: boolean;
}

/**
 * StreamAccessGuard against a real store (PGlite and PostgreSQL), counting the statements it
 * sends: the periodic check costs one statement per instance, whatever the number of streams.
 */
describeEngines('live stream access guard [%s]', (engine) => {
  let db: TestStore;
  /** Statements sent through `agents` since the counter was last reset. */
  let statements = 0;
  let agents: AgentStore;

  beforeAll(async () => {
    db = await openTestStore(engine);
    const sql = db.store.sql;
    const counting: SqlClient = {
      engine: sql.engine,
      query: <Row>(text: string, params?: readonly unknown[]) => {
        statements++;
        return sql.query<Row>(text, params);
      },
      transaction: (work) => sql.transaction(work),
      ping: () => sql.ping(),
      close: () => sql.close(),
    };
    agents = new AgentStore(counting);
  });
  afterAll(() => db?.dispose());

  /** An agent with these members (created straight in the store). */
  async function agentWith(...members: string[]): Promise<string> {
    const created = await createAgent(db.store.agents, {});
    if (created.kind !== 'created') throw new Error('agent not created');
    for (const userId of members)
      await db.store.agents.putMember(created.agent.agentId, userId, 'viewer');
    return created.agent.agentId;
  }

  function harness(maxPerUser = 100_000) {
    const registry = new StreamRegistry(maxPerUser);
    const revoked: { count: number; via: RevokedVia }[] = [];
    const warnings: string[] = [];
    let failedChecks = 0;
    const guard = (store: Pick<AgentStore, 'withRole'> = agents, intervalMs = 60_000) =>
      new StreamAccessGuard(registry, store, {
        intervalMs,
        logger: { info: () => {}, warn: (_details, message) => warnings.push(message) },
        onRevoked: (count, via) => revoked.push({ count, via }),
        onCheckFailed: () => failedChecks++,
      });
    const open = (agentId: string, userId: string): FakeStream => {
      const registration: { release?: () => void } = {};
      const stream: FakeStream = {
        agentId,
        userId,
        sent: [],
        ended: false,
        send(chunk) {
          if (!stream.ended) stream.sent.push(chunk);
        },
        end() {
          stream.ended = true;
          registration.release?.();
        },
      };
      const registered = registry.open(stream);
      if (typeof registered !== 'function') throw new Error(`not registered: ${registered}`);
      registration.release = registered;
      return stream;
    };
    return { registry, revoked, warnings, failedChecks: () => failedChecks, guard, open };
  }

  it('checks 5,000 streams of 3 (agent, user) pairs in one statement, and none without streams', async () => {
    const { registry, guard, open } = harness();
    const a = await agentWith('ana', 'bo');
    const b = await agentWith('ana');
    const check = guard();
    statements = 0;
    await check.check();
    expect(statements, 'no streams, no statement').toBe(0);

    const streams: FakeStream[] = [];
    for (let i = 0; i < 5_000; i++) {
      const [agentId, userId] = [
        [a, 'ana'],
        [a, 'bo'],
        [b, 'ana'],
      ][i % 3] as [string, string];
      streams.push(open(agentId, userId));
    }
    expect(registry.pairs()).toHaveLength(3);
    await check.check();
    expect(statements).toBe(1);
    await check.check();
    expect(statements).toBe(2);
    expect(streams.filter((s) => s.ended)).toEqual([]);
    expect(registry.size).toBe(5_000);
  });

  it('ends exactly the streams of a pair whose role was removed, each after the access-revoked event', async () => {
    const { registry, revoked, guard, open } = harness();
    const a = await agentWith('ana', 'bo');
    const b = await agentWith('ana');
    const anaOnA = [open(a, 'ana'), open(a, 'ana'), open(a, 'ana')];
    const others = [open(a, 'bo'), open(b, 'ana'), open(b, 'ana')];
    await db.store.agents.removeMember(a, 'ana');
    statements = 0;
    await guard().check();
    expect(statements).toBe(1);
    for (const stream of anaOnA) {
      expect(stream.ended).toBe(true);
      expect(stream.sent).toEqual([ACCESS_REVOKED_EVENT]);
    }
    for (const stream of others) expect(stream).toMatchObject({ ended: false, sent: [] });
    expect(revoked).toEqual([{ count: 3, via: 'access-check' }]);
    expect(registry.size).toBe(3);
    expect(registry.pairs()).not.toContainEqual({ agentId: a, userId: 'ana' });
  });

  it('keeps the stream of a user whose role changed', async () => {
    const { revoked, guard, open } = harness();
    const a = await agentWith('ana');
    const stream = open(a, 'ana');
    await db.store.agents.putMember(a, 'ana', 'owner');
    await db.store.agents.putMember(a, 'ana', 'editor');
    await guard().check();
    expect(stream).toMatchObject({ ended: false, sent: [] });
    expect(revoked).toEqual([]);
  });

  it('ends every stream of a deleted agent and no other', async () => {
    const { revoked, guard, open } = harness();
    const a = await agentWith('ana', 'bo');
    const b = await agentWith('ana');
    const onA = [open(a, 'ana'), open(a, 'bo'), open(a, 'bo')];
    const onB = open(b, 'ana');
    expect(await db.store.agents.deleteAgent(a)).toBe(true);
    await guard().check();
    for (const stream of onA) expect(stream.sent).toEqual([ACCESS_REVOKED_EVENT]);
    expect(onB).toMatchObject({ ended: false, sent: [] });
    expect(revoked).toEqual([{ count: 3, via: 'access-check' }]);
  });

  it('spares a stream registered while the check was in flight (its role was checked later)', async () => {
    const { guard, open } = harness();
    const a = await agentWith('ana');
    const before = open(a, 'ana');
    await db.store.agents.removeMember(a, 'ana');
    let during: FakeStream | undefined;
    // the user is granted a role again and opens a stream while the check's statement runs
    const racing: Pick<AgentStore, 'withRole'> = {
      withRole: async (pairs) => {
        const kept = await agents.withRole(pairs);
        await db.store.agents.putMember(a, 'ana', 'viewer');
        during = open(a, 'ana');
        return kept;
      },
    };
    await guard(racing).check();
    expect(before.sent).toEqual([ACCESS_REVOKED_EVENT]);
    expect(during).toMatchObject({ ended: false, sent: [] });
    // and the next check keeps it: the role is back
    await guard().check();
    expect(during?.ended).toBe(false);
  });

  it(`asks in steps of ${MAX_PAIRS_PER_CHECK} pairs: ${MAX_PAIRS_PER_CHECK + 1} pairs are two statements`, async () => {
    const { registry, revoked, guard, open } = harness();
    const a = await agentWith('kept');
    const kept = open(a, 'kept');
    for (let i = 0; i < MAX_PAIRS_PER_CHECK; i++) open(a, `gone-${i}`);
    expect(registry.pairs()).toHaveLength(MAX_PAIRS_PER_CHECK + 1);
    statements = 0;
    await guard().check();
    expect(statements).toBe(2);
    expect(registry.size).toBe(1);
    expect(kept.ended).toBe(false);
    expect(revoked).toEqual([{ count: MAX_PAIRS_PER_CHECK, via: 'access-check' }]);
  });

  it('ends a removed member or a deleted agent at once when told (admin API), counted apart', async () => {
    const { revoked, guard, open } = harness();
    const a = await agentWith('ana', 'bo');
    const b = await agentWith('ana');
    const anaOnA = open(a, 'ana');
    const boOnA = open(a, 'bo');
    const anaOnB = open(b, 'ana');
    const check = guard();
    statements = 0;
    check.memberRemoved(a, 'ana');
    expect(anaOnA.sent).toEqual([ACCESS_REVOKED_EVENT]);
    expect(boOnA.ended).toBe(false);
    check.agentDeleted(b);
    expect(anaOnB.sent).toEqual([ACCESS_REVOKED_EVENT]);
    expect(boOnA.ended).toBe(false);
    expect(statements, 'the store is not asked').toBe(0);
    expect(revoked).toEqual([
      { count: 1, via: 'admin-api' },
      { count: 1, via: 'admin-api' },
    ]);
  });

  it('checks every interval once started, and sends nothing more once stopped', async () => {
    const { guard, open } = harness();
    const a = await agentWith('ana', 'bo');
    const ana = open(a, 'ana');
    open(a, 'bo');
    const check = guard(agents, 100);
    statements = 0;
    check.start();
    await until(() => statements >= 3, 'three checks', 5_000);
    expect(ana.ended).toBe(false);
    await db.store.agents.removeMember(a, 'ana');
    await until(() => ana.ended, 'the removed member’s stream to end', 5_000);
    await check.stop();
    await check.stop();
    const after = statements;
    await new Promise((resolve) => setTimeout(resolve, 350));
    expect(statements).toBe(after);
  });

  it('ends nothing when the store cannot answer, and logs that once, not every round', async () => {
    const { registry, revoked, warnings, failedChecks, guard, open } = harness();
    const a = await agentWith('ana');
    const stream = open(a, 'ana');
    // a real store, closed: every statement fails as when the database is unreachable
    const down = await openTestStore(engine);
    await down.dispose();
    const check = guard(down.store.agents);
    for (let i = 0; i < 3; i++) await check.check();
    expect(stream).toMatchObject({ ended: false, sent: [] });
    expect(registry.size).toBe(1);
    expect(revoked).toEqual([]);
    expect(failedChecks()).toBe(3);
    expect(warnings).toEqual([
      'live stream access check failed; streams stay open until a check gets through',
    ]);
  });
});
