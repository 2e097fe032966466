import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { changeConfig, loadConfig } from '../../src/config.js';
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

  it('lets a handler mid-way through its statements finish, instead of closing the store under it', async () => {
    const throughProxy = new URL(location.databaseUrl!);
    throughProxy.port = String(proxy.port);
    const adminToken = randomBytes(16).toString('hex');
    const logLines: string[] = [];
    const server = await startServer(
      changeConfig(loadConfig({ ADMIN_TOKEN: adminToken }), {
        http: { port: 0, host: '127.0.0.1' },
        store: { databaseUrl: throughProxy.toString(), databaseSchema: location.databaseSchema! },
        analysis: { worker: false },
        // every request looks its key up: two trips to the database (key, then trace)
        auth: { apiKeyCacheMs: 0 },
      }),
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
    // a running trace
    const { body, trace } = runBatch({ events: 2 });
    const stored = await fetch(`${server.url}/v1/traces/batch`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(stored.status).toBe(202);

    // the handler looks the key up, then completes the trace: a store closed between the two
    // fails the second
    proxy.stall();
    const request = http.request(`${server.url}/v1/traces/${trace.id}/complete`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-length': '0' },
    });
    request.on('error', () => {});
    request.end(); // no body: completed at server time, nothing left to read once in the handler
    await sleep(300); // in its handler now, waiting on the database
    request.destroy(); // the client gives up while its trace is being completed
    await sleep(100);
    const closing = server.close();
    await sleep(300);
    proxy.release();
    await closing;

    const store = await openStore({ ...location, poolSize: 1 });
    try {
      const [row] = await store.sql.query<{ status: string }>(
        'SELECT status FROM traces WHERE id = $1',
        [trace.id],
      );
      expect(row, logLines.join('')).toEqual({ status: 'completed' });
    } finally {
      await store.close();
    }
    expect(logLines.join('')).not.toMatch(/Cannot use a pool after calling end/);
    expect(logLines.join('')).not.toMatch(/"statusCode":500/);
  });
});
