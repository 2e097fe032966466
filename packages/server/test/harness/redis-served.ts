import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mintDevToken } from '../../src/auth/dev-token.js';
import { changeConfig, loadConfig, type ConfigChanges } from '../../src/config.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { disposeLocation, freshLocation, type EngineName } from './engines.js';
import { send } from './http.js';
import { RedisProcess } from './redis-process.js';

/** A server on a Redis of its own, with an agent and a viewer of it. */
export interface RedisServed {
  server: RunningServer;
  redis: RedisProcess;
  agent: { agentId: string; apiKey: string };
  /** The viewer's identity token. */
  token: string;
  dispose(): Promise<void>;
}

/**
 * `flightlog serve` as the CLI wires it (startServer: the Redis bus with its backlog and the
 * store as its replay history), on a Redis server of the test's own that it can kill and
 * restart, with one agent and one viewer of it.
 */
export async function startServedOnOwnRedis(
  engine: EngineName,
  changes: ConfigChanges = {},
): Promise<RedisServed> {
  const redis = await RedisProcess.start();
  const location = freshLocation(engine);
  const dataDir = mkdtempSync(join(tmpdir(), 'flightlog-own-redis-'));
  const adminToken = randomBytes(24).toString('hex');
  const jwtSecret = randomBytes(32).toString('hex');
  const server = await startServer(
    changeConfig(
      changeConfig(loadConfig({}), {
        http: { port: 0, host: '127.0.0.1' },
        store: { dataDir, ...location },
        auth: { adminToken, jwtSecret },
        live: { redisUrl: redis.url },
        analysis: { worker: false },
      }),
      changes,
    ),
    { logger: false },
  );
  const created = await send(server.url, '/admin/v1/agents', {}, { token: adminToken });
  const agent = created.body as { agentId: string; apiKey: string };
  const user = `viewer-${randomBytes(4).toString('hex')}`;
  await send(
    server.url,
    `/admin/v1/agents/${agent.agentId}/members/${user}`,
    { role: 'viewer' },
    { method: 'PUT', token: adminToken },
  );
  return {
    server,
    redis,
    agent,
    token: await mintDevToken(jwtSecret, user),
    async dispose() {
      await server.close();
      await redis.kill();
      await disposeLocation(location);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
