import { createHmac } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import {
  disposeLocation,
  describeEngines,
  freshLocation,
  type EngineLocation,
} from '../harness/engines.js';
import { postBatch, send } from '../harness/http.js';
import {
  runCli,
  startServeProcess,
  type CliResult,
  type ServeProcess,
} from '../harness/cli-process.js';
import { startLockHolder } from '../harness/lock-holder.js';
import { waitFor } from '../harness/wait.js';
import { runBatch } from '../fixtures/batches.js';

/** The printed JSON of a command that succeeded. */
function printed(result: CliResult): any {
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout);
}

/** A refusal as the CLI words its own: exit 2, the message, no stack trace. */
function refused(result: CliResult, message: string | RegExp): void {
  expect(result.code, result.stderr).toBe(2);
  if (typeof message === 'string') expect(result.stderr).toContain(message);
  else expect(result.stderr).toMatch(message);
  expect(result.stderr).not.toMatch(/\n\s+at /);
}

async function stop(serve: ServeProcess): Promise<void> {
  serve.child.kill('SIGTERM');
  expect(await serve.exited).toBe(0);
}

/**
 * Effects checked through the running server. A change made by the CLI directly in PostgreSQL
 * reaches the server's key cache within API_KEY_CACHE_MS; through the admin API at once.
 */
async function eventually(check: () => Promise<number>, status: number): Promise<void> {
  await waitFor(async () => ((await check()) === status ? true : undefined), `${status}`, 5_000);
}

