import { afterAll, beforeAll, expect, it } from 'vitest';
import { mintDevToken } from '../../src/auth/dev-token.js';
import { describeEngines } from '../harness/engines.js';
import { isProblem, postBatch, send, type SendOptions } from '../harness/http.js';
import { startTestServer, type TestServer } from '../harness/test-server.js';
import { newId, runBatch } from '../fixtures/batches.js';

interface Created {
  agentId: string;
  apiKey: string;
  verifyToken: string;
}

describeEngines('owner API: onboarding and managing an agent [%s]', (engine) => {
  let server: TestServer;
  const creator = 'creator@example.com';
  // a short cache bound, so a revoked key is refused within the test's wait on every path
  beforeAll(async () => {
    server = await startTestServer(engine, {
      auth: { agentCreators: [creator], apiKeyCacheMs: 200 },
    });
  });
  afterAll(() => server.close());

  const as = (userId: string) => mintDevToken(server.jwtSecret, userId);
  const call = async (userId: string, method: string, path: string, body?: unknown) => {
    const options: SendOptions = { method, token: await as(userId) };
    return send(server.url, path, body, options);
  };
  /** An agent created through the owner API by the creator, with an editor and a viewer. */
  async function onboarded(): Promise<Created & { editor: string; viewer: string }> {
    const res = await call(creator, 'POST', '/v1/agents', { name: 'Swap bot' });
    expect(res.status, res.text).toBe(201);
    const created = res.body as Created;
    const editor = `ed-${newId()}`;
    const viewer = `vi-${newId()}`;
    const base = `/v1/agents/${created.agentId}/members`;
    expect((await call(creator, 'PUT', `${base}/${editor}`, { role: 'editor' })).status).toBe(200);
    expect((await call(creator, 'PUT', `${base}/${viewer}`, { role: 'viewer' })).status).toBe(200);
    return { ...created, editor, viewer };
  }

  it('tells the dashboard who may create agents', async () => {
    expect((await call(creator, 'GET', '/v1/me')).body).toEqual({
      userId: creator,
      canCreateAgents: true,
    });
    expect((await call('someone', 'GET', '/v1/me')).body).toEqual({
      userId: 'someone',
      canCreateAgents: false,
    });
    expect((await send(server.url, '/v1/me')).status).toBe(401);
  });

  it('creates an agent owned by its creator, whose key and verify token verify it', async () => {
    const res = await call(creator, 'POST', '/v1/agents', { name: 'Swap bot' });
    expect(res.status, res.text).toBe(201);
    const created = res.body as Created;
    expect(Object.keys(created).sort()).toEqual(['agentId', 'apiKey', 'verifyToken']);

    const before = await call(creator, 'GET', `/v1/agents/${created.agentId}`);
    expect(before.body).toMatchObject({
      id: created.agentId,
      name: 'Swap bot',
      role: 'owner',
      verifiedAt: null,
    });
    const members = await call(creator, 'GET', `/v1/agents/${created.agentId}/members`);
    expect(members.body).toEqual({
      members: [{ userId: creator, role: 'owner' }],
      nextCursor: null,
    });

    const { body, trace } = runBatch({
      batch: { agentId: created.agentId, verifyToken: created.verifyToken },
    });
    const batch = await postBatch(server.url, created.apiKey, body);
    expect(batch.status).toBe(202);
    expect(batch.headers.get('flightlog-verify')).toBe('verified');
    const after = await call(creator, 'GET', `/v1/agents/${created.agentId}`);
    expect(after.body.verifiedAt).toEqual(expect.any(String));
    const runs = await call(creator, 'GET', `/v1/agents/${created.agentId}/traces`);
    expect(runs.body.traces.map((t: { id: string }) => t.id)).toEqual([trace.id]);
  });

  it('creates an agent without a body, and refuses a user not in AGENT_CREATORS with 403', async () => {
    const res = await send(server.url, '/v1/agents', undefined, {
      method: 'POST',
      token: await as(creator),
    });
    expect(res.status, res.text).toBe(201);
    const refused = await call('mallory', 'POST', '/v1/agents', { name: 'x' });
    expect(isProblem(refused, 403)).toBe(true);
    expect(refused.body.detail).toMatch(/AGENT_CREATORS/);
    expect((await send(server.url, '/v1/agents', {}, { method: 'POST' })).status).toBe(401);
    // the admin API's id is not the caller's to choose here
    expect((await call(creator, 'POST', '/v1/agents', { id: 'mine' })).status).toBe(400);
  });

  it('creates an agent with a blank name as one without a name, shown by its id', async () => {
    for (const blank of ['', '   ']) {
      const created = await call(creator, 'POST', '/v1/agents', { name: blank });
      expect(created.status, created.text).toBe(201);
      const read = await call(creator, 'GET', `/v1/agents/${created.body.agentId}`);
      expect(read.body.name).toBeNull();
    }
  });

  it('lets the owner issue a key (shown once) and revoke it: the revoked key is refused with 401', async () => {
    const agent = await onboarded();
    const issued = await call(creator, 'POST', `/v1/agents/${agent.agentId}/keys`);
    expect(issued.status, issued.text).toBe(201);
    const { keyId, apiKey } = issued.body as { keyId: string; apiKey: string };
    expect((await postBatch(server.url, apiKey, runBatch().body)).status).toBe(202);

    const keys = await call(creator, 'GET', `/v1/agents/${agent.agentId}/keys?limit=1`);
    expect(keys.status).toBe(200);
    expect(keys.body.keys).toHaveLength(1);
    expect(keys.body.nextCursor).toEqual(expect.any(String));
    const rest = await call(
      creator,
      'GET',
      `/v1/agents/${agent.agentId}/keys?cursor=${encodeURIComponent(keys.body.nextCursor)}`,
    );
    expect(rest.body.keys.map((k: { keyId: string }) => k.keyId)).toEqual([keyId]);
    expect(rest.body.keys[0]).not.toHaveProperty('apiKey');

    const revoked = await call(creator, 'DELETE', `/v1/agents/${agent.agentId}/keys/${keyId}`);
    expect(revoked.status).toBe(204);
    // this instance forgets it at once
    const refused = await postBatch(server.url, apiKey, runBatch().body);
    expect(isProblem(refused, 401)).toBe(true);
    const listed = await call(creator, 'GET', `/v1/agents/${agent.agentId}/keys`);
    expect(listed.body.keys.find((k: { keyId: string }) => k.keyId === keyId).revokedAt).toEqual(
      expect.any(String),
    );
    // the first key still works
    expect((await postBatch(server.url, agent.apiKey, runBatch().body)).status).toBe(202);
  });

  it("refuses revoking another agent's key through this agent (404), leaving it working", async () => {
    const mine = await onboarded();
    const theirs = await server.createAgent();
    const [theirKey] = (
      (
        await send(server.url, `/admin/v1/agents/${theirs.agentId}`, undefined, {
          token: server.adminToken,
        })
      ).body as { keys: { keyId: string }[] }
    ).keys;
    const res = await call(creator, 'DELETE', `/v1/agents/${mine.agentId}/keys/${theirKey!.keyId}`);
    expect(isProblem(res, 404)).toBe(true);
    expect((await postBatch(server.url, theirs.apiKey, runBatch().body)).status).toBe(202);
  });

  it('lets the owner grant, change and remove members, but never the last owner (409)', async () => {
    const agent = await onboarded();
    const base = `/v1/agents/${agent.agentId}/members`;
    const changed = await call(creator, 'PUT', `${base}/${agent.viewer}`, { role: 'editor' });
    expect(changed.body).toEqual({ agentId: agent.agentId, userId: agent.viewer, role: 'editor' });
    expect((await call(creator, 'DELETE', `${base}/${agent.viewer}`)).status).toBe(204);
    expect((await call(agent.viewer, 'GET', `/v1/agents/${agent.agentId}/traces`)).status).toBe(
      404,
    );
    expect(isProblem(await call(creator, 'DELETE', `${base}/${agent.viewer}`), 404)).toBe(true);

    const removeSelf = await call(creator, 'DELETE', `${base}/${creator}`);
    expect(isProblem(removeSelf, 409)).toBe(true);
    expect(removeSelf.body.detail).toMatch(/last owner/);
    const demoteSelf = await call(creator, 'PUT', `${base}/${creator}`, { role: 'viewer' });
    expect(isProblem(demoteSelf, 409)).toBe(true);

    // with a second owner, the first may step down
    expect((await call(creator, 'PUT', `${base}/${agent.editor}`, { role: 'owner' })).status).toBe(
      200,
    );
    expect((await call(creator, 'PUT', `${base}/${creator}`, { role: 'viewer' })).status).toBe(200);
    expect(isProblem(await call(creator, 'GET', `${base}`), 403)).toBe(true);
    expect(isProblem(await call(agent.editor, 'DELETE', `${base}/${agent.editor}`), 409)).toBe(
      true,
    );
    const members = await call(agent.editor, 'GET', base);
    expect(members.body.members).toEqual(
      expect.arrayContaining([
        { userId: creator, role: 'viewer' },
        { userId: agent.editor, role: 'owner' },
      ]),
    );
  });

  it('refuses user ids that would look like another user, or like none, and grants nothing', async () => {
    const agent = await onboarded();
    const base = `/v1/agents/${agent.agentId}/members`;
    const lookAlikes = [
      'mallory ',
      ' mallory',
      ' ',
      '\u200Bmallory',
      'mal\u202Eyrol',
      'mallory\u2066',
      'mal\u0007lory',
      '\uFEFFmallory',
      'm\u00ADallory'.replace('\u00AD', '\u200D'),
    ];
    for (const userId of lookAlikes) {
      const res = await call(creator, 'PUT', `${base}/${encodeURIComponent(userId)}`, {
        role: 'editor',
      });
      expect(isProblem(res, 400), `${JSON.stringify(userId)}: ${res.text}`).toBe(true);
    }
    const members = await call(creator, 'GET', base);
    expect(members.body.members.map((m: { userId: string }) => m.userId).sort()).toEqual(
      [creator, agent.editor, agent.viewer].sort(),
    );
    // what an identity provider really issues passes: e-mail, UUID, an URL-like issuer subject
    for (const userId of [
      'ana@example.com',
      '4f1c7d9e-2b1a-4c8e-9f00-1a2b3c4d5e6f',
      'auth0|6543 21',
      'Zoë Ñandú 李',
    ]) {
      const res = await call(creator, 'PUT', `${base}/${encodeURIComponent(userId)}`, {
        role: 'viewer',
      });
      expect(res.status, `${userId}: ${res.text}`).toBe(200);
      expect(res.body.userId).toBe(userId);
    }
  });

  it('lets the owner rename the agent, everywhere it is shown; null or a blank name clears it', async () => {
    const agent = await onboarded();
    const a = `/v1/agents/${agent.agentId}`;
    const renamed = await call(creator, 'PATCH', a, { name: 'Swap bot v2 \u{1F680}' });
    expect(renamed.status, renamed.text).toBe(200);
    expect(renamed.body).toEqual({
      id: agent.agentId,
      name: 'Swap bot v2 \u{1F680}',
      createdAt: expect.any(String),
      verifiedAt: null,
      role: 'owner',
    });
    // every member sees the new name, on the agent and in their list of agents
    expect((await call(agent.viewer, 'GET', a)).body.name).toBe('Swap bot v2 \u{1F680}');
    const listed = await call(agent.editor, 'GET', '/v1/agents');
    expect(
      listed.body.agents.find((x: { agentId: string }) => x.agentId === agent.agentId).name,
    ).toBe('Swap bot v2 \u{1F680}');
    // the longest name the schema allows is kept as sent
    const longest = 'n'.repeat(256);
    expect((await call(creator, 'PATCH', a, { name: longest })).body.name).toBe(longest);

    for (const cleared of [null, '', '   ']) {
      expect((await call(creator, 'PATCH', a, { name: 'again' })).body.name).toBe('again');
      const res = await call(creator, 'PATCH', a, { name: cleared });
      expect(res.status, res.text).toBe(200);
      expect(res.body.name).toBeNull();
      expect((await call(agent.viewer, 'GET', a)).body.name).toBeNull();
    }
  });

  it('refuses a rename that is not a name with 400 naming /name, and changes nothing', async () => {
    const agent = await onboarded();
    const a = `/v1/agents/${agent.agentId}`;
    const bodies: [unknown, string][] = [
      [{ name: 'x'.repeat(257) }, '/name'],
      [{ name: 'a\u0000b' }, '/name'],
      [{ name: 'lone \uD800 surrogate' }, '/name'],
      [{ name: 7 }, '/name'],
      [{}, '/name'],
      [{ name: 'ok', colour: 'red' }, '/colour'],
    ];
    for (const [body, pointer] of bodies) {
      const res = await call(creator, 'PATCH', a, body);
      expect(isProblem(res, 400), `${JSON.stringify(body)}: ${res.text}`).toBe(true);
      expect(res.body.errors.map((e: { pointer: string }) => e.pointer)).toContain(pointer);
    }
    const noBody = await send(server.url, a, undefined, {
      method: 'PATCH',
      token: await as(creator),
    });
    expect(isProblem(noBody, 400), noBody.text).toBe(true);
    expect((await call(creator, 'GET', a)).body.name).toBe('Swap bot');
    // no token: 401, whatever the body
    const anonymous = await send(server.url, a, { name: 'anon' }, { method: 'PATCH' });
    expect(isProblem(anonymous, 401)).toBe(true);
    expect((await call(creator, 'GET', a)).body.name).toBe('Swap bot');
  });

  it('refuses editors and viewers with 403 and users without a role with 404 on every management route', async () => {
    const agent = await onboarded();
    const [key] = (await call(creator, 'GET', `/v1/agents/${agent.agentId}/keys`)).body.keys as {
      keyId: string;
    }[];
    const a = `/v1/agents/${agent.agentId}`;
    const routes: [string, string, unknown?][] = [
      ['GET', `${a}/keys`],
      ['POST', `${a}/keys`],
      ['DELETE', `${a}/keys/${key!.keyId}`],
      ['GET', `${a}/members`],
      ['PUT', `${a}/members/${agent.viewer}`, { role: 'owner' }],
      ['PUT', `${a}/members/newcomer`, { role: 'viewer' }],
      ['DELETE', `${a}/members/${creator}`],
      ['PATCH', a, { name: 'Hijacked' }],
    ];
    for (const [method, path, body] of routes) {
      for (const user of [agent.editor, agent.viewer]) {
        const res = await call(user, method, path, body);
        expect(isProblem(res, 403), `${user} ${method} ${path}: ${res.text}`).toBe(true);
        expect(res.body.detail).toBe(
          'Only owners of this agent manage its name, keys and members.',
        );
      }
      const stranger = await call(`nobody-${newId()}`, method, path, body);
      expect(isProblem(stranger, 404), `${method} ${path}`).toBe(true);
      const unknown = await call(
        creator,
        method,
        path.replace(agent.agentId, 'no-such-agent'),
        body,
      );
      expect(unknown.body.detail).toBe(stranger.body.detail);
    }
    // nothing changed: the key still works, the members and the name are as they were
    expect((await postBatch(server.url, agent.apiKey, runBatch().body)).status).toBe(202);
    expect((await call(creator, 'GET', a)).body.name).toBe('Swap bot');
    const members = await call(creator, 'GET', `${a}/members`);
    expect(members.body.members).toHaveLength(3);
    // a member of any role reads the agent itself; a stranger does not
    expect((await call(agent.viewer, 'GET', a)).body.role).toBe('viewer');
    expect((await call('stranger', 'GET', a)).status).toBe(404);
  });

  it('checks ids as the admin API does', async () => {
    const agent = await onboarded();
    const a = `/v1/agents/${agent.agentId}`;
    expect((await call(creator, 'PUT', `${a}/members/x`, { role: 'boss' })).status).toBe(400);
    expect((await call(creator, 'GET', `${a}/keys?limit=0`)).status).toBe(400);
    expect((await call(creator, 'GET', `${a}/keys?cursor=nope`)).status).toBe(400);
    expect((await call(creator, 'POST', '/v1/agents', { name: 'a\u0000b' })).status).toBe(400);
  });
});
