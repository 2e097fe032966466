import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  disposeLocation,
  describeEngines,
  freshLocation,
  type EngineLocation,
} from '../harness/engines.js';
import { postBatch, send } from '../harness/http.js';
import { runCli, startServeProcess, type ServeProcess } from '../harness/cli-process.js';
import { runBatch } from '../fixtures/batches.js';
import { loadMigrations } from '../../src/store/migrate.js';

const JWT_SECRET = 'cli-test-secret-cli-test-secret-0123';

describeEngines('flightlog CLI, headless bootstrap end to end [%s]', (engine) => {
  let env: Record<string, string>;
  let dataDir: string;
  let location: EngineLocation;
  let serve: ServeProcess | undefined;
  let spareKey = '';

  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'flightlog-cli-'));
    location = freshLocation(engine);
    env = {
      JWT_SECRET,
      ...(engine === 'pglite'
        ? { DATA_DIR: dataDir }
        : { DATABASE_URL: location.databaseUrl!, DATABASE_SCHEMA: location.databaseSchema! }),
    };
  });
  afterAll(async () => {
    if (serve && serve.child.exitCode === null) serve.child.kill('SIGKILL');
    await disposeLocation(location);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('bootstraps an agent, a key, a member and a token without a running server, then serves them', async () => {
    const migrated = await runCli(['migrate'], env);
    expect(migrated.code, migrated.stderr).toBe(0);
    // a new embedded data directory starts from the template the build migrated
    // (store/pglite-template.ts); PostgreSQL is migrated here
    expect(JSON.parse(migrated.stdout).applied).toEqual(
      engine === 'pglite' ? [] : (await loadMigrations()).map((m) => m.name),
    );

    const created = await runCli(
      ['agent', 'create', '--id', 'cli-agent', '--name', 'From the CLI'],
      env,
    );
    expect(created.code, created.stderr).toBe(0);
    const agent = JSON.parse(created.stdout);
    expect(agent).toEqual({
      agentId: 'cli-agent',
      apiKey: expect.stringMatching(/^flk_/),
      verifyToken: expect.stringMatching(/^flv_/),
    });

    const again = await runCli(['agent', 'create', '--id', 'cli-agent'], env);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('exists already');

    // the same id rule as the admin API and the wire: an empty id or any other character is
    // refused with the rule spelled out, and no agent is created
    for (const id of ['', 'has space', 'café', 'x'.repeat(129)]) {
      const bad = await runCli(['agent', 'create', '--id', id], env);
      expect(bad.code, bad.stderr).toBe(2);
      expect(bad.stderr).toContain(
        `--id ${JSON.stringify(id)}: an id is 1 to 128 characters of A-Z a-z 0-9 . _ : ~ -`,
      );
    }
    const absent = await runCli(['agent', 'delete', 'has space'], env);
    expect(absent.stderr).toContain('no agent has space');

    const key = await runCli(['key', 'create', '--agent', 'cli-agent'], env);
    expect(key.code, key.stderr).toBe(0);
    const second = JSON.parse(key.stdout);

    const spare = await runCli(['key', 'create', '--agent', 'cli-agent'], env);
    spareKey = JSON.parse(spare.stdout).apiKey as string;

    const granted = await runCli(
      ['member', 'grant', '--agent', 'cli-agent', '--user', 'ana', '--role', 'editor'],
      env,
    );
    expect(granted.code, granted.stderr).toBe(0);
    const token = (await runCli(['dev-token', '--user', 'ana'], env)).stdout.trim();
    expect(token.split('.')).toHaveLength(3);

    serve = await startServeProcess(env);
    const { body, trace } = runBatch({
      batch: { agentId: 'cli-agent', verifyToken: agent.verifyToken },
    });
    const res = await postBatch(serve.url, second.apiKey, body, { gzip: true });
    expect(res.status).toBe(202);
    expect(res.headers.get('flightlog-verify')).toBe('verified');
    const read = await send(serve.url, `/v1/traces/${trace.id}`, undefined, { token });
    expect(read.status).toBe(200);
    expect(read.body.trace.agentId).toBe('cli-agent');
  }, 180_000);

  it('prints a dashboard sign-in link whose fragment is a token the server takes for GET /v1/agents', async () => {
    if (!serve) throw new Error('serve did not start');
    const printed = await runCli(['dashboard-link', '--user', 'ana'], {
      ...env,
      PUBLIC_URL: `${serve.url}/`,
    });
    expect(printed.code, printed.stderr).toBe(0);
    const lines = printed.stdout.split('\n').filter(Boolean);
    expect(lines).toHaveLength(1);
    const link = lines[0] as string;
    // the token travels in the fragment only: nothing of it reaches a server's request line
    expect(link).not.toContain('?');
    expect(link.startsWith(`${serve.url}/#token=`)).toBe(true);
    const url = new URL(link);
    expect(url.search).toBe('');
    const token = new URLSearchParams(url.hash.slice(1)).get('token') ?? '';
    const agents = await send(serve.url, '/v1/agents', undefined, { token });
    expect(agents.status, agents.text).toBe(200);
    expect(agents.body.nextCursor).toBeNull();
    expect(agents.body.agents).toEqual([
      expect.objectContaining({ agentId: 'cli-agent', name: 'From the CLI', role: 'editor' }),
    ]);
    expect(agents.body.agents[0].traceCount).toBe(1);

    // valid for 12 hours unless --ttl says otherwise
    const lifetime = (jwt: string) => {
      const claims = JSON.parse(Buffer.from(jwt.split('.')[1] ?? '', 'base64url').toString());
      return (claims.exp as number) - (claims.iat as number);
    };
    expect(lifetime(token)).toBe(12 * 3600);
    const short = await runCli(['dashboard-link', '--user', 'ana', '--ttl', '60'], env);
    expect(short.code, short.stderr).toBe(0);
    expect(lifetime(short.stdout.trim().split('#token=')[1] ?? '')).toBe(60);

    // without PUBLIC_URL: this machine's PORT, 8080 unless set
    expect(short.stdout).toMatch(/^http:\/\/localhost:8080\/#token=[\w-]+\.[\w-]+\.[\w-]+\n$/);
    const onPort = await runCli(['dashboard-link', '--user', 'ana'], { ...env, PORT: '9123' });
    expect(onPort.stdout).toMatch(/^http:\/\/localhost:9123\/#token=/);
    const behindProxy = await runCli(['dashboard-link', '--user', 'ana'], {
      ...env,
      PUBLIC_URL: 'https://flightlog.example.com/ops',
    });
    expect(behindProxy.stdout).toMatch(/^https:\/\/flightlog\.example\.com\/ops\/#token=/);

    const { JWT_SECRET: _secret, ...withoutSecret } = env;
    // nor a local secret: no server ever started on this (fresh) DATA_DIR
    const refused = await runCli(['dashboard-link', '--user', 'ana'], {
      ...withoutSecret,
      DATA_DIR: join(dataDir, 'never-served'),
    });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('dashboard-link needs JWT_SECRET, or the local secret');
    const noUser = await runCli(['dashboard-link'], env);
    expect(noUser.code).toBe(2);
    expect(noUser.stderr).toContain('missing --user');
    const badTtl = await runCli(['dashboard-link', '--user', 'ana', '--ttl', '0'], env);
    expect(badTtl.code).toBe(2);
    expect(badTtl.stderr).toContain('--ttl must be a positive whole number');
    const query = await runCli(['dashboard-link', '--user', 'ana'], {
      ...env,
      PUBLIC_URL: 'https://flightlog.example.com/?x=1',
    });
    expect(query.code).toBe(2);
    expect(query.stderr).toContain('PUBLIC_URL must not have a query or a fragment');
  });

  // PGlite only: PostgreSQL has no data directory for one process to hold. With an admin API
  // the command goes through it (cli-while-serving.test.ts); this server has none.
  if (engine === 'pglite')
    it('says what to do when a server without an admin API holds DATA_DIR', async () => {
      const busy = await runCli(['agent', 'create'], env);
      expect(busy.code).toBe(2);
      expect(busy.stderr).toMatch(
        /DATA_DIR .* is in use by the server running on it \(process \d+\), which has no admin API: stop the server, or restart it with ADMIN_TOKEN set/,
      );
    });

  it('shuts down gracefully on SIGTERM: finishes the request in flight, then exits 0', async () => {
    if (!serve) throw new Error('serve did not start');
    // Send the headers and part of a body, signal, then finish the body.
    const payload = Buffer.from(JSON.stringify(runBatch().body));
    const socket = net.connect(Number(new URL(serve.url).port), '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    let response = '';
    socket.on('data', (d: Buffer) => (response += d.toString()));
    const closed = new Promise((resolve) => socket.on('close', resolve));
    socket.write(
      `POST /v1/traces/batch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${spareKey}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${payload.length}\r\n\r\n`,
    );
    socket.write(payload.subarray(0, 100));
    await new Promise((r) => setTimeout(r, 300));
    serve.child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    // write, not end: a client that half-closes its socket gets no answer from Node's HTTP server
    socket.write(payload.subarray(100));
    const [code] = await Promise.all([serve.exited, closed]);
    expect(response).toMatch(/^HTTP\/1\.1 202/);
    expect(code).toBe(0);
    expect(serve.output()).toContain('shutting down');
  });
});
