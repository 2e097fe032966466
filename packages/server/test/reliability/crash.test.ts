import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { AgentLoad, type LoadAgent } from '../harness/agent-load.js';
import { startServeProcess, type ServeProcess } from '../harness/cli-process.js';
import { describeEngines } from '../harness/engines.js';
import {
  createAgentsWithCli,
  restartableServeEnv,
  freshServiceLocation,
  stopThenExpectStored,
  type ServiceLocation,
} from '../harness/service-location.js';
import { sleep } from '../harness/wait.js';

const AGENTS = 4;
/** Batches acknowledged in all before the load stops (a few thousand, as the issue asks). */
const TARGET_BATCHES = 2_000;

/*
 * The promise under test: a 202 means stored. A SIGKILL gives the service no chance to flush or
 * finish anything, so whatever it acknowledged must already be committed; requests cut short
 * are retried by the clients, and a batch that was committed but whose answer was lost must be
 * recognised (its batchId) rather than stored twice.
 */
describeEngines('the service killed with SIGKILL mid-load and restarted [%s]', (engine) => {
  let service: ServiceLocation;
  let agents: LoadAgent[];
  let env: Record<string, string>;
  const processes: ServeProcess[] = [];

  beforeAll(async () => {
    service = freshServiceLocation(engine);
    env = await restartableServeEnv(service);
    agents = await createAgentsWithCli(env, 'crash', AGENTS);
  }, 120_000);
  afterEach(() => {
    for (const p of processes.splice(0)) if (p.child.exitCode === null) p.child.kill('SIGKILL');
  });
  afterAll(() => service.dispose());

  const serve = async () => {
    // the ready line is an info line; the rest of the log stays quiet
    const started = await startServeProcess({ ...env, LOG_LEVEL: 'info' });
    processes.push(started);
    return started;
  };

  it("keeps every acknowledged batch exactly once, and the clients' retries complete the rest", async () => {
    let server = await serve();
    const load = new AgentLoad({ ingestUrl: server.url, agents });
    load.start();

    // kill at a random moment once the load is well under way
    const killAt = 300 + Math.floor(Math.random() * 700);
    await load.waitForAcked(killAt);
    server.child.kill('SIGKILL');
    await server.exited;
    const ackedAtKill = load.ackedCount;
    const downMs = Math.floor(Math.random() * 1_000);
    await sleep(downMs);
    const restarting = Date.now();
    server = await serve();
    const restartMs = Date.now() - restarting;

    // the clients find the new process by themselves and carry on
    await load.waitForAcked(Math.max(TARGET_BATCHES, ackedAtKill + 500), 120_000);
    const stats = await load.stop();
    for (const s of stats) {
      expect(s.droppedEvents).toBe(0);
      expect(s.failedBatches).toBe(0);
      expect(s.queuedBatches + s.bufferedEvents).toBe(0);
    }
    const retried = stats.reduce((sum, s) => sum + s.retriedRequests, 0);
    const replayed = stats.reduce((sum, s) => sum + s.replayedBatches, 0);
    // the outage showed: requests failed while the process was down, and were sent again
    expect(retried).toBeGreaterThan(0);
    // no client-caused or server-caused refusal, only the outage
    expect([...load.refusals.keys()].filter((key) => !key.startsWith('retryable'))).toEqual([]);
    expect([...load.refusals.keys()].filter((key) => /HTTP 5/.test(key))).toEqual([]);

    await stopThenExpectStored(server, service, load);
    console.log(
      `[crash ${engine}] ${load.ackedCount} batches acknowledged (${ackedAtKill} before SIGKILL), ` +
        `down ${downMs} ms + restart ${restartMs} ms, ${retried} requests retried, ` +
        `${replayed} batches answered as replays; refusals: ${JSON.stringify(Object.fromEntries(load.refusals))}`,
    );
  });
});
