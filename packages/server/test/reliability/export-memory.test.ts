import { readFileSync } from 'node:fs';
import http from 'node:http';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { mintDevToken } from '../../src/auth/dev-token.js';
import { stageRuns, stagedRunId } from '../fixtures/staged-runs.js';
import { runCli, startServeProcess, type ServeProcess } from '../harness/cli-process.js';
import { describeEngines } from '../harness/engines.js';
import { send } from '../harness/http.js';
import { freshServiceLocation, type ServiceLocation } from '../harness/service-location.js';

/*
 * Issue 24, item 3: an export takes constant memory whatever the agent holds. 100,000 runs of 3
 * events (~130 MB of NDJSON), staged straight into the store, are exported from a real
 * `flightlog serve` process on each engine, by a client that reads in bursts (it stops for half
 * a second after every 8 MB): an export that did not wait for its reader, or held its runs,
 * would grow the server by the size of the export. Meanwhile another user's reads are served.
 */

const JWT_SECRET = 'export-memory-jwt-secret-0123456789abcdef';
const RUNS = 100_000;
/** What the server's memory may grow by during the export: far less than the export's size. */
const MAX_GROWTH_MIB = 60;
const BURST_BYTES = 8 * 1024 * 1024;
const PAUSE_MS = 500;

/** Current and peak resident memory of a process, in MiB (Linux). */
function memoryMiB(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1]);
  return { rss: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
}

describeEngines('export of 100,000 runs in constant memory [%s]', (engine) => {
  let service: ServiceLocation;
  let server: ServeProcess;
  const agentId = `export-memory-${engine}`;
  const prefix = 'mem';

  beforeAll(async () => {
    service = freshServiceLocation(engine);
    const created = await runCli(['agent', 'create', '--id', agentId], service.env);
    expect(created.code, created.stderr).toBe(0);
    for (const [user, agent] of [
      ['viewer', agentId],
      ['reader', agentId],
    ] as const) {
      const granted = await runCli(
        ['member', 'grant', '--agent', agent, '--user', user, '--role', 'viewer'],
        service.env,
      );
      expect(granted.code, granted.stderr).toBe(0);
    }
    // staged before the server starts: on PGlite one process at a time holds DATA_DIR
    const store = await service.openStore();
    try {
      const started = performance.now();
      await stageRuns(store.sql, agentId, { prefix, runs: RUNS, payloadBytes: 200 });
      // the statistics autovacuum would have gathered (it is off on the test server)
      await store.sql.query('ANALYZE');
      console.log(
        `[${engine}] staged ${RUNS} runs in ${((performance.now() - started) / 1000).toFixed(1)} s`,
      );
    } finally {
      await store.close();
    }
    server = await startServeProcess({
      ...service.env,
      JWT_SECRET,
      ANALYSIS_WORKER: 'off',
      // a JS heap far smaller than the export: holding it fails, and the garbage of the pages
      // streamed is collected as it goes instead of whenever V8 gets round to it
      NODE_OPTIONS: '--max-old-space-size=128',
    });
  }, 300_000);

  afterAll(async () => {
    server?.child.kill('SIGKILL');
    await server?.exited;
    await service?.dispose();
  });

  it('streams every run once, in order, while the server grows by a bounded amount and keeps serving', async () => {
    const viewer = await mintDevToken(JWT_SECRET, 'viewer');
    const reader = await mintDevToken(JWT_SECRET, 'reader');
    const path = `/v1/agents/${agentId}/export`;
    // warm: the code and statements of an export are loaded, and the JS heap has grown to
    // what streaming takes, before the baseline (10,000 runs, 20 MB)
    const warm = await send(server.url, `${path}?until=2026-01-01T02:46:40Z`, undefined, {
      token: viewer,
    });
    expect(warm.status).toBe(200);
    expect(warm.text.split('\n')).toHaveLength(10_001);

    const before = memoryMiB(server.pid);
    let highest = before.rss;
    const sampler = setInterval(() => {
      highest = Math.max(highest, memoryMiB(server.pid).rss);
    }, 50);
    // another user's reads go on meanwhile
    const latencies: number[] = [];
    let reading = true;
    const reads = (async () => {
      while (reading) {
        const started = performance.now();
        const res = await send(server.url, `/v1/agents/${agentId}/traces?limit=5`, undefined, {
          token: reader,
        });
        expect(res.status).toBe(200);
        latencies.push(performance.now() - started);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();

    const started = performance.now();
    let bytes = 0;
    let lines = 0;
    let previous = '';
    let outOfOrder = 0;
    let partial = '';
    /** The server's RSS (MiB) after every 10,000 runs received: flat once warm. */
    const milestones: number[] = [];
    try {
      await new Promise<void>((resolve, reject) => {
        const request = http.get(
          server.url + path,
          { headers: { authorization: `Bearer ${viewer}` } },
          (res) => {
            expect(res.statusCode).toBe(200);
            let sinceBurst = 0;
            res.setEncoding('utf8');
            res.on('data', (chunk: string) => {
              bytes += Buffer.byteLength(chunk);
              sinceBurst += chunk.length;
              const text = partial + chunk;
              let start = 0;
              for (let end = text.indexOf('\n'); end !== -1; end = text.indexOf('\n', start)) {
                // the id is the line's first field: no need to parse 130 MB
                const id = /^\{"trace":\{"id":"([^"]+)"/.exec(text.slice(start, start + 200))?.[1];
                if (id === undefined || id <= previous) outOfOrder++;
                previous = id ?? previous;
                lines++;
                if (lines % 10_000 === 0) milestones.push(Math.round(memoryMiB(server.pid).rss));
                start = end + 1;
              }
              partial = text.slice(start);
              if (sinceBurst >= BURST_BYTES) {
                sinceBurst = 0;
                res.pause();
                setTimeout(() => res.resume(), PAUSE_MS);
              }
            });
            res.on('end', () => resolve());
            res.on('error', reject);
          },
        );
        request.on('error', reject);
      });
    } finally {
      clearInterval(sampler);
      reading = false;
      await reads;
    }
    const seconds = (performance.now() - started) / 1000;
    const after = memoryMiB(server.pid);
    highest = Math.max(highest, after.rss);
    latencies.sort((a, b) => a - b);
    console.log(
      `[${engine}] exported ${lines} runs, ${(bytes / 2 ** 20).toFixed(0)} MiB in ` +
        `${seconds.toFixed(1)} s; server RSS ${before.rss.toFixed(0)} MiB before, highest ` +
        `${highest.toFixed(0)} MiB (+${(highest - before.rss).toFixed(0)}), peak ` +
        `${before.peak.toFixed(0)} → ${after.peak.toFixed(0)} MiB; another user's ${latencies.length} ` +
        `reads meanwhile: median ${latencies[latencies.length >> 1]?.toFixed(0)} ms, ` +
        `max ${latencies[latencies.length - 1]?.toFixed(0)} ms; RSS every 10,000 runs: ` +
        milestones.join(', '),
    );
    expect(partial).toBe('');
    expect(lines).toBe(RUNS);
    expect(outOfOrder).toBe(0);
    expect(previous).toBe(stagedRunId(prefix, RUNS));
    expect(bytes).toBeGreaterThan(100 * 2 ** 20);
    expect(highest - before.rss).toBeLessThan(MAX_GROWTH_MIB);
    expect(after.peak - before.peak).toBeLessThan(MAX_GROWTH_MIB);
    expect(latencies.length).toBeGreaterThan(5);
  }, 300_000);
});
