import { spawn } from 'node:child_process';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runBatch } from '../fixtures/batches.js';
import { mintDevToken } from '../../src/auth/dev-token.js';
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
import { admissionLabel, admissionOverride } from '../harness/admission-override.js';

/*
 * Issue 15, continued review: many streams per user. One viewer holds a role on 10,000 agents
 * and opens live streams on them as fast as it can, 20 at a time (LIVE_MAX_STREAMS_PER_USER),
 * closing each as soon as it is connected and opening the next on another agent; another agent
 * posts and its own viewer watches. This area holds: the cap is per user whatever the number of
 * agents, each open costs one JWT check and one indexed role lookup, and a stream past the cap
 * is refused before anything is set up. (By hand: the same user replaying 100 MB of one agent's
 * buffer over and over on 20 streams, from another process, left the other agent's p50 at 6 → 8
 * ms; the same client hammering the read API instead cost the other agent more: p50 29–48 ms.)
 * Fair admission (ADMISSION_MAX_IN_FLIGHT) runs as by default; RELIABILITY_ADMISSION_MAX_IN_FLIGHT
 * =100000 runs the same with the gate open, for a comparison in the same session: the viewer's
 * opens never fill the slots (a stream gives its slot back once set up), so it changes nothing
 * measurable here; what the churn costs the other agent is CPU, which admission does not bound.
 */

const ADMIN_TOKEN = 'review-admin-token-0123456789';
const JWT_SECRET = 'review-jwt-secret-0123456789-0123456789';
const AGENTS = 10_000;
const CAP = 20;

const fleetId = (n: number) => `fleet-${String(n).padStart(5, '0')}`;

/**
 * The user's client, in a process of its own (in the test's process its own work would be
 * counted in the bystander's latency): 25 loops, each opening a stream on the next of the
 * 10,000 agents, waiting for its first bytes, closing it; on SIGTERM it stops and prints the
 * statuses it got.
 */
const CHURN = `
const [base, token, seconds] = process.argv.slice(1);
let on = true, next = 0;
const statuses = {};
setTimeout(() => (on = false), Number(seconds) * 1000).unref();
process.on('SIGTERM', () => (on = false));
await Promise.all(Array.from({ length: 25 }, async () => {
  while (on) {
    const id = 'fleet-' + String((next++ % ${AGENTS}) + 1).padStart(5, '0');
    const abort = new AbortController();
    try {
      const r = await fetch(base + '/v1/agents/' + id + '/live', {
        headers: { authorization: 'Bearer ' + token }, signal: abort.signal });
      statuses[r.status] = (statuses[r.status] ?? 0) + 1;
      if (r.status === 200) { await r.body.getReader().read(); abort.abort(); } else await r.text();
    } catch (error) { statuses[String(error)] = (statuses[String(error)] ?? 0) + 1; }
  }
}));
process.stdout.write(JSON.stringify(statuses));
`;

/** Opens a stream and resolves with its status once the answer starts; `close` ends it. */
async function openStream(url: string, token: string) {
  const abort = new AbortController();
  const response = await fetch(url, {
    headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
    signal: abort.signal,
  });
  if (response.status === 200) {
    // the first bytes (`: connected`) say the stream is set up
    const reader = response.body!.getReader();
    await reader.read();
  } else await response.text();
  return {
    status: response.status,
    close: () => abort.abort(),
  };
}