describeEngines('CLI commands while `flightlog serve` runs, nothing configured [%s]', (engine) => {
  let dataDir: string;
  let location: EngineLocation;
  let env: Record<string, string>;
  let serve: ServeProcess;
  const serverFile = () => join(dataDir, 'flightlog.server.json');

  beforeAll(async () => {
    dataDir = join(mkdtempSync(join(tmpdir(), 'flightlog-cli-serving-')), 'data');
    location = freshLocation(engine);
    // no JWT_SECRET, JWT_JWKS_URL or ADMIN_TOKEN: the zero-configuration mode
    env = {
      DATA_DIR: dataDir,
      ...(engine === 'postgres'
        ? { DATABASE_URL: location.databaseUrl!, DATABASE_SCHEMA: location.databaseSchema! }
        : {}),
    };
    serve = await startServeProcess({ ...env, FLIGHTLOG_BANNER: 'on' });
  }, 60_000);
  afterAll(async () => {
    if (serve.child.exitCode === null) serve.child.kill('SIGKILL');
    await disposeLocation(location);
    rmSync(join(dataDir, '..'), { recursive: true, force: true });
  });

  it('says where the admin API stands, and finds the server through a 0600 file without secrets', async () => {
    await waitFor(() => (serve.output().includes('Admin API') ? true : undefined), 'the banner');
    expect(serve.output()).toMatch(/Admin API\s+on, token derived from the local secret/);
    const secret = readFileSync(join(dataDir, 'flightlog.secret'), 'utf8').trim();
    if (engine === 'pglite') {
      expect(statSync(serverFile()).mode & 0o777).toBe(0o600);
      const text = readFileSync(serverFile(), 'utf8');
      expect(JSON.parse(text)).toEqual({
        url: serve.url,
        pid: serve.pid,
        adminApi: 'local-secret',
      });
      expect(text).not.toContain(secret);
    } else {
      // PostgreSQL has no lock: commands open the store themselves
      expect(existsSync(serverFile())).toBe(false);
    }
    // the admin API takes the token derived from the local secret, and nothing literal else
    const derived = createHmac('sha256', secret).update('flightlog admin api').digest('base64url');
    const found = await send(serve.url, '/admin/v1/agents/none', undefined, { token: derived });
    expect(found.status).toBe(404);
    expect(found.body.detail).not.toMatch(/No route/);
    // to anyone without it the admin API answers as a route that does not exist
    for (const token of [secret, undefined]) {
      const hidden = await send(serve.url, '/admin/v1/agents/none', undefined, { token });
      expect(hidden.status).toBe(404);
      expect(hidden.body.detail).toBe('No route GET /admin/v1/agents/none.');
    }
  });

  it('migrate exits 0: the running server applied the migrations when it started', async () => {
    const migrated = await runCli(['migrate'], env);
    expect(migrated.code, migrated.stderr).toBe(0);
    const applied = JSON.parse(migrated.stdout).applied;
    expect(applied).toEqual([]);
    if (engine === 'pglite')
      expect(migrated.stderr).toContain(
        `the server running on DATA_DIR ${dataDir} (process ${serve.pid}) applied the migrations when it started`,
      );
  });

  it('agent, key and member commands work as without a server, with the same output and errors', async () => {
    const agent = printed(
      await runCli(['agent', 'create', '--id', 'live-agent', '--name', 'While serving'], env),
    );
    expect(agent).toEqual({
      agentId: 'live-agent',
      apiKey: expect.stringMatching(/^flk_/),
      verifyToken: expect.stringMatching(/^flv_/),
    });
    const { body, trace } = runBatch({
      batch: { agentId: 'live-agent', verifyToken: agent.verifyToken },
    });
    const first = await postBatch(serve.url, agent.apiKey, body);
    expect(first.status, first.text).toBe(202);
    expect(first.headers.get('flightlog-verify')).toBe('verified');

    refused(
      await runCli(['agent', 'create', '--id', 'live-agent'], env),
      'flightlog: agent live-agent exists already',
    );
    refused(
      await runCli(['agent', 'create', '--id', 'has space'], env),
      '--id "has space": an id is 1 to 128 characters of A-Z a-z 0-9 . _ : ~ -',
    );
    const unnamed = printed(await runCli(['agent', 'create'], env));
    expect(unnamed.agentId).toMatch(/^[0-9A-Z]{26}$/);

    const key = printed(await runCli(['key', 'create', '--agent', 'live-agent'], env));
    expect(key).toEqual({ keyId: expect.any(String), apiKey: expect.stringMatching(/^flk_/) });
    expect((await postBatch(serve.url, key.apiKey, runBatch().body)).status).toBe(202);
    refused(
      await runCli(['key', 'create', '--agent', 'no-such-agent'], env),
      'flightlog: no agent no-such-agent',
    );

    const granted = printed(
      await runCli(
        ['member', 'grant', '--agent', 'live-agent', '--user', 'ana', '--role', 'viewer'],
        env,
      ),
    );
    expect(granted).toEqual({ agentId: 'live-agent', userId: 'ana', role: 'viewer' });
    refused(
      await runCli(
        ['member', 'grant', '--agent', 'nope', '--user', 'ana', '--role', 'viewer'],
        env,
      ),
      'flightlog: no agent nope',
    );
    refused(
      await runCli(
        ['member', 'grant', '--agent', 'live-agent', '--user', 'ana', '--role', 'boss'],
        env,
      ),
      '--role must be owner, editor or viewer',
    );
    const token = (await runCli(['dev-token', '--user', 'ana'], env)).stdout.trim();
    const read = () => send(serve.url, `/v1/traces/${trace.id}`, undefined, { token });
    expect((await read()).status).toBe(200);

    const removed = printed(
      await runCli(['member', 'revoke', '--agent', 'live-agent', '--user', 'ana'], env),
    );
    expect(removed).toEqual({ agentId: 'live-agent', userId: 'ana', removed: true });
    await eventually(async () => (await read()).status, 404);
    const again = printed(
      await runCli(['member', 'revoke', '--agent', 'live-agent', '--user', 'ana'], env),
    );
    expect(again).toEqual({ agentId: 'live-agent', userId: 'ana', removed: false });

    const revoked = printed(await runCli(['key', 'revoke', key.keyId], env));
    expect(revoked).toEqual({ keyId: key.keyId, revoked: true });
    await eventually(
      async () => (await postBatch(serve.url, key.apiKey, runBatch().body)).status,
      401,
    );
    refused(await runCli(['key', 'revoke', 'no-such-key'], env), 'flightlog: no key no-such-key');

    const deleted = printed(await runCli(['agent', 'delete', 'live-agent'], env));
    expect(deleted).toEqual({ agentId: 'live-agent', deleted: true });
    await eventually(
      async () => (await postBatch(serve.url, agent.apiKey, runBatch().body)).status,
      401,
    );
    refused(await runCli(['agent', 'delete', 'live-agent'], env), 'flightlog: no agent live-agent');
    refused(await runCli(['agent', 'delete', 'has space'], env), 'flightlog: no agent has space');
  }, 120_000);

  it("trace share prints the run's public link, which the server opens; trace unshare ends it", async () => {
    const agent = printed(await runCli(['agent', 'create', '--id', 'shared-agent'], env));
    const { body, trace } = runBatch();
    expect((await postBatch(serve.url, agent.apiKey, body)).status).toBe(202);

    const shared = await runCli(['trace', 'share', trace.id], env);
    expect(shared.code, shared.stderr).toBe(0);
    const link = printed(shared);
    expect(link).toEqual({
      traceId: trace.id,
      shareToken: expect.stringMatching(/^fls_[A-Za-z0-9_-]{43}$/),
      url: expect.stringMatching(/\/shared\/fls_[A-Za-z0-9_-]{43}$/),
      created: true,
    });
    expect(link.url.endsWith(`/shared/${link.shareToken}`)).toBe(true);
    const read = await send(serve.url, '/v1/shared/trace', undefined, { token: link.shareToken });
    expect(read.status, read.text).toBe(200);
    expect(read.body.trace.id).toBe(trace.id);
    // sharing again shows the same link: the command reads it back sealed as the server seals
    expect(printed(await runCli(['trace', 'share', trace.id], env))).toEqual({
      ...link,
      created: false,
    });

    const ended = await runCli(['trace', 'unshare', trace.id], env);
    expect(ended.code, ended.stderr).toBe(0);
    expect(printed(ended)).toEqual({ traceId: trace.id, shared: false });
    const dead = await send(serve.url, '/v1/shared/trace', undefined, { token: link.shareToken });
    expect(dead.status).toBe(404);

    for (const command of ['share', 'unshare']) {
      const none = await runCli(['trace', command, 'no-such-run'], env);
      expect(none.code).toBe(2);
      expect(none.stderr).toContain('no run no-such-run');
    }
  });

  it('on stop the server file goes, and the commands open DATA_DIR themselves again', async () => {
    await stop(serve);
    expect(existsSync(serverFile())).toBe(false);
    const agent = printed(await runCli(['agent', 'create', '--id', 'after-stop'], env));
    expect(agent.agentId).toBe('after-stop');
  }, 60_000);
});

