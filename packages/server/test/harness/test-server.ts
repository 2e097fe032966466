import { randomBytes } from 'node:crypto';
import { buildApp, type FlightlogApp } from '../../src/app.js';
import { mintDevToken } from '../../src/auth/dev-token.js';
import { changeConfig, loadConfig, type Config, type ConfigChanges } from '../../src/config.js';
import { openStore, type Store } from '../../src/store/open-store.js';
import { createRedisBus } from '../../src/live/redis-bus.js';
import {
  disposeLocation,
  freshLocation,
  redisUrl,
  type BusName,
  type EngineLocation,
  type EngineName,
} from './engines.js';

export interface TestAgent {
  agentId: string;
  apiKey: string;
  verifyToken: string;
}

/** A real Flightlog app listening on a loopback port, with a fresh store of its own. */
export interface TestServer extends FlightlogApp {
  engine: EngineName;
  location: EngineLocation;
  liveRedisPrefix: string;
  url: string;
  store: Store;
  config: Config;
  adminToken: string;
  jwtSecret: string;
  /** Creates an agent through the admin API. */
  createAgent(body?: { id?: string; name?: string }): Promise<TestAgent>;
  /** Grants `userId` a role on `agentId` (admin API) and returns an identity token for them. */
  userToken(
    userId: string,
    agentId?: string,
    role?: 'owner' | 'editor' | 'viewer',
  ): Promise<string>;
  close(): Promise<void>;
}

export interface TestServerOptions {
  /** Live bus engine (default memory). Redis uses a key prefix of its own per server. */
  bus?: BusName;
  /** Share another server's store location and Redis prefix (multi-instance tests). */
  shareWith?: TestServer;
  /** Collects the app's JSON log lines here (logging is off otherwise). */
  logLines?: string[];
  /** Adds to the app before it listens (e.g. a route the test controls). */
  beforeListen?: (app: FlightlogApp['app']) => void;
}

export async function startTestServer(
  engine: EngineName,
  changes: ConfigChanges = {},
  options: TestServerOptions = {},
): Promise<TestServer> {
  const adminToken = randomBytes(24).toString('hex');
  // instances of one deployment share their secret (identity tokens, share links)
  const jwtSecret = options.shareWith?.jwtSecret ?? randomBytes(32).toString('hex');
  const location = options.shareWith?.location ?? freshLocation(engine);
  const config = changeConfig(
    changeConfig(loadConfig({}), {
      http: { port: 0, host: '127.0.0.1' },
      auth: { adminToken, jwtSecret },
      analysis: { graceMs: 0 },
      store: location,
    }),
    changes,
  );
  const store = await openStore({
    ...(config.store.databaseUrl ? { databaseUrl: config.store.databaseUrl } : {}),
    ...(config.store.databaseSchema ? { databaseSchema: config.store.databaseSchema } : {}),
    poolSize: 4,
    ingestGroup: config.store.ingestGroup,
  });
  const liveRedisPrefix =
    options.shareWith?.liveRedisPrefix ?? `flightlog-test:${randomBytes(6).toString('hex')}:`;
  const bus =
    options.bus === 'redis'
      ? createRedisBus({ url: redisUrl(), keyPrefix: liveRedisPrefix, blockMs: 200 })
      : undefined;
  // as the server does at start-up: publishing before the connection is up would fail fast
  if (bus && !(await bus.ready(5_000))) throw new Error('Redis bus not ready within 5 s');
  const lines = options.logLines;
  const built = await buildApp({
    config,
    store,
    logger: lines ? { destination: { write: (line: string) => lines.push(line) } } : false,
    ...(bus ? { bus } : {}),
  });
  options.beforeListen?.(built.app);
  await built.app.listen({ port: 0, host: '127.0.0.1' });
  const address = built.app.server.address();
  if (!address || typeof address === 'string') throw new Error('no address');
  const url = `http://127.0.0.1:${address.port}`;

  const admin = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(url + path, {
      method,
      headers: {
        authorization: `Bearer ${adminToken}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    if (!response.ok)
      throw new Error(`admin ${method} ${path}: ${response.status} ${await response.text()}`);
    return response.status === 204 ? undefined : ((await response.json()) as unknown);
  };

  let closing: Promise<void> | undefined;
  return {
    ...built,
    engine,
    location,
    liveRedisPrefix,
    url,
    store,
    config,
    adminToken,
    jwtSecret,
    async createAgent(body = {}) {
      return (await admin('POST', '/admin/v1/agents', body)) as TestAgent;
    },
    async userToken(userId, agentId, role = 'viewer') {
      if (agentId) await admin('PUT', `/admin/v1/agents/${agentId}/members/${userId}`, { role });
      return mintDevToken(jwtSecret, userId);
    },
    close() {
      // a server sharing another's store leaves disposing it to the owner
      closing ??= built.app
        .close()
        .then(() => (options.shareWith ? undefined : disposeLocation(location)));
      return closing;
    },
  };
}
