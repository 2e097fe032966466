import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AgentLoad, expectStoredExactlyOnce, type LoadAgent } from '../harness/agent-load.js';
import { startServeProcess, type CliWrapper, type ServeProcess } from '../harness/cli-process.js';
import { describeEngines } from '../harness/engines.js';
import { postBatch } from '../harness/http.js';
import { processState, startUnrelatedProcess } from '../harness/process-state.js';
import {
  createAgentsWithCli,
  restartableServeEnv,
  freshServiceLocation,
  type ServiceLocation,
} from '../harness/service-location.js';
import { sleep } from '../harness/wait.js';
import { runBatch } from '../fixtures/batches.js';

const RESTARTS = 10;
/** Batches the load must get acknowledged by each restarted process before the next kill. */
const ACKED_PER_ROUND = 60;

/** Posts a one-event batch every 10 ms until one is answered 202; resolves with that moment. */
async function firstAcceptedAt(url: string, agent: LoadAgent, deadlineMs: number): Promise<number> {
  const deadline = performance.now() + deadlineMs;
  while (performance.now() < deadline) {
    try {
      const res = await postBatch(url, agent.apiKey, runBatch().body, { timeoutMs: 2_000 });
      if (res.status === 202) return performance.now();
    } catch {
      // refused or cut while the process is down: try again
    }
    await sleep(10);
  }
  throw new Error(`no 202 from ${url} within ${deadlineMs} ms`);
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** SIGKILLs what is left of a process started by a test (its group, when it leads one). */
function killLeftover(server: ServeProcess): void {
  const { child } = server;
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(child.spawnargs[0] === 'sh' ? -child.pid : child.pid, 'SIGKILL');
  } catch {
    // gone already
  }
}

/** Stops a serve process gracefully (SIGTERM to the process itself); it must exit 0. */
async function stopGracefully(server: ServeProcess): Promise<void> {
  process.kill(server.pid, 'SIGTERM');
  expect(await server.exited).toBe(0);
}

/*
 * What a process supervisor does: on a kill it SIGKILLs the whole process group (the service and
 * its parent), and restarts it at once, before anyone reaped the dead process. A lock that took
 * the dead process's pid for a live owner would refuse that restart; the lock must be gone with
 * the process. PostgreSQL has no DATA_DIR to lock, but the restart must succeed there as well.
 */
describeEngines(
  'restarted at once after a supervisor SIGKILLs its process group, under load [%s]',
  (engine) => {
    let service: ServiceLocation;
    let agents: LoadAgent[];
    let probe: LoadAgent;
    let env: Record<string, string>;
    const processes: ServeProcess[] = [];

    beforeAll(async () => {
      service = freshServiceLocation(engine);
      env = await restartableServeEnv(service);
      [probe, ...agents] = (await createAgentsWithCli(env, 'restart', 4)) as [
        LoadAgent,
        ...LoadAgent[],
      ];
    }, 120_000);
    afterEach(() => processes.splice(0).forEach(killLeftover));
    afterAll(() => service.dispose());

    const serve = async () => {
      // the ready line is an info line; the rest of the log stays quiet
      const started = await startServeProcess({ ...env, LOG_LEVEL: 'info' }, 'supervisor-shell');
      processes.push(started);
      return started;
    };

    it(`restarts ${RESTARTS} times in a row, each time serving 202s at once; every acknowledged batch stored exactly once`, async () => {
      let server = await serve();
      const load = new AgentLoad({ ingestUrl: server.url, agents });
      load.start();
      await load.waitForAcked(ACKED_PER_ROUND);

      const listeningMs: number[] = [];
      const firstAckMs: number[] = [];
      let restartsWhileZombie = 0;
      for (let round = 0; round < RESTARTS; round++) {
        await sleep(Math.floor(Math.random() * 300));
        const killed = server;
        const ackedBefore = load.ackedCount;
        const killedAt = performance.now();
        process.kill(-(killed.child.pid as number), 'SIGKILL');
        // Restart as soon as the process is dead, not waiting for anyone to reap it; count the
        // restarts that began while it was still a zombie (init reaps orphans within ~1 s).
        for (let i = 0; i < 200 && !['Z', undefined].includes(processState(killed.pid)); i++)
          await sleep(1);
        if (processState(killed.pid) === 'Z') restartsWhileZombie++;
        const accepted = firstAcceptedAt(killed.url, probe, 60_000);
        server = await serve();
        listeningMs.push(performance.now() - killedAt);
        firstAckMs.push((await accepted) - killedAt);
        await killed.exited;
        // the load's own clients find the new process and get their batches acknowledged
        await load.waitForAcked(ackedBefore + ACKED_PER_ROUND, 120_000);
      }

      const stats = await load.stop();
      for (const s of stats) {
        expect(s.droppedEvents).toBe(0);
        expect(s.failedBatches).toBe(0);
        expect(s.queuedBatches + s.bufferedEvents).toBe(0);
      }
      expect([...load.refusals.keys()].filter((key) => !key.startsWith('retryable'))).toEqual([]);
      expect([...load.refusals.keys()].filter((key) => /HTTP 5/.test(key))).toEqual([]);

      await stopGracefully(server);
      const store = await service.openStore();
      try {
        await expectStoredExactlyOnce(store, load);
      } finally {
        await store.close();
      }

      // Generous: the process starts from nothing (Node, the engine, the migration check) on a
      // shared 2-core machine under load; a restart that waited for a lock would take forever.
      for (const ms of firstAckMs) expect(ms).toBeLessThan(20_000);
      const fmt = (values: number[]) =>
        `median ${Math.round(median(values) as number)} ms, max ${Math.round(Math.max(...values))} ms`;
      console.log(
        `[restart-after-kill ${engine}] ${RESTARTS} group SIGKILLs under load, ` +
          `${restartsWhileZombie} of them while the killed process was still a zombie; ` +
          `kill → listening ${fmt(listeningMs)}; kill → first 202 ${fmt(firstAckMs)}; ` +
          `${load.ackedCount} batches acknowledged, all stored exactly once`,
      );
    });
  },
);

