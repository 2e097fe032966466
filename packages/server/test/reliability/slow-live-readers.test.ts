import { readFileSync } from 'node:fs';
import net from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runBatch } from '../fixtures/batches.js';
import type { LoadAgent } from '../harness/agent-load.js';
import { startServeProcess, type ServeProcess } from '../harness/cli-process.js';
import { describeEngines } from '../harness/engines.js';
import { postBatch } from '../harness/http.js';
import {
  createAgentsWithCli,
  freshServiceLocation,
  type ServiceLocation,
} from '../harness/service-location.js';
import { SseClient } from '../harness/sse-client.js';
import { percentile } from '../harness/latency.js';
import { viewerToken } from '../harness/viewer.js';

/*
 * Issue 15, continued review: slow readers during real-time delivery. LIVE_MAX_QUEUE_BYTES
 * bounds what one stream may hold for its client, but not how many streams there are: a
 * thousand viewers of one agent whose connections stopped reading each held their limit, and
 * what arrived in their grace period on top of it, at once. With 1,000 such streams while the
 * agent posted 1 MB batches, a PGlite server went from 0.8 to 3.6 GB and another agent's p99
 * from 41 ms to 19 s. LIVE_MAX_TOTAL_QUEUE_BYTES bounds them together; here 400 streams (20
 * users at their cap of 20) that never read, against a budget of 32 MiB.
 */

const ADMIN_TOKEN = 'review-admin-token-0123456789';
const JWT_SECRET = 'review-jwt-secret-0123456789-0123456789';
const USERS = 20;
const STREAMS_PER_USER = 20;
const TOTAL_BUDGET = 32 * 1024 * 1024;

/** Peak resident memory of a process so far, in MiB (Linux). */
function peakMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+)/.exec(status)?.[1]) / 1024;
}

/**
 * Opens a live stream over a raw socket and stops reading once the answer starts: a viewer
 * whose tab froze or whose network stalled. Resolves with the status of the answer.
 */
function stalledReader(
  url: string,
  path: string,
  token: string,
): Promise<{ status: number; socket: net.Socket }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () =>
      socket.write(
        `GET ${path} HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${token}\r\n` +
          'Accept: text/event-stream\r\n\r\n',
      ),
    );
    socket.once('data', (chunk) => {
      socket.pause();
      resolve({ status: Number(/^HTTP\/1\.1 (\d+)/.exec(chunk.toString('latin1'))?.[1]), socket });
    });
    socket.once('error', reject);
  });
}

/** A batch of one run whose 10 events carry ~100 KB of output each (~1 MB of JSON). */
function megabyteBatch() {
  const batch = runBatch({ events: 10 });
  for (const event of batch.body.items[0]!.events)
    (event.payload as { output: { content: string } }).output.content = 'x'.repeat(100_000);
  return batch.body;
}

