import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { mintDevToken } from '../../src/auth/dev-token.js';
import { AgentLoad, type LoadAgent } from '../harness/agent-load.js';
import { runCli, startServeProcess, type ServeProcess } from '../harness/cli-process.js';
import { describeEngines } from '../harness/engines.js';
import {
  createAgentsWithCli,
  freshServiceLocation,
  stopThenExpectStored,
  type ServiceLocation,
} from '../harness/service-location.js';
import { SseClient } from '../harness/sse-client.js';
import { sleep } from '../harness/wait.js';

/** Length of the steady phase (`SOAK_SECONDS`, default 40). */
const SOAK_MS = Number(process.env.SOAK_SECONDS ?? 40) * 1_000;
const SAMPLE_MS = 2_000;
const STREAMS_PER_AGENT = 3;
const JWT_SECRET = 'soak-test-secret-0123456789abcdef0123';

/** Resident memory of a process, from /proc (Linux), in MiB. */
function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  return kib / 1024;
}

const mean = (values: number[]) => values.reduce((sum, v) => sum + v, 0) / values.length;

/*
 * Steady load with live streams open, long enough for a leak proportional to traffic (a map
 * that is never pruned, a listener per request) to show as growth from the middle of the run to
 * its end. The first quarter is warm-up: caches, pools, JIT and the engine's buffers fill there.
 */
describeEngines('soak: steady load with live streams open [%s]', (engine) => {
  let service: ServiceLocation;
  let agents: LoadAgent[];
  let server: ServeProcess | undefined;
  const streams: SseClient[] = [];

  beforeAll(async () => {
    service = freshServiceLocation(engine);
    const env = { ...service.env, JWT_SECRET };
    agents = await createAgentsWithCli(env, 'soak', 3);
    for (const agent of agents) {
      const granted = await runCli(
        ['member', 'grant', '--agent', agent.agentId, '--user', 'watcher', '--role', 'viewer'],
        env,
      );
      expect(granted.code, granted.stderr).toBe(0);
    }
  }, 120_000);
  afterAll(async () => {
    for (const stream of streams) stream.close();
    if (server?.child.exitCode === null) server.child.kill('SIGKILL');
    await service.dispose();
  });

  it(`holds memory flat over ${SOAK_MS / 1000} s and delivers every batch to every stream`, async () => {
    server = await startServeProcess({
      ...service.env,
      JWT_SECRET,
      ANALYSIS_GRACE_MS: '0',
      // the live buffer is bounded by design (1000 batches per agent, 256 MiB in all); a small
      // budget fills it in the warm-up, so what grows afterwards is not the buffer filling up
      LIVE_BUFFER_MAX_BYTES: String(2 * 1024 * 1024),
      LOG_LEVEL: 'info',
    });
    const pid = server.child.pid!;
    const token = await mintDevToken(JWT_SECRET, 'watcher', 3_600);
    const streamsOf = new Map<string, SseClient[]>();
    for (const agent of agents) {
      const opened: SseClient[] = [];
      for (let i = 0; i < STREAMS_PER_AGENT; i++)
        opened.push(await SseClient.open(`${server.url}/v1/agents/${agent.agentId}/live`, token));
      streams.push(...opened);
      streamsOf.set(agent.agentId, opened);
    }
    expect(streams.every((stream) => stream.status === 200)).toBe(true);

    const startMiB = rssMiB(pid);
    // steady, not flat out: a batch every 50 ms per agent, as busy agents flush
    const load = new AgentLoad({
      ingestUrl: server.url,
      agents,
      flushIntervalMs: 50,
      eventGapMs: 10,
    });
    load.start();
    const samples: number[] = [];
    const began = Date.now();
    while (Date.now() - began < SOAK_MS) {
      await sleep(SAMPLE_MS);
      samples.push(rssMiB(pid));
    }
    const stats = await load.stop();
    const endMiB = rssMiB(pid);

    // every stream saw every batch of its agent (one message per item), and no warning
    for (const agent of agents) {
      const batches = [...load.acked.values()].filter((b) => b.agentId === agent.agentId);
      const items = batches.reduce((sum, b) => sum + b.traceIds.length, 0);
      for (const stream of streamsOf.get(agent.agentId)!) {
        await stream.waitFor((s) => s.traces().length >= items, 10_000, `${items} messages`);
        expect(stream.events.filter((e) => e.event === 'warning')).toEqual([]);
        expect(stream.isEnded).toBe(false);
      }
    }
    for (const s of stats) expect(s.droppedEvents).toBe(0);

    // flat after warm-up: the last quarter no higher than the second, give or take noise
    const quarter = Math.max(1, Math.floor(samples.length / 4));
    const second = mean(samples.slice(quarter, 2 * quarter));
    const last = mean(samples.slice(-quarter));
    console.log(
      `[soak ${engine}] ${SOAK_MS / 1000} s, ${load.ackedCount} batches, ${streams.length} streams: ` +
        `RSS ${startMiB.toFixed(0)} MiB at start, ${second.toFixed(0)} MiB in the second quarter, ` +
        `${last.toFixed(0)} MiB in the last, ${endMiB.toFixed(0)} MiB at the end ` +
        `(peak ${Math.max(...samples).toFixed(0)} MiB)`,
    );
    expect(last).toBeLessThan(second * 1.15 + 24);

    for (const stream of streams) stream.close();
    await stopThenExpectStored(server, service, load);
  });
});
