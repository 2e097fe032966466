import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { stripVTControlCharacters } from 'node:util';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import {
  disposeLocation,
  describeEngines,
  freshLocation,
  type EngineLocation,
} from '../harness/engines.js';
import { send } from '../harness/http.js';
import { CLI, runCli, startServeProcess, type ServeProcess } from '../harness/cli-process.js';

/** The sign-in link of a start-up banner, and the token in its fragment. */
function signIn(output: string): { link: string; token: string } {
  const link = /Sign in\s+(http:\/\/\S+)/.exec(output)?.[1];
  if (!link) throw new Error(`no sign-in link in: ${output}`);
  return { link, token: new URL(link).hash.replace(/^#token=/, '') };
}

function subject(token: string): unknown {
  return JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString()).sub;
}

/** Waits for the banner, printed just after the "listening" log line. */
async function withBanner(serve: ServeProcess): Promise<ServeProcess> {
  const deadline = Date.now() + 10_000;
  while (!serve.output().includes('Flightlog is running.')) {
    if (Date.now() > deadline) throw new Error(`no banner: ${serve.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return serve;
}

async function stop(serve: ServeProcess): Promise<void> {
  serve.child.kill('SIGTERM');
  expect(await serve.exited).toBe(0);
}

describeEngines('first run without configuration [%s]', (engine) => {
  let dataDir: string;
  let location: EngineLocation;
  let env: Record<string, string>;
  let serve: ServeProcess | undefined;
  // every process started here, so that a failed test leaves none running
  const started: ServeProcess[] = [];
  const start = async (processEnv: Record<string, string>) => {
    const running = await startServeProcess(processEnv);
    started.push(running);
    return withBanner(running);
  };

  beforeAll(() => {
    dataDir = join(mkdtempSync(join(tmpdir(), 'flightlog-first-run-')), 'data');
    location = freshLocation(engine);
    // no JWT_SECRET, JWT_JWKS_URL, ADMIN_TOKEN; HOST unset (the harness's default is cleared);
    // on PostgreSQL the secret still lives in DATA_DIR
    env = {
      HOST: '',
      DATA_DIR: dataDir,
      FLIGHTLOG_BANNER: 'on',
      ...(engine === 'postgres'
        ? { DATABASE_URL: location.databaseUrl!, DATABASE_SCHEMA: location.databaseSchema! }
        : {}),
    };
  });
  afterAll(async () => {
    for (const process of started)
      if (process.child.exitCode === null) process.child.kill('SIGKILL');
    await disposeLocation(location);
    rmSync(join(dataDir, '..'), { recursive: true, force: true });
  });

  it('makes a 0600 secret, listens on loopback, prints a link that signs the local operator in, and the link survives a restart', async () => {
    serve = await start(env);
    const secretFile = join(dataDir, 'flightlog.secret');
    expect(statSync(secretFile).mode & 0o777).toBe(0o600);
    const secret = readFileSync(secretFile, 'utf8').trim();
    expect(Buffer.from(secret, 'base64url')).toHaveLength(32);

    // loopback only, as the log line and the banner say
    expect(serve.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const port = new URL(serve.url).port;
    expect(serve.output()).toMatch(
      new RegExp(`Listening\\s+127\\.0\\.0\\.1:${port} \\(this machine only`),
    );
    expect(serve.output()).toContain(`Dashboard  http://localhost:${port}`);
    expect(serve.output()).toMatch(engine === 'pglite' ? /Store\s+PGlite/ : /Store\s+PostgreSQL/);
    // the secret never shows, in the banner or the logs; its file does
    expect(serve.output()).not.toContain(secret);
    expect(serve.output()).toContain(secretFile);
    expect(serve.output()).toContain('Admin API  on, token derived from the local secret');

    const first = signIn(serve.output());
    expect(first.link.startsWith(`http://localhost:${port}/#token=`)).toBe(true);
    expect(subject(first.token)).toBe('local-operator');
    const agents = await send(serve.url, '/v1/agents', undefined, { token: first.token });
    expect(agents.status, agents.text).toBe(200);
    expect(agents.body.agents).toEqual([]);
    // the admin API takes the token derived from the secret, not a sign-in token; to anyone
    // without it, it is not there at all (design.md: it exists only with ADMIN_TOKEN)
    for (const token of [first.token, undefined]) {
      const admin = await send(serve.url, '/admin/v1/agents', {}, { method: 'POST', token });
      expect(admin.status).toBe(404);
      expect(admin.body.detail).toBe('No route POST /admin/v1/agents.');
    }

    // the CLI's token commands sign with the same secret once the server made it
    const link = await runCli(['dashboard-link', '--user', 'local-operator'], {
      DATA_DIR: dataDir,
    });
    expect(link.code, link.stderr).toBe(0);
    const fromCli = new URL(link.stdout.trim()).hash.replace(/^#token=/, '');
    expect((await send(serve.url, '/v1/agents', undefined, { token: fromCli })).status).toBe(200);

    await stop(serve);
    serve = await start(env);
    expect(readFileSync(secretFile, 'utf8').trim()).toBe(secret);
    const again = await send(serve.url, '/v1/agents', undefined, { token: first.token });
    expect(again.status, again.text).toBe(200);
    const second = signIn(serve.output());
    expect((await send(serve.url, '/v1/agents', undefined, { token: second.token })).status).toBe(
      200,
    );
    await stop(serve);
  }, 120_000);

  it('keeps explicit configuration: JWT_SECRET replaces the local secret, HOST is obeyed', async () => {
    const otherDir = mkdtempSync(join(tmpdir(), 'flightlog-explicit-'));
    try {
      serve = await start({
        ...env,
        DATA_DIR: otherDir,
        JWT_SECRET: 'explicit-secret-explicit-secret-0123456789',
        HOST: '127.0.0.1',
      });
      expect(existsSync(join(otherDir, 'flightlog.secret'))).toBe(false);
      // no link for anyone: the operator chose the identities
      expect(serve.output()).not.toContain('#token=');
      expect(serve.output()).toContain('dashboard-link --user');
      await stop(serve);
    } finally {
      rmSync(otherDir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('first run, the settings around it', () => {
  let dataDir: string;
  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'flightlog-first-run-'));
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('refuses a production start without identity configuration, saying what to set', async () => {
    const refused = await runCli(['serve'], {
      NODE_ENV: 'production',
      DATA_DIR: dataDir,
      PORT: '0',
    });
    expect(refused.code).toBe(2);
    expect(refused.stderr.trim()).toBe(
      'flightlog: NODE_ENV=production needs identity configuration: set JWT_SECRET (32 or more random characters), or JWT_JWKS_URL with JWT_ISSUER and JWT_AUDIENCE',
    );
    expect(existsSync(join(dataDir, 'flightlog.secret'))).toBe(false);
  });

  it('prints only JSON lines when stdout is not a terminal, as before: no banner, no link', async () => {
    const serve = await startServeProcess({ DATA_DIR: dataDir });
    onTestFinished(() => {
      if (serve.child.exitCode === null) serve.child.kill('SIGKILL');
    });
    // where a terminal would see the banner by now
    await new Promise((resolve) => setTimeout(resolve, 500));
    const lines = serve.output().split('\n').filter(Boolean);
    for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow();
    expect(serve.output()).not.toContain('#token=');
    const listening = lines
      .map((line) => JSON.parse(line))
      .find((entry) => entry.msg === 'flightlog listening');
    // the heap's growth the process was given (cli/heap-growth.ts), for an operator to see
    expect(listening).toMatchObject({ store: 'pglite', heapGrowingPercent: 100 });
    await stop(serve);
  }, 60_000);

  // a real terminal: `script` runs the CLI on a pseudo-terminal
  const inTerminal = (env: Record<string, string>) =>
    new Promise<string>((resolve, reject) => {
      const child = spawn(
        'script',
        ['-qefc', `${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} serve`, '/dev/null'],
        {
          env: {
            PATH: process.env.PATH ?? '',
            PORT: '0',
            DATA_DIR: mkdtempSync(join(dataDir, 'tty-')),
            ...env,
          },
          stdio: ['pipe', 'pipe', 'pipe'],
        },
      );
      let output = '';
      const timer = setTimeout(() => reject(new Error(`no banner: ${output}`)), 60_000);
      child.stdout.on('data', (d: Buffer) => {
        output += d.toString();
        // the log lines go out asynchronously (pino), the banner at once: wait for both
        if (/Admin API/.test(output) && /flightlog listening/.test(output)) {
          clearTimeout(timer);
          child.kill('SIGTERM');
        }
      });
      // colors are for people: the assertions read the text
      child.on('close', () => resolve(stripVTControlCharacters(output)));
    });

  it.skipIf(!existsSync('/usr/bin/script'))(
    'in a terminal: the banner and readable log lines; LOG_FORMAT=json keeps JSON',
    async () => {
      const pretty = await inTerminal({});
      expect(pretty).toContain('Flightlog is running.');
      expect(pretty).toMatch(/INFO .*flightlog listening .*url=http:\/\/127\.0\.0\.1:\d+/);
      expect(pretty).not.toContain('"msg":"flightlog listening"');
      signIn(pretty);

      const json = await inTerminal({ LOG_FORMAT: 'json' });
      expect(json).toContain('"msg":"flightlog listening"');
      expect(json).toContain('Flightlog is running.');
    },
    120_000,
  );
});