describeEngines('many live streams that stopped reading [%s]', (engine) => {
  let service: ServiceLocation;
  let server: ServeProcess;
  let watched: LoadAgent;
  let bystander: LoadAgent;
  const sockets: net.Socket[] = [];

  beforeAll(async () => {
    service = freshServiceLocation(engine);
    [watched, bystander] = (await createAgentsWithCli(service.env, `slow-${engine}`, 2)) as [
      LoadAgent,
      LoadAgent,
    ];
    server = await startServeProcess({
      ...service.env,
      ADMIN_TOKEN,
      JWT_SECRET,
      ANALYSIS_WORKER: 'off',
      LIVE_MAX_TOTAL_QUEUE_BYTES: String(TOTAL_BUDGET),
    });
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    server?.child.kill('SIGKILL');
    await server?.exited;
    await service?.dispose();
  });

  const viewer = (user: string, agentId: string) =>
    viewerToken({ url: server.url, adminToken: ADMIN_TOKEN, jwtSecret: JWT_SECRET }, user, agentId);

  /** The bystander's batches one after another: 202 latency and 202→stream delivery. */
  async function bystanderRound(stream: SseClient, count: number) {
    const posted: number[] = [];
    const delivered: number[] = [];
    for (let i = 0; i < count; i++) {
      const batch = runBatch({ events: 2 });
      const started = performance.now();
      const answer = await postBatch(server.url, bystander.apiKey, batch.body, {
        timeoutMs: 30_000,
      });
      const acked = performance.now();
      expect(answer.status, answer.text).toBe(202);
      posted.push(acked - started);
      await stream.waitFor(
        (client) => client.traces().some((t) => t.item.trace.id === batch.trace.id),
        10_000,
        `the bystander's batch ${i} on its stream`,
      );
      delivered.push(performance.now() - acked);
    }
    return {
      p50: percentile(posted, 50),
      p99: percentile(posted, 99),
      liveP99: percentile(delivered, 99),
    };
  }

  it("keeps the server's memory within the total budget, and another agent's batches and stream going", async () => {
    const bystanderToken = await viewer('bystander-viewer', bystander.agentId);
    const stream = await SseClient.open(
      `${server.url}/v1/agents/${bystander.agentId}/live`,
      bystanderToken,
    );
    expect(stream.status).toBe(200);
    await bystanderRound(stream, 10); // warm-up: the first batches pay for compiling and caches
    const quiet = await bystanderRound(stream, 60);

    // the watched agent posts ~1 MB batches from two senders while the bystander is measured:
    // first with nobody watching it (what its batches cost by themselves), then watched by the
    // stalled streams
    const statuses = new Map<number, number>();
    const whilePosting = async <T>(measure: () => Promise<T>): Promise<T> => {
      let posting = true;
      const senders = Array.from({ length: 2 }, async () => {
        while (posting) {
          const answer = await postBatch(server.url, watched.apiKey, megabyteBatch(), {
            timeoutMs: 30_000,
          });
          statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
        }
      });
      try {
        return await measure();
      } finally {
        posting = false;
        await Promise.all(senders);
      }
    };
    const unwatched = await whilePosting(() => bystanderRound(stream, 60));

    // what the agent's batches cost by themselves is in this peak already
    const peakBefore = peakMiB(server.pid);
    for (let u = 0; u < USERS; u++) {
      const token = await viewer(`stalled-${u}`, watched.agentId);
      const opened = await Promise.all(
        Array.from({ length: STREAMS_PER_USER }, () =>
          stalledReader(server.url, `/v1/agents/${watched.agentId}/live`, token),
        ),
      );
      sockets.push(...opened.map((reader) => reader.socket));
      expect(opened.map((reader) => reader.status)).toEqual(Array(STREAMS_PER_USER).fill(200));
    }

    const during = await whilePosting(() => bystanderRound(stream, 60));
    const peakAfter = peakMiB(server.pid);
    // Streams still in their replay (the agent's earlier batches) wait on a drain, holding
    // little, and are cut by LIVE_STALL_TIMEOUT_MS (10 s) instead.
    const cutCount = () =>
      server
        .output()
        .split('\n')
        .filter((line) => /disconnecting/.test(line)).length;
    for (let waited = 0; cutCount() < USERS * STREAMS_PER_USER && waited < 15_000; waited += 250)
      await new Promise((resolve) => setTimeout(resolve, 250));
    const cut = cutCount();

    console.log(
      `[${engine}] ${USERS * STREAMS_PER_USER} stalled streams, ${statuses.get(202) ?? 0} ` +
        `batches of ~1 MB to their agent: server peak RSS ${peakBefore.toFixed(0)} → ` +
        `${peakAfter.toFixed(0)} MiB (budget ${TOTAL_BUDGET / 1024 / 1024} MiB), ${cut} slow ` +
        `streams cut; bystander p50/p99 quiet ${quiet.p50.toFixed(1)}/${quiet.p99.toFixed(1)} ms, ` +
        `while the agent posts unwatched ${unwatched.p50.toFixed(1)}/${unwatched.p99.toFixed(1)} ` +
        `ms, watched by the stalled streams ${during.p50.toFixed(1)}/${during.p99.toFixed(1)} ms ` +
        `(×${(during.p99 / unwatched.p99).toFixed(1)} of unwatched), its 202→stream p99 ` +
        `${quiet.liveP99.toFixed(1)} / ${unwatched.liveP99.toFixed(1)} / ` +
        `${during.liveP99.toFixed(1)} ms`,
    );
    expect([...statuses.keys()]).toEqual([202]);
    // every stalled stream was ended, none of them the bystander's
    expect(cut).toBeGreaterThanOrEqual(USERS * STREAMS_PER_USER);
    expect(stream.isEnded).toBe(false);
    // Without the total budget each of the 400 streams held its 1 MiB and what came in its
    // grace period: 1.2–1.6 GB more. The budget, the batches being parsed and stored, and the
    // streams' own buffers stay well under half of that.
    expect(peakAfter - peakBefore).toBeLessThan(512);
  });
});
