import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startServer } from '../../src/server.js';
import { openStore } from '../../src/store/open-store.js';
import { runBatch } from '../fixtures/batches.js';
import {
  describeWithPostgres,
  disposeLocation,
  freshLocation,
  type EngineLocation,
} from '../harness/engines.js';
import { TcpProxy } from '../harness/tcp-proxy.js';
import { sleep } from '../harness/wait.js';

/*
 * The database is held still through a proxy so that a handler is certainly mid-write when its
 * client leaves and shutdown begins; PGlite runs in-process and cannot be held still from
 * outside, so this one runs on PostgreSQL.
 */
describeWithPostgres('shutdown waits for a handler whose client has gone', () => {
  let location: EngineLocation;
  let proxy: TcpProxy;
  beforeAll(async () => {
    location = freshLocation('postgres');
    const url = new URL(location.databaseUrl!);
    proxy = new TcpProxy(url.hostname, Number(url.port || 5432));
    await proxy.start();
  });
  afterAll(async () => {
    await proxy.close();
    await disposeLocation(location);
  });

  it('stores the batch the handler was writing, instead of closing the store under it', async () => {
    const throughProxy = new URL(location.databaseUrl!);
    throughProxy.port = String(proxy.port);
    const adminToken = randomBytes(16).toString('hex');
    const logLines: string[] = [];
    const server = await startServer(
      {
        ...loadConfig({ ADMIN_TOKEN: adminToken }),
        port: 0,
        host: '127.0.0.1',
        databaseUrl: throughProxy.toString(),
        databaseSchema: location.databaseSchema!,
        analysisWorker: false,
      },
      {
        logger: {
          destination: {
            write: (line: string) => {
              logLines.push(line);
            },
          },
        },
      },
    );
    const created = await fetch(`${server.url}/admin/v1/agents`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: '{}',
    });
    const { apiKey } = (await created.json()) as { apiKey: string };
    // the key is resolved (and cached) before the database is held
    const warm = await fetch(`${server.url}/v1/traces/batch`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(runBatch().body),
    });
    expect(warm.status).toBe(202);

    proxy.stall();
    const { body } = runBatch({ events: 3 });
    const request = http.request(`${server.url}/v1/traces/batch`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    });
    request.on('error', () => {});
    request.end(JSON.stringify(body));
    await sleep(300); // in its handler now, waiting on the database
    request.destroy(); // the client gives up while its batch is being written
    await sleep(100);
    const closing = server.close();
    await sleep(300);
    proxy.release();
    await closing;

    const store = await openStore({ ...location, poolSize: 1 });
    try {
      const stored = await store.sql.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM accepted_batches WHERE batch_id = $1',
        [body.batchId],
      );
      expect(stored[0]!.n).toBe(1);
    } finally {
      await store.close();
    }
    expect(logLines.join('')).not.toMatch(/Cannot use a pool after calling end/);
    expect(logLines.join('')).not.toMatch(/"statusCode":500/);
  });
});
