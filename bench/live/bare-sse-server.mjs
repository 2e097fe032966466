// The bare SSE server (child process): the minimum that turns a POSTed batch into an SSE message,
// replays an agent's last 1000 (from memory, or from Redis with XRANGE when given a Redis URL),
// and holds idle SSE responses. Exits when its parent goes away (stdin closes) or on SIGTERM.

import http from 'node:http';
import { gunzipSync } from 'node:zlib';
import { serveUntilParentGoes } from '../support.mjs';
import { messageOf } from './config.mjs';
import { xrangePages } from './redis.mjs';

/**
 * @typedef {import('@flightlog/protocol').BufferBatchItem} BufferBatchItem
 * @typedef {import('ioredis').Redis} Redis
 */

/** Serves until the parent goes; argv: BARE_FLAG, then the Redis URL and key prefix, if any. */
export async function runBareServer() {
  const [redisUrl, prefix] = process.argv.slice(3);
  /** @type {Redis | undefined} */
  let redis;
  if (redisUrl) {
    const { Redis } = await import('ioredis');
    redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
    redis.on('error', () => {});
  }
  // an agent is the path's third part: undefined when the path has none
  const key = (/** @type {string | undefined} */ agent) => `${prefix}bare-http:${agent}`;
  /** @type {Map<string | undefined, string[]>} the last 1000 SSE messages, by agent */
  const buffers = new Map();
  /** @type {Map<string | undefined, Set<http.ServerResponse>>} */
  const subscribers = new Map();
  /** @type {Set<http.ServerResponse>} */
  const idle = new Set();
  let next = 0;
  const HEAD = {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
  };
  const sse = (/** @type {string | number} */ id, /** @type {string} */ data) =>
    `id: ${id}\nevent: trace\ndata: ${data}\n\n`;
  const server = http.createServer(async (req, res) => {
    // a server's request always has its url
    const [, kind, agent] = /** @type {string} */ (req.url).split('/');
    try {
      if (req.method === 'POST' && kind === 'publish') {
        /** @type {Buffer[]} */
        const chunks = [];
        for await (const chunk of req) chunks.push(chunk);
        let body = Buffer.concat(chunks);
        if (req.headers['content-encoding'] === 'gzip') body = gunzipSync(body);
        // the batches this benchmark posts (the bare server trusts them: no validation)
        const { items } = /** @type {{ items: BufferBatchItem[] }} */ (
          JSON.parse(body.toString('utf8'))
        );
        const data = items.map((item) => JSON.stringify(item));
        if (redis) {
          const pipe = redis.pipeline();
          for (const d of data) pipe.xadd(key(agent), 'MAXLEN', '1000', '*', 'd', d);
          pipe.expire(key(agent), 86_400);
          await pipe.exec();
        } else {
          const buffer = buffers.get(agent) ?? [];
          buffers.set(agent, buffer);
          for (const d of data) {
            const message = sse(++next, d);
            buffer.push(message);
            if (buffer.length > 1000) buffer.shift();
            for (const sub of subscribers.get(agent) ?? []) sub.write(message);
          }
        }
        res.writeHead(202, { 'content-type': 'application/json' });
        res.end(`{"traceId":${JSON.stringify(items[0]?.trace?.id ?? null)}}`);
      } else if (req.method === 'GET' && kind === 'live') {
        res.writeHead(200, HEAD);
        res.write(': connected\nretry: 3000\n\n');
        if (redis) {
          for await (const page of xrangePages(redis, key(agent)))
            for (const [id, fields] of page) res.write(sse(id, /** @type {string} */ (fields[1])));
        } else {
          for (const message of buffers.get(agent) ?? []) res.write(message);
        }
        /** @type {Set<http.ServerResponse>} */
        const set = subscribers.get(agent) ?? new Set();
        subscribers.set(agent, set);
        set.add(res);
        res.on('close', () => set.delete(res));
      } else if (req.method === 'GET' && kind === 'idle') {
        res.writeHead(200, HEAD);
        res.write(': connected\nretry: 3000\n\n');
        idle.add(res);
        res.on('close', () => idle.delete(res));
      } else if (req.method === 'GET' && kind === 'metrics') {
        const m = process.memoryUsage();
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end(
          `process_resident_memory_bytes ${m.rss}\nnodejs_heap_size_used_bytes ${m.heapUsed}\n` +
            `nodejs_external_memory_bytes ${m.external}\n`,
        );
      } else {
        res.writeHead(404);
        res.end();
      }
    } catch (error) {
      if (!res.headersSent) res.writeHead(500);
      res.end(messageOf(error));
    }
  });
  server.keepAliveTimeout = 60_000;
  serveUntilParentGoes(server, () => {
    for (const res of idle) res.destroy();
    for (const set of subscribers.values()) for (const res of set) res.destroy();
    redis?.disconnect();
  });
}
