import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LiteSvmRpc, solanaKeypair } from '@flightlog/test-support';
import { MEMO_PROGRAM_ADDRESS } from '@solana-program/memo';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runBatch } from '../fixtures/batches.js';
import { runCli, startServeProcess, type ServeProcess } from '../harness/cli-process.js';
import { describeEngines } from '../harness/engines.js';
import { postBatch } from '../harness/http.js';
import {
  createAgentsWithCli,
  freshServiceLocation,
  restartableServeEnv,
  type ServiceLocation,
} from '../harness/service-location.js';
import { waitFor } from '../harness/wait.js';

/*
 * A crash between the anchoring transaction and storing the proofs (issue 25, part 3): the real
 * `flightlog serve` is killed (SIGKILL) once its transaction has landed on the cluster but
 * before it heard so. Restarted, it finds the transaction by the signature it kept and records
 * the proofs: the tree is on chain once, and no run is left without its proof.
 */
describeEngines('anchoring through a crash [%s]', (engine) => {
  let rpc: LiteSvmRpc;
  let service: ServiceLocation;
  let env: Record<string, string>;
  let server: ServeProcess | undefined;
  const anchorKey = solanaKeypair();

  beforeAll(async () => {
    rpc = await new LiteSvmRpc().start();
    await rpc.airdrop(anchorKey.address, 1_000_000_000n);
    service = freshServiceLocation(engine);
    env = {
      ...(await restartableServeEnv(service)),
      ANALYSIS_WORKER: 'on',
      // serve says where it listens at info
      LOG_LEVEL: 'info',
      ANALYSIS_GRACE_MS: '0',
      ANCHOR_KEYPAIR: JSON.stringify([...anchorKey.secretKey]),
      ANCHOR_CLUSTER: 'devnet',
      ANCHOR_RPC_URL: rpc.url,
      // one tree of the five runs, whenever they are fingerprinted
      ANCHOR_BATCH_RUNS: '5',
      ANCHOR_INTERVAL_MS: '600000',
      ANCHOR_POLL_MS: '50',
      ANCHOR_LEASE_MS: '1000',
      ANCHOR_BACKOFF_MS: '50',
    };
  });
  afterAll(async () => {
    if (server && server.child.exitCode === null) server.child.kill('SIGKILL');
    await rpc?.close();
    await service?.dispose();
  });

  const memoLandings = async () =>
    (await rpc.landed()).filter((t) => t.programs.includes(MEMO_PROGRAM_ADDRESS));
  const anchoredRuns = async (url: string) => {
    const text = await (await fetch(`${url}/metrics`)).text();
    return Number(/^flightlog_anchored_runs_total (\d+)/m.exec(text)?.[1] ?? 0);
  };

  it('neither loses nor doubles an anchor when the process dies after its transaction landed', async () => {
    const [agent] = await createAgentsWithCli(env, 'anchored', 1);
    if (!agent) throw new Error('no agent');
    await rpc.holdAfterLanding(true);
    server = await startServeProcess(env);
    const runs = Array.from({ length: 5 }, () => runBatch({ trace: { status: 'completed' } }));
    for (const run of runs) {
      const res = await postBatch(server.url, agent.apiKey, run.body);
      expect(res.status, res.text).toBe(202);
    }
    // the tree's transaction landed; the process is still waiting for the answer: kill it
    const [landed] = await waitFor(
      async () => {
        const found = await memoLandings();
        return found.length > 0 ? found : undefined;
      },
      'the anchoring transaction on chain',
      30_000,
    ).catch((error: unknown) => {
      throw new Error(`${String(error)}\n${server?.output().slice(-3000)}`);
    });
    server.child.kill('SIGKILL');
    await server.exited;
    await rpc.holdAfterLanding(false);

    {
      // what the dead process left: the tree signed, its transaction kept, no proof stored
      const store = await service.openStore();
      try {
        const [batch] = await store.anchors.batches(1);
        expect(batch).toMatchObject({ state: 'signed', signature: landed?.signature, size: 5 });
        const [row] = await store.sql.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM traces WHERE anchor_signature IS NOT NULL',
        );
        expect(row?.n).toBe(0);
      } finally {
        await store.close();
      }
    }

    server = await startServeProcess(env);
    const url = server.url;
    await waitFor(
      async () => ((await anchoredRuns(url)) >= 5 ? true : undefined),
      'the restarted process recording the anchor',
      30_000,
    );
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);

    // on chain once, and every run carries that transaction
    expect((await memoLandings()).map((t) => t.signature)).toEqual([landed?.signature]);
    const store = await service.openStore();
    try {
      const batches = await store.anchors.batches();
      expect(batches).toHaveLength(1);
      expect(batches[0]).toMatchObject({ state: 'anchored', signature: landed?.signature });
      const rows = await store.sql.query<{ anchor_signature: string | null }>(
        'SELECT anchor_signature FROM traces WHERE id = ANY($1::text[])',
        [runs.map((r) => r.trace.id)],
      );
      expect(rows.map((r) => r.anchor_signature)).toEqual(runs.map(() => landed?.signature));
    } finally {
      await store.close();
    }

    // and the agent's export proves each run against the chain
    const file = join(mkdtempSync(join(tmpdir(), 'flightlog-crash-')), 'runs.ndjson');
    const exported = await runCli(['export', '--agent', agent.agentId, '--out', file], env);
    expect(exported.code, exported.stderr).toBe(0);
    const verified = await runCli(
      ['verify', file, '--rpc', rpc.url, '--signer', anchorKey.address],
      {},
    );
    expect(verified.code, verified.stdout + verified.stderr).toBe(0);
    expect(verified.stdout).toContain(
      '5 verified, 0 failed, 0 without a fingerprint; 5 of the verified anchored',
    );
  }, 120_000);
});