describeEngines('a user with a role on 10,000 agents opening streams [%s]', (engine) => {
  let service: ServiceLocation;
  let server: ServeProcess;
  let bystander: LoadAgent;

  beforeAll(async () => {
    service = freshServiceLocation(engine);
    [bystander] = (await createAgentsWithCli(service.env, `streams-${engine}`, 1)) as [LoadAgent];
    const store = await service.openStore();
    try {
      await store.sql.query(
        `INSERT INTO agents (id) SELECT 'fleet-' || lpad(g::text, 5, '0')
         FROM generate_series(1, ${AGENTS}) g`,
      );
      await store.sql.query(
        `INSERT INTO members (agent_id, user_id, role)
         SELECT 'fleet-' || lpad(g::text, 5, '0'), 'fleet-viewer', 'viewer'
         FROM generate_series(1, ${AGENTS}) g`,
      );
      await store.sql.query(
        `INSERT INTO members (agent_id, user_id, role) VALUES ($1, 'bystander-viewer', 'viewer')`,
        [bystander.agentId],
      );
    } finally {
      await store.close();
    }
    server = await startServeProcess({
      ...service.env,
      ADMIN_TOKEN,
      JWT_SECRET,
      ANALYSIS_WORKER: 'off',
      LIVE_MAX_STREAMS_PER_USER: String(CAP),
      // RELIABILITY_ADMISSION_MAX_IN_FLIGHT=100000 opens the gate (how it was before it)
      ...admissionOverride(),
    });
  });
  afterAll(async () => {
    server?.child.kill('SIGKILL');
    await server?.exited;
    await service?.dispose();
  });

  async function bystanderRound(stream: SseClient, count: number) {
    const posted: number[] = [];
    for (let i = 0; i < count; i++) {
      const batch = runBatch({ events: 2 });
      const started = performance.now();
      const answer = await postBatch(server.url, bystander.apiKey, batch.body, {
        timeoutMs: 30_000,
      });
      posted.push(performance.now() - started);
      expect(answer.status, answer.text).toBe(202);
      await stream.waitFor(
        (client) => client.traces().some((t) => t.item.trace.id === batch.trace.id),
        10_000,
        `the bystander's batch ${i} on its stream`,
      );
    }
    return { p50: percentile(posted, 50), p99: percentile(posted, 99) };
  }

  it("caps the user's streams whatever its agents, and another agent's batches and stream go on", async () => {
    const fleet = await mintDevToken(JWT_SECRET, 'fleet-viewer');
    const live = (n: number) => `${server.url}/v1/agents/${fleetId(n)}/live`;
    const stream = await SseClient.open(
      `${server.url}/v1/agents/${bystander.agentId}/live`,
      await mintDevToken(JWT_SECRET, 'bystander-viewer'),
    );
    expect(stream.status).toBe(200);
    await bystanderRound(stream, 10); // warm-up: the first batches pay for compiling and caches
    const quiet = await bystanderRound(stream, 60);

    // 20 streams on 20 agents, then the 21st on a 21st agent is refused
    const held = await Promise.all(
      Array.from({ length: CAP }, (_, i) => openStream(live(i + 1), fleet)),
    );
    expect(held.map((s) => s.status)).toEqual(Array(CAP).fill(200));
    expect((await openStream(live(CAP + 1), fleet)).status).toBe(429);
    for (const s of held) s.close();

    // then opens and closes as fast as it can, 25 at a time, across all 10,000 agents
    const child = spawn(process.execPath, [
      '--input-type=module',
      '-e',
      CHURN,
      server.url,
      fleet,
      '60',
    ]);
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise((resolve) => child.on('close', resolve));
    await new Promise((resolve) => setTimeout(resolve, 500));
    const during = await bystanderRound(stream, 60);
    child.kill('SIGTERM');
    await exited;
    const statuses = new Map(Object.entries(JSON.parse(output) as Record<string, number>));

    console.log(
      `[${engine}, ${admissionLabel()}] a viewer of ${AGENTS} agents opening streams 25 at a time (cap ${CAP}): ` +
        `${JSON.stringify(Object.fromEntries(statuses))}; bystander p50/p99 quiet ` +
        `${quiet.p50.toFixed(1)}/${quiet.p99.toFixed(1)} ms, during ${during.p50.toFixed(1)}/` +
        `${during.p99.toFixed(1)} ms (×${(during.p99 / quiet.p99).toFixed(1)})`,
    );
    // only streams and refusals past the cap, never an error
    expect([...statuses.keys()].every((status) => status === '200' || status === '429')).toBe(true);
    expect(statuses.get('200') ?? 0).toBeGreaterThan(CAP);
    expect(stream.isEnded).toBe(false);
  });
});
