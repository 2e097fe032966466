// Baseline (a) of the ingest benchmark (ingest.mjs starts it as a child process): the ceiling of
// Node's HTTP layer on this machine. Any POST is read whole, inflated on the thread pool when
// gzip, parsed as JSON and answered 202 with the service's body ({"traceId": ...}). No auth,
// validation, database or bus. Prints {"port": N} once listening; exits on SIGTERM or when its
// parent goes away (stdin closes). GET /metrics reports its resident memory.

import http from 'node:http';
import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import { serveUntilParentGoes } from './support.mjs';

const inflate = promisify(gunzip);

/**
 * What a `catch` may hold, as the answer reads it (a thrown non-object has no `message`).
 * @typedef {{ message?: string } | null | undefined} Thrown
 */

const server = http.createServer(async (req, res) => {
  try {
    if (req.method === 'GET' && req.url === '/metrics') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(`process_resident_memory_bytes ${process.memoryUsage().rss}\n`);
      return;
    }
    /** @type {Buffer[]} */
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    let body = Buffer.concat(chunks);
    if (req.headers['content-encoding'] === 'gzip') body = await inflate(body);
    // read, not validated: any part of it may be missing
    const batch = /** @type {{ items?: { trace?: { id?: string } }[] }} */ (
      JSON.parse(body.toString('utf8'))
    );
    res.writeHead(202, { 'content-type': 'application/json; charset=utf-8' });
    res.end(JSON.stringify({ traceId: batch.items?.[0]?.trace?.id ?? null }));
  } catch (error) {
    if (!res.headersSent) res.writeHead(400, { 'content-type': 'text/plain' });
    res.end(String(/** @type {Thrown} */ (error)?.message ?? error));
  }
});
server.keepAliveTimeout = 60_000;

serveUntilParentGoes(server);