describe('CLI commands while `flightlog serve` runs on PGlite, with explicit settings', () => {
  let root: string;
  const started: ServeProcess[] = [];
  const start = async (env: Record<string, string>) => {
    const serve = await startServeProcess(env);
    started.push(serve);
    return serve;
  };
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'flightlog-cli-serving-'));
  });
  afterAll(() => {
    for (const serve of started) if (serve.child.exitCode === null) serve.child.kill('SIGKILL');
    rmSync(root, { recursive: true, force: true });
  });

  it('ADMIN_TOKEN wins: the CLI sends it, and without it says to set it', async () => {
    const dataDir = join(root, 'admin-token');
    const env = {
      DATA_DIR: dataDir,
      JWT_SECRET: 'cli-serving-secret-cli-serving-secret-0123',
      ADMIN_TOKEN: 'cli-serving-admin-token-0123456789',
    };
    const serve = await start(env);
    expect(JSON.parse(readFileSync(join(dataDir, 'flightlog.server.json'), 'utf8')).adminApi).toBe(
      'admin-token',
    );
    const agent = printed(await runCli(['agent', 'create', '--id', 'with-token'], env));
    expect((await postBatch(serve.url, agent.apiKey, runBatch().body)).status).toBe(202);
    const granted = printed(
      await runCli(
        ['member', 'grant', '--agent', 'with-token', '--user', 'bo', '--role', 'owner'],
        env,
      ),
    );
    expect(granted.role).toBe('owner');

    const { ADMIN_TOKEN: _token, ...withoutToken } = env;
    refused(
      await runCli(['agent', 'create'], withoutToken),
      `DATA_DIR ${dataDir} is in use by the server running on it (process ${serve.pid}), whose admin API needs its ADMIN_TOKEN: set ADMIN_TOKEN to it, or stop the server`,
    );
    refused(
      await runCli(['agent', 'create'], { ...env, ADMIN_TOKEN: 'not-the-servers-token-0123' }),
      `the server running on DATA_DIR ${dataDir} (process ${serve.pid}) refused ADMIN_TOKEN: set it to the server's, or stop the server`,
    );
    await stop(serve);
  }, 60_000);

  it('ADMIN_TOKEN wins over the token derived from the local secret', async () => {
    const dataDir = join(root, 'local-secret-and-token');
    const env = { DATA_DIR: dataDir, ADMIN_TOKEN: 'explicit-admin-token-0123456789' };
    const serve = await start({ ...env, FLIGHTLOG_BANNER: 'on' });
    await waitFor(() => (serve.output().includes('Admin API') ? true : undefined), 'the banner');
    expect(serve.output()).toMatch(/Admin API\s+on \(ADMIN_TOKEN\)/);
    const secret = readFileSync(join(dataDir, 'flightlog.secret'), 'utf8').trim();
    const derived = createHmac('sha256', secret).update('flightlog admin api').digest('base64url');
    expect(
      (await send(serve.url, '/admin/v1/agents/x', undefined, { token: derived })).status,
    ).toBe(401);
    const key = await runCli(['key', 'create', '--agent', 'x'], env);
    refused(key, 'flightlog: no agent x');
    refused(
      await runCli(['key', 'create', '--agent', 'x'], { DATA_DIR: dataDir }),
      'set ADMIN_TOKEN',
    );
    await stop(serve);
  }, 60_000);

  it('a server without an admin API, or a holder that is no server: says what to do, exit 2', async () => {
    const dataDir = join(root, 'no-admin-api');
    const env = { DATA_DIR: dataDir, JWT_SECRET: 'cli-serving-secret-cli-serving-secret-0123' };
    const serve = await start(env);
    refused(
      await runCli(['key', 'revoke', 'k'], env),
      `DATA_DIR ${dataDir} is in use by the server running on it (process ${serve.pid}), which has no admin API: stop the server, or restart it with ADMIN_TOKEN set`,
    );
    // migrate needs no admin API: the server migrated when it started
    expect(printed(await runCli(['migrate'], env))).toEqual({ applied: [] });
    await stop(serve);

    const holder = await startLockHolder(dataDir, 'file-lock');
    onTestFinished(() => {
      if (holder.child.exitCode === null) holder.child.kill('SIGKILL');
    });
    // it waits a while for a server on its way up to write its file, then gives up
    const busy = await runCli(['migrate'], env);
    refused(
      busy,
      `DATA_DIR ${dataDir} is in use by process ${holder.pid}, which is not a running server (no flightlog.server.json names it): stop it, or wait until it ends`,
    );
    holder.child.kill('SIGTERM');
    await holder.exited;
  }, 60_000);
});