describe('one DATA_DIR, one flightlog [pglite]', () => {
  let service: ServiceLocation;
  let agent: LoadAgent;
  let dataDir: string;
  const processes: ServeProcess[] = [];
  const accepted: string[] = [];

  beforeAll(async () => {
    service = freshServiceLocation('pglite');
    dataDir = service.env.DATA_DIR as string;
    [agent] = (await createAgentsWithCli(service.env, 'one-dir', 1)) as [LoadAgent];
  }, 120_000);
  afterEach(() => processes.splice(0).forEach(killLeftover));
  afterAll(async () => {
    // whatever was acknowledged on either side of the races is there, once
    const store = await service.openStore();
    try {
      const rows = await store.sql.query<{ batch_id: string }>(
        'SELECT batch_id FROM accepted_batches',
      );
      expect(rows.map((row) => row.batch_id).sort()).toEqual([...accepted].sort());
    } finally {
      await store.close();
      await service.dispose();
    }
  });

  const serve = async (wrapper: CliWrapper = 'none') => {
    const started = await startServeProcess({ ...service.env, LOG_LEVEL: 'info' }, wrapper);
    processes.push(started);
    return started;
  };
  const expectServes = async (server: ServeProcess) => {
    const { body } = runBatch();
    const res = await postBatch(server.url, agent.apiKey, body);
    expect(res.status).toBe(202);
    accepted.push(body.batchId);
  };

  it('two servers racing for one directory: exactly one serves, the other exits 1 naming the directory and the winner', async () => {
    for (let round = 0; round < 4; round++) {
      const [a, b] = await Promise.allSettled([serve(), serve()]);
      const won = [a, b].filter((r) => r.status === 'fulfilled');
      const lost = [a, b].filter((r) => r.status === 'rejected');
      expect(won).toHaveLength(1);
      expect(lost).toHaveLength(1);
      const winner = (won[0] as PromiseFulfilledResult<ServeProcess>).value;
      const refusal = String((lost[0] as PromiseRejectedResult).reason);
      expect(refusal).toMatch(/^Error: serve exited with 1: /);
      expect(refusal).toContain(`DATA_DIR ${dataDir} is in use by process ${winner.pid}.`);
      await expectServes(winner);
      await stopGracefully(winner);
    }
  });

  it('starts on a lock file that names a live process which is not flightlog (a reused pid)', async () => {
    const sleeper = startUnrelatedProcess();
    try {
      for (const pid of [sleeper.pid as number, process.pid]) {
        writeFileSync(join(dataDir, 'flightlog.lock'), `${pid}\n`);
        const server = await serve();
        await expectServes(server);
        await stopGracefully(server);
      }
    } finally {
      sleeper.kill('SIGKILL');
    }
  });

  it('starts at once while the killed previous process is a zombie its parent has not reaped', async () => {
    const dead = await serve('unreaping-parent');
    await expectServes(dead);
    process.kill(dead.pid, 'SIGKILL');
    for (let i = 0; i < 100 && processState(dead.pid) !== 'Z'; i++) await sleep(10);
    expect(processState(dead.pid)).toBe('Z');
    const server = await serve();
    await expectServes(server);
    // still a zombie: the pid exists, and the lock was not its to hold
    expect(processState(dead.pid)).toBe('Z');
    await stopGracefully(server);
  });
});
