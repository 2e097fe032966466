import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEngines } from '../harness/engines.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import { startTestServer, type TestServer } from '../harness/test-server.js';
import { at, newId, runBatch } from '../fixtures/batches.js';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

describeEngines('admin API [%s]', (engine) => {
  describe('without ADMIN_TOKEN', () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await startTestServer(engine, { auth: { adminToken: undefined } });
    });
    afterAll(() => server.close());

    it('is not there at all: 404 problem, with or without a token, and nothing created', async () => {
      for (const token of [server.adminToken, undefined]) {
        const res = await send(server.url, '/admin/v1/agents', {}, token ? { token } : {});
        expect(isProblem(res, 404)).toBe(true);
      }
      const [row] = await server.store.sql.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM agents',
      );
      expect(row?.n).toBe(0);
    });
  });

  describe('with ADMIN_TOKEN', () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await startTestServer(engine, { auth: { apiKeyCacheMs: 5_000 } });
    });
    afterAll(() => server.close());

    const admin = (method: string, path: string, body?: unknown) =>
      send(server.url, path, body, { method, token: server.adminToken });
    const createAgent = async (body: unknown = {}) => {
      const res = await admin('POST', '/admin/v1/agents', body);
      expect(res.status).toBe(201);
      return res.body as { agentId: string; apiKey: string; verifyToken: string };
    };
    const batchStatus = async (apiKey: string) =>
      (await postBatch(server.url, apiKey, runBatch().body)).status;

    describe('admin token', () => {
      it.each([
        ['no Authorization header', {}],
        ['a wrong token', { authorization: 'Bearer not-the-admin-token-at-all' }],
        ['the token with a suffix', 'suffix'],
        ['a Basic scheme', 'basic'],
      ])('answers 401 with %s and creates nothing', async (_name, how) => {
        const headers =
          how === 'suffix'
            ? { authorization: `Bearer ${server.adminToken}x` }
            : how === 'basic'
              ? {
                  authorization: `Basic ${Buffer.from(`admin:${server.adminToken}`).toString('base64')}`,
                }
              : (how as Record<string, string>);
        const id = `never-${newId()}`;
        const res = await send(server.url, '/admin/v1/agents', { id }, { headers });
        expect(isProblem(res, 401)).toBe(true);
        expect(res.headers.get('www-authenticate')).toBe('Bearer');
        expect(await server.store.agents.getAgent(id)).toBeUndefined();
      });

      it('guards every admin route', async () => {
        const agent = await createAgent();
        const wrong = { token: 'wrong-admin-token-0000000000' };
        const calls = [
          send(server.url, `/admin/v1/agents/${agent.agentId}`, undefined, wrong),
          send(server.url, `/admin/v1/agents/${agent.agentId}/keys`, {}, wrong),
          send(server.url, `/admin/v1/keys/key_x`, undefined, { ...wrong, method: 'DELETE' }),
          send(
            server.url,
            `/admin/v1/agents/${agent.agentId}/members/u`,
            { role: 'owner' },
            {
              ...wrong,
              method: 'PUT',
            },
          ),
          send(server.url, `/admin/v1/agents/${agent.agentId}/members/u`, undefined, {
            ...wrong,
            method: 'DELETE',
          }),
          send(server.url, `/admin/v1/agents/${agent.agentId}`, undefined, {
            ...wrong,
            method: 'DELETE',
          }),
          send(
            server.url,
            `/admin/v1/agents/${agent.agentId}`,
            { name: 'renamed' },
            { ...wrong, method: 'PATCH' },
          ),
        ];
        for (const res of await Promise.all(calls)) expect(isProblem(res, 401)).toBe(true);
        expect(await server.store.agents.listMembers(agent.agentId, undefined, 10)).toEqual([]);
        expect((await server.store.agents.getAgent(agent.agentId))?.name).toBeNull();
      });
    });

    describe('POST /admin/v1/agents', () => {
      it('creates an agent from {} with a working API key and a verify token', async () => {
        const res = await admin('POST', '/admin/v1/agents', {});
        expect(res.status).toBe(201);
        expect(res.body).toEqual({
          agentId: expect.any(String),
          apiKey: expect.any(String),
          verifyToken: expect.any(String),
        });
        expect(res.body.apiKey).not.toBe(res.body.verifyToken);
        expect(await batchStatus(res.body.apiKey)).toBe(202);
        const { body, trace } = runBatch();
        await postBatch(server.url, res.body.apiKey, body);
        const [stored] = await server.store.sql.query<{ agent_id: string }>(
          'SELECT agent_id FROM traces WHERE id = $1',
          [trace.id],
        );
        expect(stored?.agent_id).toBe(res.body.agentId);
      });

      it('creates an agent without a body too', async () => {
        const res = await admin('POST', '/admin/v1/agents');
        expect(res.status).toBe(201);
        expect(await batchStatus(res.body.apiKey)).toBe(202);
      });

      it('gives each agent its own distinct id, key and token', async () => {
        const a = await createAgent();
        const b = await createAgent();
        expect(new Set([a.agentId, b.agentId]).size).toBe(2);
        expect(new Set([a.apiKey, b.apiKey, a.verifyToken, b.verifyToken]).size).toBe(4);
      });

      it('uses the id and name given', async () => {
        const id = `my-agent-${newId()}`;
        const created = await createAgent({ id, name: 'x' });
        expect(created.agentId).toBe(id);
        const got = await admin('GET', `/admin/v1/agents/${id}`);
        expect(got.body).toMatchObject({ id, name: 'x' });
      });

      it('answers 409 with pointer /id for an id in use, and keeps the first agent', async () => {
        const id = `taken-${newId()}`;
        const first = await createAgent({ id, name: 'first' });
        const res = await admin('POST', '/admin/v1/agents', { id, name: 'second' });
        expect(isProblem(res, 409)).toBe(true);
        expect(res.body.errors).toEqual([{ pointer: '/id', detail: expect.any(String) }]);
        expect(res.text).not.toContain('flk_');
        expect(await batchStatus(first.apiKey)).toBe(202);
        expect((await admin('GET', `/admin/v1/agents/${id}`)).body).toMatchObject({
          name: 'first',
          keys: [expect.anything()],
        });
      });

      it.each([
        [{ id: 'has space' }, '/id'],
        [{ id: '' }, '/id'],
        [{ id: 'a/b' }, '/id'],
        [{ id: 'x'.repeat(129) }, '/id'],
        [{ id: 'café' }, '/id'],
        [{ id: 'line\n' }, '/id'],
        [{ id: 'nul\u0000' }, '/id'],
        [{ id: 'a%2Fb' }, '/id'],
        [{ id: '\u{1F680}' }, '/id'],
        [{ id: 5 }, '/id'],
        [{ name: 7 }, '/name'],
        [{ colour: 'red' }, '/colour'],
      ])('answers 400 for %j, naming the field, and creates nothing', async (body, pointer) => {
        const count = async () =>
          (await server.store.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM agents'))[0]
            ?.n;
        const before = await count();
        const res = await admin('POST', '/admin/v1/agents', body);
        expect(isProblem(res, 400), res.text).toBe(true);
        expect(await count()).toBe(before);
        expect(res.body.errors.map((e: { pointer: string }) => e.pointer)).toContain(pointer);
      });

      it('stores only hashes of the API key and the verify token', async () => {
        const agent = await createAgent();
        const extra = await admin('POST', `/admin/v1/agents/${agent.agentId}/keys`, {});
        expect(extra.status).toBe(201);
        const secrets = [agent.apiKey, agent.verifyToken, extra.body.apiKey as string];
        const keys = await server.store.sql.query<Record<string, unknown>>(
          'SELECT * FROM api_keys WHERE agent_id = $1',
          [agent.agentId],
        );
        const tokens = await server.store.sql.query<Record<string, unknown>>(
          'SELECT * FROM verify_tokens WHERE agent_id = $1',
          [agent.agentId],
        );
        expect(keys).toHaveLength(2);
        expect(tokens).toHaveLength(1);
        const stored = JSON.stringify([keys, tokens]);
        for (const secret of secrets) {
          expect(stored).not.toContain(secret);
          expect(stored).not.toContain(secret.slice(4)); // without the flk_/flv_ prefix
        }
      });
    });

    describe('PATCH /admin/v1/agents/:id', () => {
      it('renames an agent (200 with the agent); null or a blank name clears it', async () => {
        const id = `rename-${newId()}`;
        await createAgent({ id, name: 'before' });
        const res = await admin('PATCH', `/admin/v1/agents/${id}`, { name: 'after' });
        expect(res.status, res.text).toBe(200);
        expect(res.body).toEqual({
          id,
          name: 'after',
          createdAt: expect.any(String),
          verifiedAt: null,
        });
        expect((await admin('GET', `/admin/v1/agents/${id}`)).body.name).toBe('after');
        for (const cleared of [null, '', ' ']) {
          await admin('PATCH', `/admin/v1/agents/${id}`, { name: 'again' });
          const res = await admin('PATCH', `/admin/v1/agents/${id}`, { name: cleared });
          expect(res.body.name).toBeNull();
          expect((await admin('GET', `/admin/v1/agents/${id}`)).body.name).toBeNull();
        }
      });

      it('answers 400 naming /name for a name that is not one, and 404 for an unknown agent', async () => {
        const agent = await createAgent({ name: 'kept' });
        for (const body of [{ name: 'x'.repeat(257) }, { name: 'a\u0000' }, { name: 1 }, {}]) {
          const res = await admin('PATCH', `/admin/v1/agents/${agent.agentId}`, body);
          expect(isProblem(res, 400), res.text).toBe(true);
          expect(res.body.errors.map((e: { pointer: string }) => e.pointer)).toContain('/name');
        }
        expect((await admin('GET', `/admin/v1/agents/${agent.agentId}`)).body.name).toBe('kept');
        const missing = await admin('PATCH', `/admin/v1/agents/no-such-${newId()}`, { name: 'x' });
        expect(isProblem(missing, 404)).toBe(true);
      });
    });

    describe('API keys', () => {
      it('POST /admin/v1/agents/:id/keys issues another working key', async () => {
        const agent = await createAgent();
        const res = await admin('POST', `/admin/v1/agents/${agent.agentId}/keys`);
        expect(res.status).toBe(201);
        expect(res.body).toEqual({ keyId: expect.any(String), apiKey: expect.any(String) });
        expect(res.body.apiKey).not.toBe(agent.apiKey);
        const { body, trace } = runBatch();
        expect((await postBatch(server.url, res.body.apiKey, body)).status).toBe(202);
        const [stored] = await server.store.sql.query<{ agent_id: string }>(
          'SELECT agent_id FROM traces WHERE id = $1',
          [trace.id],
        );
        expect(stored?.agent_id).toBe(agent.agentId);
        expect(await batchStatus(agent.apiKey)).toBe(202);
      });

      it('answers 404 for keys of an unknown agent', async () => {
        const res = await admin('POST', `/admin/v1/agents/no-such-agent-${newId()}/keys`);
        expect(isProblem(res, 404)).toBe(true);
      });

      it('DELETE /admin/v1/keys/:keyId revokes at once on this instance, and only that key', async () => {
        const agent = await createAgent();
        const issued = await admin('POST', `/admin/v1/agents/${agent.agentId}/keys`);
        const { keyId, apiKey } = issued.body as { keyId: string; apiKey: string };
        // used once, so this instance has it cached (cache ttl here: 5 s)
        expect(await batchStatus(apiKey)).toBe(202);
        const revoked = await admin('DELETE', `/admin/v1/keys/${keyId}`);
        expect(revoked.status).toBe(204);
        expect(revoked.text).toBe('');
        const refused = await postBatch(server.url, apiKey, runBatch().body);
        expect(isProblem(refused, 401)).toBe(true);
        expect(await batchStatus(agent.apiKey)).toBe(202);
        const got = await admin('GET', `/admin/v1/agents/${agent.agentId}`);
        const revokedAt = got.body.keys.find(
          (k: { keyId: string }) => k.keyId === keyId,
        )?.revokedAt;
        expect(Date.parse(revokedAt)).not.toBeNaN();
      });

      it('answers 404 for an unknown key id', async () => {
        const res = await admin('DELETE', `/admin/v1/keys/key_${newId()}`);
        expect(isProblem(res, 404)).toBe(true);
      });
    });

    describe('members', () => {
      const memberPath = (agentId: string, userId: string) =>
        `/admin/v1/agents/${agentId}/members/${userId}`;

      it.each(['owner', 'editor', 'viewer'] as const)(
        'PUT grants the role %s (200) and the user can read',
        async (role) => {
          const agent = await createAgent();
          const { body, trace } = runBatch();
          await postBatch(server.url, agent.apiKey, body);
          const userId = `user-${newId()}`;
          const res = await admin('PUT', memberPath(agent.agentId, userId), { role });
          expect(res.status).toBe(200);
          expect(res.body).toEqual({ agentId: agent.agentId, userId, role });
          expect((await admin('GET', `/admin/v1/agents/${agent.agentId}`)).body.members).toEqual([
            { userId, role },
          ]);
          const token = await server.userToken(userId);
          const read = await send(server.url, `/v1/traces/${trace.id}`, undefined, { token });
          expect(read.status).toBe(200);
        },
      );

      it('PUT again changes the role instead of adding a second membership', async () => {
        const agent = await createAgent();
        await admin('PUT', memberPath(agent.agentId, 'carol'), { role: 'viewer' });
        const res = await admin('PUT', memberPath(agent.agentId, 'carol'), { role: 'owner' });
        expect(res.status).toBe(200);
        expect((await admin('GET', `/admin/v1/agents/${agent.agentId}`)).body.members).toEqual([
          { userId: 'carol', role: 'owner' },
        ]);
      });

      it.each([{ role: 'admin' }, { role: 'OWNER' }, {}, { role: 'viewer', extra: 1 }])(
        'PUT answers 400 for %j and grants nothing',
        async (body) => {
          const agent = await createAgent();
          const res = await admin('PUT', memberPath(agent.agentId, 'dave'), body);
          expect(isProblem(res, 400)).toBe(true);
          expect(res.body.errors.length).toBeGreaterThan(0);
          expect((await admin('GET', `/admin/v1/agents/${agent.agentId}`)).body.members).toEqual(
            [],
          );
        },
      );

      it('PUT answers 404 for an unknown agent', async () => {
        const res = await admin('PUT', memberPath(`no-such-${newId()}`, 'erin'), {
          role: 'viewer',
        });
        expect(isProblem(res, 404)).toBe(true);
      });

      it('DELETE removes a member (204), then answers 404', async () => {
        const agent = await createAgent();
        await admin('PUT', memberPath(agent.agentId, 'frank'), { role: 'editor' });
        await admin('PUT', memberPath(agent.agentId, 'grace'), { role: 'viewer' });
        const removed = await admin('DELETE', memberPath(agent.agentId, 'frank'));
        expect(removed.status).toBe(204);
        expect((await admin('GET', `/admin/v1/agents/${agent.agentId}`)).body.members).toEqual([
          { userId: 'grace', role: 'viewer' },
        ]);
        expect(isProblem(await admin('DELETE', memberPath(agent.agentId, 'frank')), 404)).toBe(
          true,
        );
        expect(
          isProblem(await admin('DELETE', memberPath(`no-such-${newId()}`, 'grace')), 404),
        ).toBe(true);
      });
    });

    describe('DELETE /admin/v1/agents/:id', () => {
      /** Rows of every table that holds an agent's data, for one agent. */
      const rowsOf = async (agentId: string) => {
        const counts: Record<string, number> = {};
        for (const [table, where] of [
          ['agents', 'id = $1'],
          ['api_keys', 'agent_id = $1'],
          ['verify_tokens', 'agent_id = $1'],
          ['members', 'agent_id = $1'],
          ['traces', 'agent_id = $1'],
          ['events', 'agent_id = $1'],
          ['accepted_batches', 'agent_id = $1'],
          ['analysis_jobs', 'agent_id = $1'],
        ] as const) {
          const [row] = await server.store.sql.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM ${table} WHERE ${where}`,
            [agentId],
          );
          counts[table] = row?.n ?? 0;
        }
        return counts;
      };
      /** An agent with two keys, a member, and a finished run (events, batch id, analysis job). */
      const agentWithData = async () => {
        const agent = await createAgent();
        await admin('POST', `/admin/v1/agents/${agent.agentId}/keys`);
        await admin('PUT', `/admin/v1/agents/${agent.agentId}/members/owner-${newId()}`, {
          role: 'owner',
        });
        const run = runBatch({ events: 3, trace: { status: 'completed', endedAt: at(5_000) } });
        expect((await postBatch(server.url, agent.apiKey, run.body)).status).toBe(202);
        return agent;
      };

      it('deletes the agent and everything of it (204), and nothing of another agent', async () => {
        const doomed = await agentWithData();
        const kept = await agentWithData();
        const keptBefore = await rowsOf(kept.agentId);
        expect(Object.values(await rowsOf(doomed.agentId)).every((n) => n > 0)).toBe(true);

        const res = await admin('DELETE', `/admin/v1/agents/${doomed.agentId}`);
        expect(res.status).toBe(204);
        expect(res.text).toBe('');
        expect(Object.values(await rowsOf(doomed.agentId))).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
        expect(await rowsOf(kept.agentId)).toEqual(keptBefore);
        expect(isProblem(await admin('GET', `/admin/v1/agents/${doomed.agentId}`), 404)).toBe(true);
        // refused at once on this instance, though it was cached (ttl here: 5 s)
        expect(isProblem(await postBatch(server.url, doomed.apiKey, runBatch().body), 401)).toBe(
          true,
        );
        expect(await batchStatus(kept.apiKey)).toBe(202);
      });

      it('answers 404 for an agent that does not exist (or no longer does)', async () => {
        const agent = await createAgent();
        expect((await admin('DELETE', `/admin/v1/agents/${agent.agentId}`)).status).toBe(204);
        expect(isProblem(await admin('DELETE', `/admin/v1/agents/${agent.agentId}`), 404)).toBe(
          true,
        );
        expect(isProblem(await admin('DELETE', `/admin/v1/agents/no-such-${newId()}`), 404)).toBe(
          true,
        );
      });

      it('frees the id: an agent created again under it starts empty', async () => {
        const id = `reused-${newId()}`;
        await agentWithData();
        const first = await createAgent({ id });
        expect((await postBatch(server.url, first.apiKey, runBatch().body)).status).toBe(202);
        expect((await admin('DELETE', `/admin/v1/agents/${id}`)).status).toBe(204);
        const second = await createAgent({ id });
        expect(second.apiKey).not.toBe(first.apiKey);
        expect(isProblem(await postBatch(server.url, first.apiKey, runBatch().body), 401)).toBe(
          true,
        );
        const rows = await rowsOf(id);
        expect(rows).toMatchObject({ agents: 1, api_keys: 1, traces: 0, events: 0, members: 0 });
      });
    });

    describe('GET /admin/v1/agents/:id', () => {
      it('shows the agent, its keys without secrets, its members, and verifiedAt null', async () => {
        const id = `shown-${newId()}`;
        const agent = await createAgent({ id, name: 'Shown' });
        const extra = await admin('POST', `/admin/v1/agents/${id}/keys`);
        await admin('PUT', `/admin/v1/agents/${id}/members/zoe`, { role: 'owner' });
        await admin('PUT', `/admin/v1/agents/${id}/members/adam`, { role: 'viewer' });
        const res = await admin('GET', `/admin/v1/agents/${id}`);
        expect(res.status).toBe(200);
        expect(res.body).toEqual({
          id,
          name: 'Shown',
          createdAt: expect.any(String),
          verifiedAt: null,
          keys: expect.any(Array),
          keysNextCursor: null,
          members: expect.arrayContaining([
            { userId: 'zoe', role: 'owner' },
            { userId: 'adam', role: 'viewer' },
          ]),
          membersNextCursor: null,
        });
        expect(res.body.members).toHaveLength(2);
        expect(Date.parse(res.body.createdAt)).not.toBeNaN();
        expect(res.body.keys).toHaveLength(2);
        for (const key of res.body.keys)
          expect(key).toEqual({
            keyId: expect.any(String),
            createdAt: expect.any(String),
            revokedAt: null,
          });
        expect(res.body.keys.map((k: { keyId: string }) => k.keyId)).toContain(extra.body.keyId);
        for (const secret of [agent.apiKey, extra.body.apiKey as string, agent.verifyToken]) {
          expect(res.text).not.toContain(secret);
          expect(res.text).not.toContain(sha256(secret));
        }
      });

      it('sets verifiedAt when a batch consumes the verify token, once', async () => {
        const agent = await createAgent();
        const before = Date.now();
        const verified = await postBatch(server.url, agent.apiKey, {
          ...runBatch().body,
          agentId: agent.agentId,
          verifyToken: agent.verifyToken,
        });
        expect(verified.status).toBe(202);
        expect(verified.headers.get('flightlog-verify')).toBe('verified');
        const first = (await admin('GET', `/admin/v1/agents/${agent.agentId}`)).body;
        expect(first.verifiedAt).toEqual(expect.any(String));
        const verifiedAt = Date.parse(first.verifiedAt);
        expect(verifiedAt).toBeGreaterThanOrEqual(before - 1_000);
        expect(verifiedAt).toBeLessThanOrEqual(Date.now() + 1_000);

        // the token is single-use: a second use is rejected and verifiedAt stays
        const again = await postBatch(server.url, agent.apiKey, {
          ...runBatch().body,
          agentId: agent.agentId,
          verifyToken: agent.verifyToken,
        });
        expect(again.headers.get('flightlog-verify')).toBe('rejected');
        const second = (await admin('GET', `/admin/v1/agents/${agent.agentId}`)).body;
        expect(second.verifiedAt).toBe(first.verifiedAt);
      });

      it('keeps verifiedAt null for a verify token without agentId or for another agent', async () => {
        const agent = await createAgent();
        const other = await createAgent();
        await postBatch(server.url, agent.apiKey, {
          ...runBatch().body,
          verifyToken: agent.verifyToken,
        });
        await postBatch(server.url, other.apiKey, {
          ...runBatch().body,
          agentId: agent.agentId,
          verifyToken: agent.verifyToken,
        });
        expect(
          (await admin('GET', `/admin/v1/agents/${agent.agentId}`)).body.verifiedAt,
        ).toBeNull();
        expect(
          (await admin('GET', `/admin/v1/agents/${other.agentId}`)).body.verifiedAt,
        ).toBeNull();
        // the token was not used up by either attempt
        const right = await postBatch(server.url, agent.apiKey, {
          ...runBatch().body,
          agentId: agent.agentId,
          verifyToken: agent.verifyToken,
        });
        expect(right.headers.get('flightlog-verify')).toBe('verified');
      });

      it('answers 404 for an unknown agent', async () => {
        const res = await admin('GET', `/admin/v1/agents/no-such-${newId()}`);
        expect(isProblem(res, 404)).toBe(true);
      });
    });

    describe("an agent's keys and members, page by page", () => {
      /** 250 keys (one issued through the API) and 250 members, written straight to the store. */
      async function bigAgent() {
        const agent = await createAgent({ id: `big-${newId()}` });
        const issued = await admin('POST', `/admin/v1/agents/${agent.agentId}/keys`);
        await server.store.sql.query(
          `INSERT INTO api_keys (id, agent_id, key_hash)
           SELECT 'key_bulk_' || $1 || '_' || lpad(g::text, 4, '0'), $1, md5($1 || g) || md5(g || $1)
           FROM generate_series(1, 248) g`,
          [agent.agentId],
        );
        await server.store.sql.query(
          `INSERT INTO members (agent_id, user_id, role)
           SELECT $1, 'user-' || lpad(g::text, 4, '0'), 'viewer' FROM generate_series(1, 250) g`,
          [agent.agentId],
        );
        return { ...agent, issuedKeyId: issued.body.keyId as string };
      }

      /** Follows `nextCursor` from the first page to the last; every page checked on the way. */
      async function everyPage(path: string, list: 'keys' | 'members', limit?: number) {
        const items: { keyId?: string; userId?: string }[] = [];
        let cursor: string | null = null;
        let pages = 0;
        do {
          const query = new URLSearchParams();
          if (limit !== undefined) query.set('limit', String(limit));
          if (cursor !== null) query.set('cursor', cursor);
          const res = await admin('GET', `${path}?${query}`);
          expect(res.status, res.text).toBe(200);
          expect(res.body[list].length).toBeLessThanOrEqual(limit ?? 100);
          items.push(...res.body[list]);
          cursor = res.body.nextCursor;
          pages++;
        } while (cursor !== null);
        return { items, pages };
      }

      it('GET of the agent shows the first 100 of each and the cursors of the rest', async () => {
        const agent = await bigAgent();
        const res = await admin('GET', `/admin/v1/agents/${agent.agentId}`);
        expect(res.status).toBe(200);
        expect(res.body.keys).toHaveLength(100);
        expect(res.body.members).toHaveLength(100);
        expect(res.body.members[0]).toEqual({ userId: 'user-0001', role: 'viewer' });
        expect(typeof res.body.keysNextCursor).toBe('string');
        expect(typeof res.body.membersNextCursor).toBe('string');
        // the rest, from the agent's cursors
        const keys = await admin(
          'GET',
          `/admin/v1/agents/${agent.agentId}/keys?cursor=${res.body.keysNextCursor}&limit=200`,
        );
        expect(keys.body.keys).toHaveLength(150);
        expect(keys.body.nextCursor).toBeNull();
        const ids = [...res.body.keys, ...keys.body.keys].map((k: { keyId: string }) => k.keyId);
        expect(new Set(ids).size).toBe(250);
        expect(ids).toContain(agent.issuedKeyId);
      });

      it('lists every key and member once, in order, whatever the page size', async () => {
        const agent = await bigAgent();
        for (const limit of [undefined, 1, 7, 200]) {
          const keys = await everyPage(`/admin/v1/agents/${agent.agentId}/keys`, 'keys', limit);
          const keyIds = keys.items.map((k) => k.keyId!);
          expect(keyIds).toHaveLength(250);
          expect(new Set(keyIds).size).toBe(250);
          expect([...keyIds].sort()).toEqual(keyIds);
          const members = await everyPage(
            `/admin/v1/agents/${agent.agentId}/members`,
            'members',
            limit,
          );
          expect(members.items.map((m) => m.userId)).toEqual(
            Array.from({ length: 250 }, (_, i) => `user-${String(i + 1).padStart(4, '0')}`),
          );
          // the last page is known to be the last: no empty page after it
          expect(members.pages).toBe(Math.ceil(250 / (limit ?? 100)));
        }
      });

      it('refuses a bad limit or cursor with 400 naming it, and an unknown agent with 404', async () => {
        const agent = await bigAgent();
        const base = `/admin/v1/agents/${agent.agentId}`;
        for (const limit of ['0', '201', 'x', '-1']) {
          const res = await admin('GET', `${base}/keys?limit=${limit}`);
          expect(isProblem(res, 400), res.text).toBe(true);
          expect(res.body.errors[0].pointer).toBe('/querystring/limit');
        }
        const membersCursor = (await admin('GET', base)).body.membersNextCursor as string;
        for (const cursor of ['nonsense', membersCursor]) {
          // a members cursor is not one of keys
          const res = await admin('GET', `${base}/keys?cursor=${encodeURIComponent(cursor)}`);
          expect(isProblem(res, 400), res.text).toBe(true);
          expect(res.body.errors[0].pointer).toBe('/querystring/cursor');
        }
        for (const list of ['keys', 'members']) {
          const res = await admin('GET', `/admin/v1/agents/no-such-${newId()}/${list}`);
          expect(isProblem(res, 404)).toBe(true);
        }
      });
    });
  });
});
