// The servers measured: the service (a child process), the bare SSE server (live.mjs run as a
// child with --bare-sse-server), what their /metrics pages say, and the admin API set-up.

import { setTimeout as sleep } from 'node:timers/promises';
import { median, request, startChildServer, startFlightlogServer } from '../support.mjs';
import { BARE_FLAG, CFG, CLI, ENTRY, ROOT, lifecycle } from './config.mjs';

/**
 * @typedef {import('../support.mjs').ServerHandle} ServerHandle
 * @typedef {import('../support.mjs').ChildServer} BareServer
 * @typedef {import('./redis.mjs').RunRedis} RunRedis
 */

/**
 * The server on a free port (support.mjs), with room for every stream this benchmark opens.
 * @param {Record<string, string>} serverEnv
 * @returns {Promise<ServerHandle>}
 */
export function startServer(serverEnv) {
  return startFlightlogServer(lifecycle, {
    cli: CLI,
    cwd: ROOT,
    env: {
      ...serverEnv,
      LIVE_MAX_STREAMS_PER_USER: String(CFG.idleStreams + CFG.agents + 100),
    },
  });
}

/**
 * @param {RunRedis | undefined} redis the bus's Redis, to replay from (else from memory)
 * @returns {Promise<BareServer>}
 */
export function startBareServer(redis) {
  return startChildServer(lifecycle, {
    cli: ENTRY,
    cwd: ROOT,
    args: redis ? [BARE_FLAG, redis.url, redis.prefix] : [BARE_FLAG],
    tag: 'bare',
  });
}

/**
 * Figures of one /metrics page; null where the page lacks the metric (the bare server reports
 * only memory).
 * @typedef {object} MetricsReading
 * @property {number | null} rss
 * @property {number | null} heapUsed
 * @property {number | null} external
 * @property {number | null} publishFailures
 * @property {number | null} cpuSeconds
 * @property {number} accepted batches accepted so far, 0 when not reported
 */

/**
 * Memory figures from a /metrics page (the service's prom-client, or the bare server's).
 * @param {string} metricsUrl
 * @returns {Promise<MetricsReading>}
 */
export async function readMemory(metricsUrl) {
  const { status, text } = await request('GET', metricsUrl);
  if (status !== 200) throw new Error(`${metricsUrl} answered ${status}`);
  const value = (/** @type {string} */ name) => {
    const match = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
    return match ? Number(match[1]) : null;
  };
  return {
    rss: value('process_resident_memory_bytes'),
    heapUsed: value('nodejs_heap_size_used_bytes'),
    external: value('nodejs_external_memory_bytes'),
    publishFailures: value('flightlog_live_publish_failures_total'),
    cpuSeconds: value('process_cpu_seconds_total'),
    accepted:
      Number(/^flightlog_batches_total\{outcome="accepted"\} (\S+)$/m.exec(text)?.[1] ?? 0) || 0,
  };
}

/**
 * A server's memory, settled. Both /metrics pages measured (prom-client's default metrics, the
 * bare server's own) report RSS and heap, so those are never null.
 * @typedef {{ rss: number, heapUsed: number, external: number | null }} MemoryFigures
 */

/**
 * After a settle: the median of 3 readings 250 ms apart.
 * @param {string} metricsUrl
 * @returns {Promise<MemoryFigures>}
 */
export async function settledMemory(metricsUrl) {
  await sleep(CFG.settleMs);
  /** @type {MetricsReading[]} */
  const readings = [];
  for (let i = 0; i < 3; i++) {
    if (i > 0) await sleep(250);
    readings.push(await readMemory(metricsUrl));
  }
  const pickMedian = (/** @type {'rss' | 'heapUsed' | 'external'} */ key) =>
    median(readings.map((r) => r[key]));
  return {
    rss: /** @type {number} */ (pickMedian('rss')),
    heapUsed: /** @type {number} */ (pickMedian('heapUsed')),
    external: pickMedian('external'),
  };
}

/**
 * An agent as the admin API creates it (201): its id and its API key, shown once.
 * @typedef {{ agentId: string, apiKey: string, verifyToken: string }} CreatedAgent
 */

/**
 * Agents, viewer roles and identity tokens on one running server.
 * @param {ServerHandle} server
 * @param {typeof import('jose').SignJWT} SignJWT
 */
export function adminClient(server, SignJWT) {
  const admin = {
    authorization: `Bearer ${server.adminToken}`,
    'content-type': 'application/json',
  };
  const secret = Buffer.from(server.jwtSecret, 'utf8');
  return {
    /** @returns {Promise<CreatedAgent>} */
    async createAgent() {
      const { status, text } = await request('POST', `${server.base}/admin/v1/agents`, {
        headers: admin,
        body: '{}',
      });
      if (status !== 201) throw new Error(`agent creation answered ${status}: ${text}`);
      return JSON.parse(text);
    },
    /**
     * Makes `userId` a viewer of the agent.
     * @param {string} agentId
     * @param {string} userId
     */
    async grant(agentId, userId) {
      const { status, text } = await request(
        'PUT',
        `${server.base}/admin/v1/agents/${agentId}/members/${userId}`,
        { headers: admin, body: '{"role":"viewer"}' },
      );
      if (status !== 200) throw new Error(`member grant answered ${status}: ${text}`);
    },
    tokenFor: (/** @type {string} */ sub) =>
      new SignJWT({})
        .setProtectedHeader({ alg: 'HS256' })
        .setSubject(sub)
        .setIssuedAt()
        .setExpirationTime('2h')
        .sign(secret),
  };
}
