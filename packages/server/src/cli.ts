#!/usr/bin/env node
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { IDENTIFIER_RULE, isMemberUserId } from '@flightlog/protocol';
import {
  DASHBOARD_LINK_TTL_SECONDS,
  dashboardBaseUrl,
  dashboardLink,
} from './auth/dashboard-link.js';
import { mintDevToken } from './auth/dev-token.js';
import { AdminApiClient } from './cli/admin-api-client.js';
import { applyHeapGrowth } from './cli/heap-growth.js';
import type { Administration } from './cli/administration.js';
import {
  RunningServerError,
  adminCredential,
  describeServer,
  findRunningServer,
  writeServerFile,
  type ServerFile,
} from './cli/running-server.js';
import {
  ExportUsageError,
  exportCommandRange,
  exportQueryString,
  storeExport,
  writeExport,
  type ExportCommand,
} from './cli/export-command.js';
import { storeAdministration } from './cli/store-administration.js';
import { VerifyUsageError, verdictLine, verifyFile } from './cli/verify-command.js';
import { SolanaAnchorReader } from './anchoring/solana-anchor-reader.js';
import {
  ANCHOR_DEFAULT_RPC,
  ConfigError,
  loadConfig,
  type AnchorCluster,
  type Config,
} from './config.js';
import { runDemo } from './cli/demo-command.js';
import type { LifecycleSettingsChange } from './lifecycle/agent-settings.js';
import { RETENTION_MAX_DAYS, RUN_TIMEOUT_MAX_MS } from './lifecycle/lifecycle-config.js';
import { LOCAL_OPERATOR, readLocalSecret } from './first-run/local-secret.js';
import { serveIdentity } from './first-run/serve-identity.js';
import { startUpBanner } from './first-run/start-up-banner.js';
import { prettyLogDestination } from './observability/pretty-log.js';
import { startServer } from './server.js';
import { WorkerNeedsDatabaseError, startWorker } from './worker.js';
import { MEMBER_ROLES, type MemberRole } from './store/agent-store.js';
import { DataDirInUseError } from './store/data-dir-lock.js';
import { migrate } from './store/migrate.js';
import { openStore, type Store } from './store/open-store.js';
import { storeOptionsFrom } from './store/store-from-config.js';

const USAGE = `Usage: flightlog <command> [options]

Commands:
  serve                                       start the service (default)
  worker                                      run a stand-alone analysis worker (needs
                                              DATABASE_URL beside a running server)
  migrate                                     apply pending database migrations
  agent create [--id ID] [--name NAME]        create an agent; prints agentId, apiKey, verifyToken
  agent delete ID                             delete an agent with its keys, members and traces
  agent lifecycle ID [--run-timeout-ms MS|default] [--retention-days DAYS|default]
                                              show or change an agent's run time-out and
                                              retention (0: never; default: RUN_TIMEOUT_MS,
                                              RETENTION_DAYS)
  export --agent ID [--since ISO] [--until ISO] [--cursor C] [--out FILE]
                                              write the agent's runs as NDJSON (one run with its
                                              events a line, oldest first) to FILE or standard
                                              output, with progress on standard error; since is
                                              inclusive, until exclusive (startedAt); --cursor
                                              (a line's "cursor") resumes after that line's run
  verify FILE [--rpc URL | --cluster C] [--signer ADDRESS]
                                              check runs against their fingerprints (traceHash),
                                              offline: an export (NDJSON) or one run as the read
                                              API answers it, and an anchored run's audit path to
                                              its root; with --rpc (or --cluster devnet|mainnet,
                                              its public RPC) the memo of the transaction at
                                              anchorSignature too, and with --signer who signed
                                              it; exit 1 if any run fails, saying at which step
  trace share ID                              share a run: print its public link (a new one,
                                              or its current one) as PUBLIC_URL (or
                                              http://localhost:PORT) + /shared/<token>
  trace unshare ID                            end a run's public link at once
  key create --agent ID                       issue another API key for an agent
  key revoke KEY_ID                           revoke an API key
  member grant --agent ID --user SUB --role owner|editor|viewer
  member revoke --agent ID --user SUB
  dev-token --user SUB [--ttl SECONDS]        mint an HS256 identity token (with JWT_SECRET, or
                                              the local secret serve made in DATA_DIR)
  dashboard-link --user SUB [--ttl SECONDS]   print a dashboard sign-in link for SUB: PUBLIC_URL
                                              (or http://localhost:PORT) + #token=<identity
                                              token>; the same secret; TTL 12 h by default
  demo [--once] [--agent-script FILE]         start a server, run an example agent (FILE; npm run
                                              demo gives the repository's) through a few runs, or
                                              store a sample run, and tail them live; --once exits
                                              afterwards

Configuration comes from the environment (see the README): DATABASE_URL or DATA_DIR, PORT, ...
Commands that touch the store open it directly. While a server runs on the same DATA_DIR
(embedded engine), the agent, key, member and export commands go through its admin API
(ADMIN_TOKEN, or without identity configuration the token derived from the local secret).`;

