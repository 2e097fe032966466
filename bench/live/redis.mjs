// The redis bus's side of the benchmark: its Redis (probed, then every key of the run under one
// prefix, removed afterwards) and the bare bus baselines measured from this process.

import { performance } from 'node:perf_hooks';
import { median, reachable } from '../support.mjs';
import { traceIdOf } from './batches.mjs';
import { CFG, lifecycle, messageOf } from './config.mjs';

/**
 * @typedef {import('ioredis').Redis} Redis
 * @typedef {import('./config.mjs').Thrown} Thrown
 * @typedef {import('./batches.mjs').Batch} Batch
 * @typedef {import('./delivery.mjs').Transport} Transport
 */

/**
 * The Redis of one redis-bus run: its key prefix (every key of the run is under it), a way to
 * open more connections, and one for plain commands.
 * @typedef {object} RunRedis
 * @property {string} url
 * @property {string} prefix
 * @property {(extra?: import('ioredis').RedisOptions) => Redis} newRedis
 * @property {Redis} commands
 */

/**
 * Why the redis bus cannot run (unreachable, no PING), or undefined when it can.
 * @param {typeof import('ioredis').Redis} RedisClass
 * @returns {Promise<string | undefined>}
 */
export async function redisUnavailable(RedisClass) {
  const url = new URL(CFG.redisUrl);
  const port = Number(url.port || 6379);
  if (!(await reachable(url.hostname, port)))
    return `Redis at ${url.hostname}:${port} is unreachable`;
  const probe = new RedisClass(CFG.redisUrl, {
    lazyConnect: true,
    connectTimeout: 2_000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  probe.on('error', () => {});
  try {
    await probe.connect();
    await probe.ping();
    return undefined;
  } catch (error) {
    return `Redis at ${CFG.redisUrl} does not answer PING: ${
      /** @type {Thrown} */ (error)?.message ?? error
    }`;
  } finally {
    probe.disconnect();
  }
}

/**
 * The run's Redis under `prefix`; its cleanup removes every key of this run (server's, bare
 * bus's, bare server's), tells `onRemoved` how many, then disconnects.
 * @param {typeof import('ioredis').Redis} RedisClass
 * @param {string} prefix
 * @param {(removed: number) => void} onRemoved
 * @returns {RunRedis}
 */
export function openRunRedis(RedisClass, prefix, onRemoved) {
  /** @type {RunRedis['newRedis']} */
  const newRedis = (extra = {}) => {
    const client = new RedisClass(CFG.redisUrl, { maxRetriesPerRequest: 1, ...extra });
    client.on('error', () => {});
    return client;
  };
  const redis = { url: CFG.redisUrl, prefix, newRedis, commands: newRedis() };
  lifecycle.onCleanup(async () => {
    const client = redis.commands;
    let cursor = '0';
    let removed = 0;
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) removed += await client.del(...keys);
    } while (cursor !== '0');
    onRemoved(removed);
    client.disconnect();
  });
  return redis;
}

/**
 * The bare bus, delivery's baseline on Redis: XADD (MAXLEN 1000, + EXPIRE, one pipeline, as the
 * server publishes) on one connection, one blocking XREAD loop over the agents' streams on
 * another (as the server reads).
 * @param {RunRedis} redis
 * @returns {Transport}
 */
export function bareBusTransport(redis) {
  const reader = redis.newRedis();
  const writer = redis.newRedis();
  lifecycle.onCleanup(() => {
    reader.disconnect();
    writer.disconnect();
  });
  const key = (/** @type {number} */ idx) => `${redis.prefix}bare:a${idx}`;
  return {
    async open(onArrive) {
      const keys = Array.from({ length: CFG.agents }, (_, idx) => key(idx));
      const ids = keys.map(() => '0-0');
      let stopped = false;
      const loop = (async () => {
        while (!stopped) {
          /** @type {Awaited<ReturnType<Redis['xread']>>} */
          let reply;
          try {
            reply = await reader.xread('COUNT', 1000, 'BLOCK', 1000, 'STREAMS', ...keys, ...ids);
          } catch (error) {
            if (!stopped) console.error(`!!! bare XREAD failed: ${messageOf(error)}`);
            return;
          }
          const now = performance.now();
          for (const [streamKey, entries] of reply ?? []) {
            const idx = keys.indexOf(streamKey);
            for (const [id, fields] of entries) {
              ids[idx] = id;
              // every entry here is written as ['d', <item JSON>]
              onArrive(idx, traceIdOf(/** @type {string} */ (fields[1])), now);
            }
          }
        }
      })();
      return {
        close: () => {
          stopped = true;
          reader.disconnect();
          return loop;
        },
        ended: () => 0,
        warnings: () => 0,
      };
    },
    async send(b) {
      try {
        // exec() answers null only for an aborted MULTI, which a plain pipeline is not
        const results = /** @type {[error: Error | null, reply: unknown][]} */ (
          await writer
            .pipeline()
            .xadd(key(b.agentIdx), 'MAXLEN', '1000', '*', 'd', b.itemJson)
            .expire(key(b.agentIdx), 86_400)
            .exec()
        );
        const failed = results.find(([error]) => error);
        if (failed) return { status: 0, error: failed[0], tReply: performance.now() };
        return { status: 202, tReply: performance.now() };
      } catch (error) {
        return { status: 0, error, tReply: performance.now() };
      }
    },
  };
}

/**
 * A stream's entries in pages of 100, as the service's Redis bus reads a replay: ioredis parses
 * a 20 MB XRANGE reply two to three times slower than the same entries in pages.
 * @param {Redis} redis
 * @param {string} key
 * @returns {AsyncGenerator<[id: string, fields: string[]][], void>}
 */
export async function* xrangePages(redis, key) {
  let from = '-';
  for (;;) {
    const page = await redis.xrange(key, from, '+', 'COUNT', 100);
    yield page;
    if (page.length < 100) return;
    // a full page has a last entry
    from = `(${/** @type {[id: string, fields: string[]]} */ (page.at(-1))[0]}`;
  }
}

/**
 * The bus alone: XRANGE of a stream holding the same entries as the replay, from this process,
 * CFG.replayConnections times (ms).
 * @param {RunRedis} redis
 * @param {Batch[]} replayBatches
 * @param {(warning: string) => void} warn
 * @returns {Promise<{ runs: number[], medianMs: number | null }>}
 */
export async function measureXrange(redis, replayBatches, warn) {
  const key = `${redis.prefix}bare:replay`;
  const pipe = redis.commands.pipeline();
  for (const b of replayBatches) pipe.xadd(key, 'MAXLEN', '1000', '*', 'd', b.itemJson);
  await pipe.exec();
  /** @type {number[]} */
  const times = [];
  for (let k = 0; k < CFG.replayConnections; k++) {
    const t = performance.now();
    /** @type {[id: string, fields: string[]][]} */
    const entries = [];
    for await (const page of xrangePages(redis.commands, key)) entries.push(...page);
    times.push(performance.now() - t);
    if (entries.length !== replayBatches.length)
      warn(`bare XRANGE returned ${entries.length} entries`);
  }
  console.log(
    `   replay   ${'bare XRANGE (bus alone)'.padEnd(26)} ${times.map((t) => `${t.toFixed(1)} ms`).join(', ')} -> median ${
      // CFG.replayConnections (3) times
      /** @type {number} */ (median(times)).toFixed(1)
    } ms`,
  );
  return { runs: times, medianMs: median(times) };
}
