import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LiteSvmRpc, solanaKeypair } from '@flightlog/test-support';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { failedNestedRun } from '../fixtures/dashboard-runs.js';
import { runBatch } from '../fixtures/batches.js';
import { silentLogger, startTestWorker } from '../harness/analysis.js';
import {
  SCREENSHOTS,
  describeWithBrowser,
  launchBrowser,
  type DashboardBrowser,
} from '../harness/browser.js';
import { runCli } from '../harness/cli-process.js';
import { postBatch, send } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { sleep, waitFor } from '../harness/wait.js';
import type { AnalysisWorker } from '../../src/analysis/analysis-worker.js';
import type { Anchorer } from '../../src/anchoring/anchorer.js';
import { anchorerFromConfig } from '../../src/anchoring/anchorer-from-config.js';

/*
 * A run's proof in the dashboard (issue 25, part 3): its state (not finished, pending, anchored,
 * or anchoring off), the transaction on the cluster's explorer, and the run with its proof to
 * download — a file `flightlog verify` proves against the chain.
 */
describeWithBrowser('a run’s proof in the browser', () => {
  let rpc: LiteSvmRpc;
  let server: TestServer;
  let plain: TestServer;
  let browser: DashboardBrowser;
  let worker: AnalysisWorker;
  let plainWorker: AnalysisWorker;
  let anchorer: Anchorer;
  let agent: TestAgent;
  let owner: string;
  const anchorKey = solanaKeypair();

  beforeAll(async () => {
    rpc = await new LiteSvmRpc().start();
    await rpc.airdrop(anchorKey.address, 1_000_000_000n);
    server = await startTestServer('pglite', {
      anchoring: {
        keypair: anchorKey.secretKey,
        cluster: 'devnet',
        rpcUrl: rpc.url,
        intervalMs: 100,
        pollMs: 10,
        backoffMs: 10,
      },
    });
    plain = await startTestServer('pglite');
    worker = startTestWorker(server.store);
    plainWorker = startTestWorker(plain.store);
    anchorer = anchorerFromConfig(server.config.anchoring, server.store, {
      logger: silentLogger,
      metrics: server.metrics,
    }) as Anchorer;
    browser = await launchBrowser();
    agent = await server.createAgent({ name: 'swap-agent' });
    owner = await server.userToken('owner-ana', agent.agentId, 'owner');
  });
  afterAll(async () => {
    await browser?.close();
    await worker?.stop(5_000);
    await plainWorker?.stop(5_000);
    await server?.close();
    await plain?.close();
    await rpc?.close();
  });

  const column = async (traceId: string, name: 'trace_hash' | 'anchor_signature') => {
    const [row] = await server.store.sql.query<Record<string, string | null>>(
      `SELECT ${name} AS value FROM traces WHERE id = $1`,
      [traceId],
    );
    return row?.value ?? undefined;
  };

  it('shows a run not finished, then pending, then anchored with its transaction, and its download verifies on chain', async () => {
    const running = runBatch({ trace: { status: 'running', inputSummary: 'Still swapping' } });
    let res = await postBatch(server.url, agent.apiKey, running.body);
    expect(res.status).toBe(202);
    const run = failedNestedRun();
    res = await postBatch(server.url, agent.apiKey, run.body);
    expect(res.status).toBe(202);

    // the dashboard learns the cluster from its public configuration
    const config = await (await fetch(`${server.url}/v1/dashboard/config`)).json();
    expect(config).toEqual({
      signIn: 'token',
      anchoring: { cluster: 'devnet', address: anchorKey.address },
    });
    const { page, errors } = await browser.newPage();
    await page.goto(`${server.url}/runs/${running.trace.id}#token=${owner}`);
    const proof = page.getByRole('region', { name: 'Proof' });
    await proof.getByText('Not finished').waitFor();
    expect(await proof.getByRole('button').count()).toBe(0);

    await waitFor(() => column(run.trace.id, 'trace_hash'), 'the run fingerprinted', 30_000);
    await page.goto(`${server.url}/runs/${run.trace.id}#token=${owner}`);
    await proof.getByText('Pending', { exact: true }).waitFor();
    await proof.screenshot({ path: join(SCREENSHOTS, 'run-proof-pending.png') });
    const traceHash = await column(run.trace.id, 'trace_hash');
    await proof.getByText(traceHash as string).waitFor();

    await sleep(120);
    for (let i = 0; i < 50 && !(await column(run.trace.id, 'anchor_signature')); i++) {
      await anchorer.pass();
      await sleep(10);
    }
    const signature = await column(run.trace.id, 'anchor_signature');
    expect(signature).toBeTruthy();
    await page.reload();
    await proof.getByText('Anchored', { exact: true }).waitFor();
    const explorer = proof.getByRole('link', { name: signature as string });
    expect(await explorer.getAttribute('href')).toBe(
      `https://explorer.solana.com/tx/${signature}?cluster=devnet`,
    );
    expect(await explorer.getAttribute('rel')).toContain('noreferrer');
    await proof.getByText(anchorKey.address, { exact: true }).waitFor();
    await proof
      .getByText(`--cluster devnet --signer ${anchorKey.address}`, { exact: false })
      .waitFor();
    await proof.scrollIntoViewIfNeeded();
    await page.screenshot({ path: join(SCREENSHOTS, 'run-proof-anchored.png'), fullPage: true });

    // shared meanwhile: the file handed on for checking must not carry the link
    const shared = await send(server.url, `/v1/traces/${run.trace.id}/share`, {}, { token: owner });
    expect(shared.status).toBe(201);
    await page.reload();
    await proof.getByText('Anchored', { exact: true }).waitFor();
    // the same, in the dark scheme
    const { page: dark } = await browser.newPage({ colorScheme: 'dark' });
    await dark.goto(`${server.url}/runs/${run.trace.id}#token=${owner}`);
    const darkProof = dark.getByRole('region', { name: 'Proof' });
    await darkProof.getByText('Anchored', { exact: true }).waitFor();
    await darkProof.screenshot({ path: join(SCREENSHOTS, 'run-proof-anchored-dark.png') });
    await dark.close();
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      proof.getByRole('button', { name: 'Download run and proof' }).click(),
    ]);
    expect(download.suggestedFilename()).toBe(`flightlog-run-${run.trace.id}.json`);
    const file = join(
      mkdtempSync(join(tmpdir(), 'flightlog-proof-')),
      download.suggestedFilename(),
    );
    await download.saveAs(file);
    const saved = readFileSync(file, 'utf8');
    expect(saved).not.toContain((shared.body as { shareToken: string }).shareToken);
    expect((JSON.parse(saved) as { trace: { shareToken: unknown } }).trace.shareToken).toBeNull();
    // what the page tells the person to run, against the cluster the run is anchored on
    const verified = await runCli(
      ['verify', file, '--rpc', rpc.url, '--signer', anchorKey.address],
      {},
    );
    expect(verified.code, verified.stdout + verified.stderr).toBe(0);
    expect(verified.stdout).toContain(`anchored       ${run.trace.id} ${traceHash}`);
    expect(verified.stdout).toContain(`the memo of ${signature}`);
    expect(verified.stdout).not.toContain('signer not checked');
    expect(verified.stdout).toContain('1 verified, 0 failed, 0 without a fingerprint');
    expect(errors).toEqual([]);
  });

  it('says a finished run is not anchored when anchoring is off on the server', async () => {
    const mine = await plain.createAgent({ name: 'quiet-agent' });
    const token = await plain.userToken('owner-bo', mine.agentId, 'owner');
    const run = runBatch({ trace: { status: 'completed' } });
    const res = await postBatch(plain.url, mine.apiKey, run.body);
    expect(res.status).toBe(202);
    await waitFor(async () => {
      const [row] = await plain.store.sql.query<{ trace_hash: string | null }>(
        'SELECT trace_hash FROM traces WHERE id = $1',
        [run.trace.id],
      );
      return row?.trace_hash ?? undefined;
    }, 'the run fingerprinted');
    const { page, errors } = await browser.newPage();
    await page.goto(`${plain.url}/runs/${run.trace.id}#token=${token}`);
    const proof = page.getByRole('region', { name: 'Proof' });
    await proof.getByText('Not anchored: anchoring is off on this server.').waitFor();
    await proof.screenshot({ path: join(SCREENSHOTS, 'run-proof-off.png') });
    await proof.getByRole('button', { name: 'Download run' }).waitFor();
    expect(await proof.getByRole('link').count()).toBe(0);
    expect(errors).toEqual([]);
  });
});
