// One bus end to end: its own Redis prefix and database schema (or data directory), a server
// started for it and the bare SSE server, agents and viewers through the admin API; then idle,
// delivery and replay, in that order; every resource released whatever happens.

import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pool } from '../load.mjs';
import { CFG, lifecycle, messageOf } from './config.mjs';
import { compareDelivery } from './delivery.mjs';
import { compareIdle } from './idle.mjs';
import { openRunRedis, redisUnavailable } from './redis.mjs';
import { compareReplay, replayWithRaisedCap } from './replay.mjs';
import { adminClient, readMemory, startBareServer, startServer } from './servers.mjs';

/**
 * @typedef {import('../support.mjs').ChildHandle} ChildHandle
 * @typedef {import('../support.mjs').ServerHandle} ServerHandle
 * @typedef {import('./config.mjs').Thrown} Thrown
 * @typedef {import('./servers.mjs').BareServer} BareServer
 * @typedef {import('./servers.mjs').CreatedAgent} CreatedAgent
 * @typedef {import('./redis.mjs').RunRedis} RunRedis
 * @typedef {import('./idle.mjs').IdleComparison} IdleComparison
 * @typedef {import('./delivery.mjs').DeliveryComparison} DeliveryComparison
 * @typedef {import('./replay.mjs').ReplayComparison} ReplayComparison
 */

/**
 * The modules benchBus() needs, loaded once in main(), and the database the server runs on.
 * @typedef {object} BusDeps
 * @property {string} database 'postgres' or 'pglite'
 * @property {typeof import('pg').default} pg
 * @property {typeof import('ioredis').Redis} Redis
 * @property {typeof import('jose').SignJWT} SignJWT
 */

/**
 * One bus's results, as written to the results file: `skipped` when its Redis was unreachable,
 * `error` when it failed part-way (the figures up to there are kept).
 * @typedef {object} BusResult
 * @property {string} bus
 * @property {string} [skipped]
 * @property {string} [error]
 * @property {string[]} [warnings]
 * @property {string} [redisPrefix]
 * @property {number} [redisKeysRemoved]
 * @property {string} [schema]
 * @property {string} [database]
 * @property {number[]} [loadAvgBefore]
 * @property {number} [serverStartMs]
 * @property {IdleComparison} [idle]
 * @property {number} [messageBytes] mean SSE data of a batch
 * @property {number} [bodyGzipBytes] mean request body of a batch
 * @property {DeliveryComparison} [delivery]
 * @property {ReplayComparison} [replay]
 * @property {number[]} [loadAvgAfter]
 * @property {number | null} [serverRssBytesAtEnd]
 * @property {Awaited<ChildHandle['exited']>} [serverExit]
 * @property {Record<string, number>} [serverLog] the server's log lines by message
 * @property {string[]} [serverOutputTail]
 */

/**
 * A bus's set-up, as its measurements use it: the servers, the agents and users, the HTTP agents
 * of the streams and of the posts.
 * @typedef {object} BusRun
 * @property {string} busName
 * @property {BusDeps} deps
 * @property {Record<string, string>} serverEnv
 * @property {RunRedis | undefined} redis set on the redis bus only
 * @property {ServerHandle} server
 * @property {BareServer} bare
 * @property {CreatedAgent[]} agents delivery's, one stream each, watched by `viewer`
 * @property {CreatedAgent} replayAgent watched by `viewer`
 * @property {string} viewer
 * @property {string} viewerToken
 * @property {CreatedAgent[]} idleAgents watched by every idle user
 * @property {string[]} idleTokens the idle users'
 * @property {http.Agent} sseAgent
 * @property {http.Agent} postAgent
 * @property {(warning: string) => void} warn
 * @property {() => void} ensureAlive throws when the server has died
 */

/**
 * @param {string} busName
 * @param {BusDeps} deps
 * @returns {Promise<BusResult>}
 */
export async function benchBus(busName, deps) {
  const mark = lifecycle.mark();
  /** @type {BusResult & { warnings: string[] }} */
  const result = { bus: busName, warnings: [] };
  const warn = (/** @type {string} */ w) => {
    console.error(`  !!! WARNING ${busName}: ${w}`);
    result.warnings.push(w);
  };
  const sseAgent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const postAgent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  lifecycle.onCleanup(() => {
    sseAgent.destroy();
    postAgent.destroy();
  });
  try {
    const tag = randomBytes(4).toString('hex');
    /** @type {Record<string, string>} */
    const serverEnv = {};
    /** @type {RunRedis | undefined} set on the redis bus only */
    let redis;
    if (busName === 'redis') {
      const reason = await redisUnavailable(deps.Redis);
      if (reason) {
        console.log(
          `\n${'!'.repeat(78)}\n!!! SKIPPING THE REDIS BUS: ${reason}\n${'!'.repeat(78)}`,
        );
        return { bus: busName, skipped: reason };
      }
      redis = setUpRedis(deps, tag, serverEnv, result);
    } else if (busName !== 'memory') {
      throw new Error(`unknown bus "${busName}"`);
    }
    setUpDatabase(deps, tag, serverEnv, result);
    const bus = { busName, deps, serverEnv, redis, sseAgent, postAgent, tag, warn };
    const run = await setUpServers(bus, result);

    result.idle = await compareIdle(run.server, run.bare, run.idleAgents, run.idleTokens);
    run.ensureAlive();
    await compareDelivery(run, result);
    const replay = await compareReplay(run, result);
    await tearDown(run, result);
    if (replay.service.runs.some((r) => r.cut)) await replayWithRaisedCap(run, replay);
    return result;
  } catch (error) {
    console.error(
      `\n!!! ${busName.toUpperCase()} BUS BENCHMARK FAILED: ${
        /** @type {Thrown} */ (error)?.stack ?? error
      }`,
    );
    return { ...result, error: messageOf(error) };
  } finally {
    await lifecycle.runCleanupsFrom(mark);
  }
}

