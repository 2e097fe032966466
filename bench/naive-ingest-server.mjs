// Baseline (d) of the ingest benchmark on PostgreSQL (ingest.mjs starts it as a child process):
// the naive server a user could write in an afternoon — node:http and pg, nothing else. Any POST
// is read whole, inflated on the thread pool when gzip, parsed as JSON, and each item written
// with the baselines' one statement (batch-statement.mjs) as a named prepared statement over a
// pg.Pool of NAIVE_POOL_SIZE (10, the service's default DATABASE_POOL_SIZE); then 202 with the
// service's body. No auth, no validation, no limits, no bus, no metrics: what the service's own
// CPU per batch is compared with. Env: NAIVE_DATABASE_URL, NAIVE_SCHEMA, NAIVE_AGENT_ID (the
// rows' agent), NAIVE_POOL_SIZE. Prints {"port": N} once listening; exits on SIGTERM or when
// its parent goes away (stdin closes).

import http from 'node:http';
import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import pg from 'pg';
import { WRITE_BATCH, checkWritten, writeBatchParams } from './batch-statement.mjs';
import { serveUntilParentGoes } from './support.mjs';

/** @typedef {import('@flightlog/protocol').TransportBatchPayload} TransportBatchPayload */

/**
 * What a `catch` may hold, as the answer reads it (a thrown non-object has no `message`).
 * @typedef {{ message?: string } | null | undefined} Thrown
 */

const inflate = promisify(gunzip);
// always set by ingest.mjs, which starts this server
const agentId = /** @type {string} */ (process.env.NAIVE_AGENT_ID);
const pool = new pg.Pool({
  connectionString: process.env.NAIVE_DATABASE_URL,
  max: Number(process.env.NAIVE_POOL_SIZE ?? 10),
  options: `-c TimeZone=UTC -c search_path="${process.env.NAIVE_SCHEMA}"`,
  application_name: 'flightlog-bench-naive',
});
pool.on('error', () => {});

const server = http.createServer(async (req, res) => {
  try {
    /** @type {Buffer[]} */
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    let body = Buffer.concat(chunks);
    if (req.headers['content-encoding'] === 'gzip') body = await inflate(body);
    // trusted, not validated: the naive server's way
    const batch = /** @type {TransportBatchPayload} */ (JSON.parse(body.toString('utf8')));
    for (const item of batch.items) {
      const { rows } = await pool.query({
        name: 'naive-write-batch',
        text: WRITE_BATCH,
        values: writeBatchParams(agentId, { batchId: batch.batchId, item }),
      });
      checkWritten(rows, { batchId: batch.batchId, item });
    }
    res.writeHead(202, { 'content-type': 'application/json; charset=utf-8' });
    res.end(JSON.stringify({ traceId: batch.items[0]?.trace.id ?? null }));
  } catch (error) {
    if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
    res.end(String(/** @type {Thrown} */ (error)?.message ?? error));
  }
});
server.keepAliveTimeout = 60_000;

serveUntilParentGoes(server, () => void pool.end());