class UsageError extends Error {}

function print(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

function required(value: string | undefined, flag: string): string {
  if (!value) throw new UsageError(`missing ${flag}`);
  return value;
}

/** `--agent-script FILE` of `demo`: an existing file, made absolute; undefined when not given. */
function exampleAgent(file: string | undefined): string | undefined {
  if (file === undefined) return undefined;
  const path = resolve(file);
  if (!existsSync(path)) throw new UsageError(`--agent-script ${file}: no such file`);
  return path;
}

/** `--ttl`: a positive whole number of seconds, `fallback` when absent. */
function ttlSeconds(value: string | undefined, fallback: number): number {
  const ttl = value === undefined ? fallback : Number(value);
  if (!Number.isInteger(ttl) || ttl <= 0)
    throw new UsageError('--ttl must be a positive whole number');
  return ttl;
}

/** `--run-timeout-ms`, `--retention-days`: a whole number, or `default` (null: the server's). */
function settingValue(
  value: string | undefined,
  flag: string,
  max: number,
): number | null | undefined {
  if (value === undefined) return undefined;
  if (value === 'default') return null;
  if (!/^\d+$/.test(value) || Number(value) > max)
    throw new UsageError(`${flag} must be a whole number from 0 to ${max}, or default`);
  return Number(value);
}

function lifecycleChange(values: {
  'run-timeout-ms'?: string | undefined;
  'retention-days'?: string | undefined;
}): LifecycleSettingsChange {
  const runTimeoutMs = settingValue(
    values['run-timeout-ms'],
    '--run-timeout-ms',
    RUN_TIMEOUT_MAX_MS,
  );
  const retentionDays = settingValue(
    values['retention-days'],
    '--retention-days',
    RETENTION_MAX_DAYS,
  );
  return {
    ...(runTimeoutMs === undefined ? {} : { runTimeoutMs }),
    ...(retentionDays === undefined ? {} : { retentionDays }),
  };
}

function warn(message: string): void {
  process.stderr.write(`warning: ${message}\n`);
}

/** The store for a command, migrated as the command says. */
function openCommandStore(config: Config, migrate: boolean): Promise<Store> {
  return openStore({ ...storeOptionsFrom(config.store, 'command'), migrate });
}

/**
 * Runs `direct` on the store, or, when a server holds `DATA_DIR` (the embedded engine is
 * single-process), `viaServer` with what that server wrote about itself.
 */
async function withStoreOrServer<T>(
  config: Config,
  work: {
    direct: (store: Store) => Promise<T>;
    viaServer: (server: ServerFile) => Promise<T>;
    migrate?: boolean;
  },
): Promise<T> {
  let store: Store;
  try {
    store = await openCommandStore(config, work.migrate ?? true);
  } catch (error) {
    if (!(error instanceof DataDirInUseError)) throw error;
    return work.viaServer(await findRunningServer(error));
  }
  try {
    return await work.direct(store);
  } finally {
    await store.close();
  }
}

/** Agent, key and member administration on the store, or through the running server. */
function withAdministration<T>(
  config: Config,
  work: (admin: Administration) => Promise<T>,
): Promise<T> {
  return withStoreOrServer(config, {
    direct: (store) => work(storeAdministration(store, config, warn)),
    viaServer: (server) =>
      work(
        new AdminApiClient(
          server.url,
          adminCredential(config.store.dataDir, server, config),
          describeServer(config.store.dataDir, server),
        ),
      ),
  });
}

/**
 * `flightlog export`: the agent's runs from the store, or from the running server's admin
 * export route, written as the server's export route answers them.
 */
function exportRuns(config: Config, command: ExportCommand): Promise<void> {
  const range = exportCommandRange(command);
  const progress = { stream: process.stderr };
  return withStoreOrServer(config, {
    direct: async (store) => {
      if (!(await store.agents.getAgent(command.agentId)))
        throw new UsageError(`no agent ${command.agentId}`);
      await writeExport(storeExport(store, command.agentId, range), command, progress);
    },
    viaServer: async (server) => {
      const client = new AdminApiClient(
        server.url,
        adminCredential(config.store.dataDir, server, config),
        describeServer(config.store.dataDir, server),
      );
      const source = await client.exportRuns(command.agentId, exportQueryString(command));
      if (!source) throw new UsageError(`no agent ${command.agentId}`);
      await writeExport(source, command, progress);
    },
  });
}

async function serve(configured: Config): Promise<void> {
  const { config, localSecret, adminApi } = serveIdentity(configured);
  applyHeapGrowth(config.process.heapGrowingPercent);
  const terminal = process.stdout.isTTY === true;
  const pretty = (config.process.logFormat ?? (terminal ? 'pretty' : 'json')) === 'pretty';
  const server = await startServer(
    config,
    pretty ? { logger: { destination: prettyLogDestination(process.stdout, terminal) } } : {},
  );
  const store = server.store.engine;
  const log = server.app.log;
  // Where CLI commands find this server while it holds DATA_DIR; gone before the lock is. Only
  // a convenience: without it those commands say to stop the server, as they did before.
  let removeServerFile = () => {};
  if (store === 'pglite')
    try {
      removeServerFile = writeServerFile(config.store.dataDir, {
        url: server.url,
        pid: process.pid,
        adminApi,
      });
    } catch (error) {
      log.warn({ err: error }, 'CLI commands cannot reach this server: its file was not written');
    }
  // an operator should see at a glance whether a 202 survives a power cut
  const durability = store === 'pglite' ? { durability: config.store.dataDirDurability } : {};
  log.info(
    {
      url: server.url,
      store,
      ...durability,
      heapGrowingPercent: config.process.heapGrowingPercent,
    },
    'flightlog listening',
  );
  if (localSecret) {
    // where the secret is, never the secret; the sign-in link is printed to a terminal only
    log.info(
      { secretFile: localSecret.path, created: localSecret.created, user: LOCAL_OPERATOR },
      'no JWT_SECRET or JWT_JWKS_URL: identity tokens signed with the local secret',
    );
    if (localSecret.readableByOthers)
      log.warn(
        { secretFile: localSecret.path },
        'the local secret is readable by others: chmod 600',
      );
  }
  if (config.process.startUpBanner ?? terminal) {
    const port = Number(new URL(server.url).port);
    const dashboardUrl = dashboardBaseUrl({ publicUrl: config.http.publicUrl, port });
    const signIn =
      localSecret && (await dashboardLink(localSecret.secret, LOCAL_OPERATOR, dashboardUrl));
    process.stdout.write(
      startUpBanner({
        config,
        dashboardUrl,
        listening: { host: config.http.host, port },
        signInLink: signIn || undefined,
        localSecret,
        adminApi,
      }),
    );
  }
  const stop = (signal: string) => {
    log.info({ signal }, 'shutting down');
    removeServerFile();
    server.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}

/**
 * The secret `dev-token` and `dashboard-link` sign with: `JWT_SECRET`, or without any identity
 * configuration the local secret a server made in the data directory.
 */
function tokenSecret(config: Config, command: string): string {
  if (config.auth.jwtSecret) return config.auth.jwtSecret;
  const local =
    config.auth.jwtJwksUrl === undefined ? readLocalSecret(config.store.dataDir) : undefined;
  if (local) return local;
  throw new UsageError(
    `${command} needs JWT_SECRET, or the local secret a first \`flightlog serve\` makes in DATA_DIR`,
  );
}

async function worker(config: Config): Promise<void> {
  applyHeapGrowth(config.process.heapGrowingPercent);
  const running = await startWorker(config);
  const stop = (signal: string) => {
    process.stderr.write(`flightlog worker: ${signal}, stopping\n`);
    running.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}

async function verify(
  path: string,
  chain: { rpc?: string; cluster?: string; signer?: string },
): Promise<void> {
  if (chain.rpc !== undefined && chain.cluster !== undefined)
    throw new UsageError('give --rpc or --cluster, not both');
  if (chain.cluster !== undefined && !(chain.cluster in ANCHOR_DEFAULT_RPC))
    throw new UsageError(`--cluster must be one of ${Object.keys(ANCHOR_DEFAULT_RPC).join(', ')}`);
  const rpcUrl =
    chain.rpc ?? (chain.cluster ? ANCHOR_DEFAULT_RPC[chain.cluster as AnchorCluster] : undefined);
  if (rpcUrl === undefined && chain.signer !== undefined)
    throw new UsageError('--signer needs --rpc or --cluster: the signer is read on chain');
  const report = await verifyFile(
    path,
    (verdict) => process.stdout.write(`${verdictLine(verdict)}\n`),
    rpcUrl === undefined
      ? {}
      : {
          chain: {
            reader: new SolanaAnchorReader(rpcUrl),
            ...(chain.signer !== undefined ? { signer: chain.signer } : {}),
          },
        },
  );
  process.stdout.write(
    `${report.verified} verified, ${report.failed} failed, ${report.notFingerprinted} without a fingerprint` +
      (report.anchored > 0
        ? `; ${report.anchored} of the verified anchored${rpcUrl === undefined ? ' (their transactions not checked: no --rpc)' : ''}`
        : '') +
      '\n',
  );
  if (report.failed > 0) process.exitCode = 1;
}

async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      id: { type: 'string' },
      name: { type: 'string' },
      rpc: { type: 'string' },
      cluster: { type: 'string' },
      signer: { type: 'string' },
      agent: { type: 'string' },
      user: { type: 'string' },
      role: { type: 'string' },
      ttl: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
      once: { type: 'boolean' },
      'agent-script': { type: 'string' },
      'run-timeout-ms': { type: 'string' },
      'retention-days': { type: 'string' },
      since: { type: 'string' },
      until: { type: 'string' },
      cursor: { type: 'string' },
      out: { type: 'string' },
    },
  });
  const [command = 'serve', sub] = positionals;
  if (values.help || command === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  // Offline: no configuration, no store, no server.
  if (command === 'verify')
    return verify(required(sub, 'FILE'), {
      ...(values.rpc !== undefined ? { rpc: values.rpc } : {}),
      ...(values.cluster !== undefined ? { cluster: values.cluster } : {}),
      ...(values.signer !== undefined ? { signer: values.signer } : {}),
    });
  const config = loadConfig();
  switch (
    `${command}${sub ? ` ${sub}` : ''}`.replace(
      /^(key revoke|agent delete|agent lifecycle|trace share|trace unshare) .*/,
      '$1',
    )
  ) {
    case 'serve':
      return serve(config);
    case 'worker':
      return worker(config);
    case 'demo':
      return runDemo(config, {
        once: values.once === true,
        dataDirGiven: process.env.DATA_DIR !== undefined,
        agentScript: exampleAgent(values['agent-script']),
      });
    case 'migrate':
      return withStoreOrServer(config, {
        direct: async (store) => print({ applied: await migrate(store.sql) }),
        // a server migrates when it starts, under the same lock: nothing is left to apply
        viaServer: async (server) => {
          process.stderr.write(
            `${describeServer(config.store.dataDir, server)} applied the migrations when it started; ` +
              'a newer version applies its own when it is restarted\n',
          );
          print({ applied: [] });
        },
        migrate: false,
      });
    case 'agent create':
      return withAdministration(config, async (admin) => {
        const outcome = await admin.createAgent({ id: values.id, name: values.name });
        if (outcome.kind === 'invalid-id')
          throw new UsageError(`--id ${JSON.stringify(values.id)}: an id is ${IDENTIFIER_RULE}`);
        if (outcome.kind === 'exists') throw new UsageError(`agent ${values.id} exists already`);
        print(outcome.agent);
      });
    case 'agent delete': {
      const agentId = required(positionals[2], 'ID');
      return withAdministration(config, async (admin) => {
        if (!(await admin.deleteAgent(agentId))) throw new UsageError(`no agent ${agentId}`);
        print({ agentId, deleted: true });
      });
    }
    case 'agent lifecycle': {
      const agentId = required(positionals[2], 'ID');
      const change = lifecycleChange(values);
      return withAdministration(config, async (admin) => {
        const settings = await admin.lifecycle(agentId, change);
        if (!settings) throw new UsageError(`no agent ${agentId}`);
        print(settings);
      });
    }
    case 'export':
      return exportRuns(config, {
        agentId: required(values.agent, '--agent'),
        since: values.since,
        until: values.until,
        cursor: values.cursor,
        out: values.out,
      });
    case 'trace share': {
      const traceId = required(positionals[2], 'ID');
      return withAdministration(config, async (admin) => {
        const outcome = await admin.shareRun(traceId);
        if (outcome.kind === 'not-found') throw new UsageError(`no run ${traceId}`);
        if (outcome.kind === 'unavailable')
          throw new UsageError('sharing needs SHARE_SECRET or JWT_SECRET (or the local secret)');
        print({
          traceId,
          shareToken: outcome.shareToken,
          url: `${dashboardBaseUrl(config.http).replace(/\/+$/, '')}${outcome.path}`,
          created: outcome.created,
        });
      });
    }
    case 'trace unshare': {
      const traceId = required(positionals[2], 'ID');
      return withAdministration(config, async (admin) => {
        if (!(await admin.unshareRun(traceId))) throw new UsageError(`no run ${traceId}`);
        print({ traceId, shared: false });
      });
    }
    case 'key create': {
      const agentId = required(values.agent, '--agent');
      return withAdministration(config, async (admin) => {
        const key = await admin.createKey(agentId);
        if (!key) throw new UsageError(`no agent ${agentId}`);
        print(key);
      });
    }
    case 'key revoke': {
      const keyId = required(positionals[2], 'KEY_ID');
      return withAdministration(config, async (admin) => {
        if (!(await admin.revokeKey(keyId))) throw new UsageError(`no key ${keyId}`);
        print({ keyId, revoked: true });
      });
    }
    case 'member grant': {
      const role = required(values.role, '--role') as MemberRole;
      if (!MEMBER_ROLES.includes(role))
        throw new UsageError('--role must be owner, editor or viewer');
      const agentId = required(values.agent, '--agent');
      const userId = required(values.user, '--user');
      if (!isMemberUserId(userId))
        throw new UsageError(
          `--user ${JSON.stringify(userId)}: a user id is 1 to 256 characters, without control, ` +
            'zero-width or bidi characters, and without white space at either end',
        );
      return withAdministration(config, async (admin) => {
        if (!(await admin.grantMember(agentId, userId, role)))
          throw new UsageError(`no agent ${agentId}`);
        print({ agentId, userId, role });
      });
    }
    case 'member revoke': {
      const agentId = required(values.agent, '--agent');
      const userId = required(values.user, '--user');
      return withAdministration(config, async (admin) => {
        const removed = await admin.revokeMember(agentId, userId);
        print({ agentId, userId, removed });
      });
    }
    case 'dev-token': {
      const secret = tokenSecret(config, 'dev-token');
      const ttl = ttlSeconds(values.ttl, 3600);
      process.stdout.write(`${await mintDevToken(secret, required(values.user, '--user'), ttl)}\n`);
      return;
    }
    case 'dashboard-link': {
      const secret = tokenSecret(config, 'dashboard-link');
      const ttl = ttlSeconds(values.ttl, DASHBOARD_LINK_TTL_SECONDS);
      const user = required(values.user, '--user');
      process.stdout.write(
        `${await dashboardLink(secret, user, dashboardBaseUrl(config.http), ttl)}\n`,
      );
      return;
    }
    default:
      throw new UsageError(`unknown command "${positionals.join(' ')}"`);
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (
    error instanceof UsageError ||
    error instanceof ExportUsageError ||
    error instanceof VerifyUsageError ||
    error instanceof ConfigError ||
    error instanceof WorkerNeedsDatabaseError ||
    error instanceof RunningServerError
  ) {
    process.stderr.write(
      `flightlog: ${error.message}\n\n${error instanceof UsageError ? USAGE : ''}\n`,
    );
    process.exit(2);
  }
  process.stderr.write(`flightlog: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