/**
 * The redis bus's Redis under a prefix of this run's own, the server's under it too.
 * @param {BusDeps} deps
 * @param {string} tag
 * @param {Record<string, string>} serverEnv
 * @param {BusResult} result
 * @returns {RunRedis}
 */
function setUpRedis(deps, tag, serverEnv, result) {
  const prefix = `flightlog:bench-live:${tag}:`;
  result.redisPrefix = prefix;
  serverEnv.REDIS_URL = CFG.redisUrl;
  serverEnv.LIVE_REDIS_PREFIX = `${prefix}server:`;
  return openRunRedis(deps.Redis, prefix, (removed) => (result.redisKeysRemoved = removed));
}

/**
 * A fresh schema on PostgreSQL, or a fresh data directory for PGlite, removed afterwards.
 * @param {BusDeps} deps
 * @param {string} tag
 * @param {Record<string, string>} serverEnv
 * @param {BusResult} result
 */
function setUpDatabase(deps, tag, serverEnv, result) {
  if (deps.database === 'postgres') {
    const schema = `bench_live_${tag}`;
    result.schema = schema;
    lifecycle.onCleanup(async () => {
      const client = new deps.pg.Client({ connectionString: CFG.databaseUrl });
      await client.connect();
      try {
        await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      } finally {
        await client.end();
      }
    });
    Object.assign(serverEnv, { DATABASE_URL: CFG.databaseUrl, DATABASE_SCHEMA: schema });
  } else {
    const dir = mkdtempSync(join(os.tmpdir(), 'flightlog-bench-live-'));
    lifecycle.onCleanup(() => rmSync(dir, { recursive: true, force: true }));
    serverEnv.DATA_DIR = dir;
  }
  result.database = deps.database;
}

/**
 * The server, its agents and users (delivery agents + the replay agent watched by one viewer;
 * idle agents watched by several idle users), then the bare SSE server.
 * @param {Pick<BusRun, 'busName' | 'deps' | 'serverEnv' | 'redis' | 'sseAgent' | 'postAgent' |
 *   'warn'> & { tag: string }} bus
 * @param {BusResult} result
 * @returns {Promise<BusRun>}
 */
async function setUpServers({ tag, ...bus }, result) {
  result.loadAvgBefore = os.loadavg().map((x) => Math.round(x * 100) / 100);
  console.log(
    `\n== ${bus.busName} bus on ${bus.deps.database}: starting server (load average ${result.loadAvgBefore.join(' ')})`,
  );
  const t0 = performance.now();
  const server = await startServer(bus.serverEnv);
  result.serverStartMs = Math.round(performance.now() - t0);
  const { createAgent, grant, tokenFor } = adminClient(server, bus.deps.SignJWT);
  const viewer = `bench-viewer-${tag}`;
  const viewerToken = await tokenFor(viewer);
  // filled by index (pool), every slot set before it is read: hence the casts of its items
  /** @type {CreatedAgent[]} */
  const agents = [];
  await pool(CFG.agents, 8, async (i) => {
    agents[i] = await createAgent();
    await grant(/** @type {CreatedAgent} */ (agents[i]).agentId, viewer);
  });
  const replayAgent = await createAgent();
  await grant(replayAgent.agentId, viewer);
  /** @type {CreatedAgent[]} */
  const idleAgents = [];
  const idleUsers = Array.from({ length: CFG.idleUsers }, (_, u) => `bench-idle-${tag}-${u}`);
  const idleTokens = await Promise.all(idleUsers.map(tokenFor));
  await pool(CFG.idleAgents, 4, async (g) => {
    idleAgents[g] = await createAgent();
    for (const user of idleUsers)
      await grant(/** @type {CreatedAgent} */ (idleAgents[g]).agentId, user);
  });
  const bare = await startBareServer(bus.redis);
  return {
    ...bus,
    ...{ server, bare, agents, replayAgent, viewer, viewerToken, idleAgents, idleTokens },
    ensureAlive: () => {
      if (!server.alive())
        throw new Error(`server died during the run:\n${server.output.lines.join('\n')}`);
    },
  };
}

/**
 * The server's last figures, its stop and its output, then the bare server's stop.
 * @param {BusRun} run
 * @param {BusResult} result
 */
async function tearDown({ server, bare, warn }, result) {
  result.loadAvgAfter = os.loadavg().map((x) => Math.round(x * 100) / 100);
  const end = await readMemory(`${server.base}/metrics`);
  result.serverRssBytesAtEnd = end.rss;
  const exit = await server.stop();
  result.serverExit = exit;
  if (exit.code !== 0)
    warn(`server exited with code ${exit.code} signal ${exit.signal} on SIGTERM`);
  result.serverLog = server.output.byMessage;
  if (server.output.count > 0) result.serverOutputTail = server.output.lines.slice(-10);
  await bare.stop();
}
