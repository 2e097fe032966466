import { mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Event, Trace } from '@flightlog/protocol';
import { LiteSvmRpc, solanaKeypair } from '@flightlog/test-support';
import { MEMO_PROGRAM_ADDRESS } from '@solana-program/memo';
import { getBase58Decoder } from '@solana/kit';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { finishedRun, llmCallEvent, newId } from '../fixtures/batches.js';
import { silentLogger, startTestWorker } from '../harness/analysis.js';
import { describeEngines } from '../harness/engines.js';
import { postBatch, send } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { sleep, waitFor } from '../harness/wait.js';
import type { AnalysisWorker } from '../../src/analysis/analysis-worker.js';
import type { Anchorer } from '../../src/anchoring/anchorer.js';
import { anchorerFromConfig } from '../../src/anchoring/anchorer-from-config.js';
import { SolanaAnchorReader } from '../../src/anchoring/solana-anchor-reader.js';
import { SolanaMemoSink } from '../../src/anchoring/solana-memo-sink.js';
import { verifyFile, verifyRun, type RunVerdict } from '../../src/cli/verify-command.js';

/*
 * Anchoring finished runs on Solana (issue 25, part 3), against a real Solana runtime in this
 * process (LiteSVM with the Memo program, behind a JSON-RPC endpoint @solana/kit talks to):
 * runs are gathered into trees, each root goes on chain once in a memo transaction, every run's
 * proof verifies from its export alone plus the chain, and each kind of tampering fails at the
 * step it breaks.
 */

type Run = { trace: Trace; events: Event[] };

describeEngines('anchoring on Solana [%s]', (engine) => {
  let rpc: LiteSvmRpc;
  let server: TestServer;
  let worker: AnalysisWorker;
  let agent: TestAgent;
  let ownerToken: string;
  let anchorer: Anchorer;
  const anchorKey = solanaKeypair();
  const signer = anchorKey.address;
  const SOL = 1_000_000_000n;

  beforeAll(async () => {
    rpc = await new LiteSvmRpc().start();
    await rpc.airdrop(signer, 10n * SOL);
    server = await startTestServer(engine, {
      anchoring: {
        keypair: anchorKey.secretKey,
        cluster: 'devnet',
        rpcUrl: rpc.url,
        batchRuns: 40,
        intervalMs: 100,
        pollMs: 10,
        leaseMs: 5_000,
        backoffMs: 10,
      },
    });
    worker = startTestWorker(server.store);
    agent = await server.createAgent();
    ownerToken = await server.userToken('anchor-owner', agent.agentId, 'owner');
    const made = anchorerFromConfig(server.config.anchoring, server.store, {
      logger: silentLogger,
      metrics: server.metrics,
    });
    if (!made) throw new Error('anchoring is configured, but no anchorer was made');
    anchorer = made;
  });
  afterAll(async () => {
    await worker.stop(5_000);
    await server.close();
    await rpc.close();
  });

  /** Posts `count` finished runs of two model calls, ten a batch. */
  const postFinishedRuns = async (count: number): Promise<string[]> => {
    const ids: string[] = [];
    for (let from = 0; from < count; from += 10) {
      const items = Array.from({ length: Math.min(10, count - from) }, () => {
        const run = finishedRun();
        ids.push(run.trace.id);
        return run;
      });
      const res = await postBatch(server.url, agent.apiKey, { batchId: newId(), items });
      expect(res.status, res.text).toBe(202);
    }
    return ids;
  };

  const countWhere = async (ids: string[], condition: string) => {
    const [row] = await server.store.sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM traces WHERE id = ANY($1::text[]) AND ${condition}`,
      [ids],
    );
    return row?.n ?? 0;
  };

  const fingerprinted = (ids: string[]) =>
    waitFor(
      async () =>
        (await countWhere(ids, 'trace_hash IS NOT NULL')) === ids.length ? true : undefined,
      'every run fingerprinted',
      30_000,
    );

  /** Runs the anchorer's passes until every one of `ids` is anchored. */
  const anchorAll = async (ids: string[], passes = 400) => {
    await fingerprinted(ids);
    for (let i = 0; i < passes; i++) {
      if ((await countWhere(ids, 'anchor_signature IS NOT NULL')) === ids.length) return;
      await anchorer.pass();
      await sleep(5);
    }
    throw new Error('the runs were not all anchored');
  };

  /** The agent's export, as NDJSON lines parsed. */
  const exportRuns = async (): Promise<Run[]> => {
    const res = await fetch(`${server.url}/v1/agents/${agent.agentId}/export`, {
      headers: { authorization: `Bearer ${ownerToken}` },
    });
    expect(res.status).toBe(200);
    return (await res.text())
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => JSON.parse(line) as Run);
  };

  const chain = () => ({ reader: new SolanaAnchorReader(rpc.url), signer });
  const memoLandings = async () =>
    (await rpc.landed()).filter((t) => t.programs.includes(MEMO_PROGRAM_ADDRESS));

  const verdictOf = (run: Run, options = { chain: chain() }) => verifyRun(run, 1, options);

  let runs: Run[] = [];

  it('anchors 100 runs in three transactions, and every run’s proof verifies on chain', async () => {
    const before = (await memoLandings()).length;
    const ids = await postFinishedRuns(100);
    await anchorAll(ids);
    const landed = (await memoLandings()).slice(before);
    // 40 + 40 + 20 (ANCHOR_BATCH_RUNS = 40): one transaction a tree, each tree once
    expect(landed).toHaveLength(3);
    const batches = (await server.store.anchors.batches()).filter((b) => b.cluster === 'devnet');
    expect(batches.map((b) => [b.state, b.size])).toEqual([
      ['anchored', 20],
      ['anchored', 40],
      ['anchored', 40],
    ]);
    expect(new Set(batches.map((b) => b.root)).size).toBe(3);
    expect(batches.map((b) => b.signature).sort()).toEqual(landed.map((t) => t.signature).sort());

    const read = await send(server.url, `/v1/traces/${ids[7]}`, undefined, { token: ownerToken });

    const trace = (read.body as { trace: Trace }).trace;
    expect(trace.merkleProof).toMatch(
      /^flightlog-proof\/1 [0-9a-f]{64} \d+ (40( [0-9a-f]{64}){6}|20( [0-9a-f]{64}){5})$/,
    );
    expect(batches.map((b) => b.signature)).toContain(trace.anchorSignature);
    expect(trace.anchorSlot).toMatch(/^\d+$/);

    // the export alone and the chain prove every run
    runs = await exportRuns();
    const file = join(mkdtempSync(join(tmpdir(), 'flightlog-anchor-')), 'export.ndjson');
    writeFileSync(file, runs.map((run) => JSON.stringify(run)).join('\n') + '\n');
    const verdicts: RunVerdict[] = [];
    const asked = (await rpc.calls()).filter((m) => m === 'getTransaction').length;
    const report = await verifyFile(file, (v) => verdicts.push(v), { chain: chain() });
    // each tree's transaction is read once, not once per run
    expect((await rpc.calls()).filter((m) => m === 'getTransaction').length - asked).toBe(3);
    expect(report).toMatchObject({ verified: 100, anchored: 100, failed: 0 });
    expect(new Set(verdicts.map((v) => (v.kind === 'anchored' ? v.signature : v.kind))).size).toBe(
      3,
    );
    // offline, without the chain, the path is checked as far as the root
    const offline = await verifyFile(file, () => {}, {});
    expect(offline).toMatchObject({ verified: 100, anchored: 100, failed: 0 });
    expect(offline.verdicts.every((v) => v.kind === 'path-verified')).toBe(true);
  });

  it('fails a tampered run, a wrong proof and a wrong transaction, each at its own step', async () => {
    expect(runs.length).toBe(100);
    const [a, b] = runs as [Run, Run];
    const other = runs.find((r) => r.trace.anchorSignature !== a.trace.anchorSignature) as Run;
    const copy = (run: Run): Run => structuredClone(run);
    const failure = async (run: Run, options = { chain: chain() }) => {
      const verdict = await verdictOf(run, options);
      if (verdict.kind !== 'failed') throw new Error(`expected a failure, got ${verdict.kind}`);
      return { step: verdict.step, reason: verdict.reason };
    };
    expect((await verdictOf(a)).kind).toBe('anchored');
    // without the operator's key, the chain proves a root was anchored, not by whom
    expect(
      await verifyRun(a, 1, { chain: { reader: new SolanaAnchorReader(rpc.url) } }),
    ).toMatchObject({ kind: 'anchored', signerChecked: false });

    // one byte of one event's payload
    const edited = copy(a);
    const payload = edited.events[1]?.payload as { model: string };
    payload.model = payload.model.slice(0, -1) + (payload.model.endsWith('x') ? 'y' : 'x');
    expect(await failure(edited)).toMatchObject({
      step: 'traceHash',
      reason: expect.stringMatching(/does not give its traceHash/),
    });
    // one event's time, one millisecond
    const retimed = copy(a);
    (retimed.events[0] as Event).durationMs = ((retimed.events[0] as Event).durationMs ?? 0) + 1;
    expect((await failure(retimed)).step).toBe('traceHash');
    // two events reordered
    const reordered = copy(a);
    reordered.events.reverse();
    expect(await failure(reordered)).toMatchObject({
      step: 'traceHash',
      reason: expect.stringMatching(/reordered/),
    });
    // another run's proof, from the same tree or from another
    for (const donor of [b, other]) {
      const swapped = copy(a);
      swapped.trace.merkleProof = donor.trace.merkleProof ?? null;
      expect(await failure(swapped)).toMatchObject({
        step: 'proof',
        reason: expect.stringMatching(/the proof is not this run's/),
      });
    }
    // another tree's transaction
    const elsewhere = copy(a);
    elsewhere.trace.anchorSignature = other.trace.anchorSignature ?? null;
    elsewhere.trace.anchorSlot = other.trace.anchorSlot ?? null;
    expect(await failure(elsewhere)).toMatchObject({
      step: 'memo',
      reason: expect.stringMatching(/the transaction is not this run's/),
    });
    // the right transaction, but a slot it is not at
    const wrongSlot = copy(a);
    wrongSlot.trace.anchorSlot = String(BigInt(a.trace.anchorSlot ?? '0') + 1n);
    expect(await failure(wrongSlot)).toMatchObject({
      step: 'transaction',
      reason: expect.stringMatching(/is at slot/),
    });
    // a transaction that is no anchor: a memo of someone else's
    const stranger = solanaKeypair();
    await rpc.airdrop(stranger.address, SOL);
    const strangerSink = new SolanaMemoSink({
      cluster: 'devnet',
      rpcUrl: rpc.url,
      keypair: stranger.secretKey,
    });
    const signed = await strangerSink.sign('gm, this is not an anchor');
    if (!signed.ok || !(await strangerSink.send(signed.value)).ok) throw new Error('no memo sent');
    const foreign = signed.value.signature;
    const noMemo = copy(a);
    noMemo.trace.anchorSignature = foreign;
    noMemo.trace.anchorSlot = null;
    expect(await failure(noMemo)).toMatchObject({
      step: 'memo',
      reason: expect.stringMatching(/no flightlog anchor memo/),
    });
    // a signature the cluster never saw
    const unknown = copy(a);
    unknown.trace.anchorSignature = foreign.slice(0, -2) + (foreign.endsWith('1') ? '22' : '11');
    expect((await failure(unknown)).step).toBe('transaction');
    // the right chain, checked against another anchoring key
    expect(
      await failure(a, {
        chain: { reader: new SolanaAnchorReader(rpc.url), signer: stranger.address },
      }),
    ).toMatchObject({ step: 'signer' });
  });

  it('fails a transaction an RPC made up, with the operator as fee payer but a signature nobody made', async () => {
    const [a] = runs as [Run];
    const real = (await rpc.landed()).find((t) => t.signature === a.trace.anchorSignature);
    if (!real) throw new Error('no landed transaction');
    // the real transaction's bytes with its signature's first byte changed, and its id with them
    const bytes = Buffer.from(real.wire, 'base64');
    bytes[1] = (bytes[1] ?? 0) ^ 0xff; // byte 0 counts the signatures; 1..64 is the first
    const forgedSignature = getBase58Decoder().decode(bytes.subarray(1, 65));
    const lying = http.createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        const { id } = JSON.parse(body) as { id: number };
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            jsonrpc: '2.0',
            id,
            result: {
              slot: real.slot,
              blockTime: null,
              version: 0,
              transaction: [bytes.toString('base64'), 'base64'],
              meta: { err: null, status: { Ok: null }, fee: 5000 },
            },
          }),
        );
      });
    });
    await new Promise<void>((resolve) => lying.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = lying.address() as AddressInfo;
      const forged = structuredClone(a);
      forged.trace.anchorSignature = forgedSignature;
      const verdict = await verifyRun(forged, 1, {
        chain: { reader: new SolanaAnchorReader(`http://127.0.0.1:${port}`), signer },
      });
      expect(verdict).toMatchObject({
        kind: 'failed',
        step: 'transaction',
        reason: expect.stringMatching(/signature does not verify/),
      });
    } finally {
      await new Promise<void>((resolve) => lying.close(() => resolve()));
    }
  });

  it('anchors runs in the order they were written, whatever ids their clients chose', async () => {
    const other = await server.createAgent();
    // one run of another tenant first, with an id that sorts last…
    const late = finishedRun();
    const lastId = `zz${late.trace.id.slice(2)}`;
    late.trace.id = lastId;
    for (const event of late.events) event.traceId = lastId;
    let res = await postBatch(server.url, other.apiKey, {
      batchId: newId(),
      items: [{ trace: late.trace, events: late.events }],
    });
    expect(res.status, res.text).toBe(202);
    // …then two trees' worth of this tenant's, with ids that sort first
    const early: string[] = [];
    for (let batch = 0; batch < 8; batch++) {
      const items = Array.from({ length: 10 }, () => {
        const run = finishedRun();
        const id = `00${run.trace.id.slice(2)}`;
        run.trace.id = id;
        for (const event of run.events) event.traceId = id;
        early.push(id);
        return run;
      });
      res = await postBatch(server.url, agent.apiKey, { batchId: newId(), items });
      expect(res.status, res.text).toBe(202);
    }
    await fingerprinted([lastId, ...early]);
    const [newest] = await server.store.anchors.batches(1);
    await anchorer.pass(); // 81 waiting, 40 a tree: one tree gathered
    const [tree] = await server.store.anchors.batches(1);
    expect(tree?.id).toBeGreaterThan(newest?.id ?? 0);
    const [leaf] = await server.store.sql.query<{ batch_id: number; leaf_index: number }>(
      'SELECT batch_id, leaf_index FROM anchor_leaves WHERE trace_id = $1',
      [lastId],
    );
    expect(leaf).toMatchObject({ batch_id: tree?.id, leaf_index: 0 });
    await anchorAll([lastId, ...early]);
  });

  it('retries with backoff while the RPC fails, without touching ingest, and anchors once', async () => {
    const before = (await memoLandings()).length;
    await rpc.failNext('getLatestBlockhash', 3);
    await rpc.failNext('sendTransaction', 2);
    const ids = await postFinishedRuns(10);
    await fingerprinted(ids);
    await sleep(120); // past ANCHOR_INTERVAL_MS: the ten are gathered as one tree
    await anchorer.pass();
    // ingest is not held by a failing chain
    const started = performance.now();
    const more = await postFinishedRuns(1);
    expect(performance.now() - started).toBeLessThan(5_000);
    await anchorAll([...ids, ...more]);
    const [latest, previous] = await server.store.anchors.batches(2);
    expect(latest?.state).toBe('anchored');
    expect(previous?.state).toBe('anchored');
    // three signing failures and a send refused, each counted (a refused resend of a
    // transaction under way is not a failure of the batch: it is looked up again)
    expect((previous?.attempts ?? 0) + (latest?.attempts ?? 0)).toBeGreaterThanOrEqual(4);
    expect((await memoLandings()).length - before).toBe(2);
  });

  it('sends again a transaction lost on its way, and signs anew only once it expired', async () => {
    const ids = await postFinishedRuns(3);
    const before = (await memoLandings()).length;
    // lost once: the resend (same signature) lands it
    await rpc.loseSends(1);
    await anchorAll(ids);
    expect((await memoLandings()).length - before).toBe(1);
    const [lostOnce] = await server.store.anchors.batches(1);
    expect(lostOnce?.state).toBe('anchored');

    // lost every time until its blockhash expired: signed anew, lands once
    const later = await postFinishedRuns(3);
    await fingerprinted(later);
    await rpc.loseSends(1_000);
    await sleep(120);
    for (let i = 0; i < 5; i++) await anchorer.pass();
    const [pending] = await server.store.anchors.batches(1);
    expect(pending?.state).toBe('signed');
    const firstSignature = pending?.signature;
    await rpc.loseSends(0); // the cluster takes what it is sent again…
    await rpc.advance(200); // …but the first transaction's blockhash is past its last valid height
    await anchorAll(later);
    const [resigned] = await server.store.anchors.batches(1);
    expect(resigned?.state).toBe('anchored');
    expect(resigned?.signature).not.toBe(firstSignature);
    expect(resigned?.lastError).toBeNull();
    expect((await rpc.landed()).some((t) => t.signature === firstSignature)).toBe(false);
    expect((await memoLandings()).length - before).toBe(2);
  });

  it('anchors a run again when it changed after it was anchored, keeping the old tree', async () => {
    const { trace, events } = finishedRun();
    let res = await postBatch(server.url, agent.apiKey, {
      batchId: newId(),
      items: [{ trace, events }],
    });
    expect(res.status).toBe(202);
    await anchorAll([trace.id]);
    const [first] = await server.store.sql.query<{ trace_hash: string; anchor_signature: string }>(
      'SELECT trace_hash, anchor_signature FROM traces WHERE id = $1',
      [trace.id],
    );
    // the same snapshot again (a client resending its final batch): fingerprinted again, unchanged,
    // and the proof stays
    res = await postBatch(server.url, agent.apiKey, {
      batchId: newId(),
      items: [{ trace, events }],
    });
    expect(res.status).toBe(202);
    await waitFor(
      async () => {
        const due = await server.store.sql.query(
          'SELECT 1 FROM fingerprint_due WHERE trace_id = $1',
          [trace.id],
        );
        return due.length === 0 ? true : undefined;
      },
      'the resent run fingerprinted again',
      30_000,
    );
    const [kept] = await server.store.sql.query<{ anchor_signature: string | null }>(
      'SELECT anchor_signature FROM traces WHERE id = $1',
      [trace.id],
    );
    expect(kept?.anchor_signature).toBe(first?.anchor_signature);
    // a later snapshot with a third event: a new fingerprint, anchored in a tree of its own
    res = await postBatch(server.url, agent.apiKey, {
      batchId: newId(),
      items: [{ trace: { ...trace, eventCount: 3 }, events: [llmCallEvent(trace.id, 2)] }],
    });
    expect(res.status).toBe(202);
    const changed = await waitFor(
      async () => {
        const [row] = await server.store.sql.query<{
          trace_hash: string;
          anchor_signature: string | null;
        }>('SELECT trace_hash, anchor_signature FROM traces WHERE id = $1', [trace.id]);
        return row && row.trace_hash !== first?.trace_hash ? row : undefined;
      },
      'the run fingerprinted again',
      30_000,
    );
    // the old proof does not stand for the new data
    expect(changed.anchor_signature).toBeNull();
    await anchorAll([trace.id]);
    const leaves = await server.store.sql.query<{ trace_hash: string }>(
      'SELECT trace_hash FROM anchor_leaves WHERE trace_id = $1 ORDER BY batch_id',
      [trace.id],
    );
    expect(leaves.map((l) => l.trace_hash)).toEqual([first?.trace_hash, changed.trace_hash]);
    const run = (await exportRuns()).find((r) => r.trace.id === trace.id) as Run;
    expect(run.trace.anchorSignature).not.toBe(first?.anchor_signature);
    expect((await verdictOf(run)).kind).toBe('anchored');
  });

  it('two instances anchoring one store put each tree on chain once', async () => {
    const second = anchorerFromConfig(server.config.anchoring, server.store, {
      logger: silentLogger,
      metrics: server.metrics,
    }) as Anchorer;
    const before = (await memoLandings()).length;
    const ids = await postFinishedRuns(60);
    await fingerprinted(ids);
    anchorer.start();
    second.start();
    await waitFor(
      async () =>
        (await countWhere(ids, 'anchor_signature IS NOT NULL')) === 60 ? true : undefined,
      'every run anchored by one of two instances',
      30_000,
    );
    await Promise.all([anchorer.stop(), second.stop()]);
    const landed = (await memoLandings()).slice(before);
    const leaves = await server.store.sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM anchor_leaves WHERE trace_id = ANY($1::text[])`,
      [ids],
    );
    expect(leaves[0]?.n).toBe(60);
    const batches = await server.store.anchors.batches(landed.length);
    expect(batches.every((b) => b.state === 'anchored')).toBe(true);
    expect(new Set(landed.map((t) => t.signature)).size).toBe(landed.length);
    expect(batches.reduce((n, b) => n + b.size, 0)).toBe(60);
  });
  /**
   * `count` new runs gathered into a tree whose transaction is signed and sent, but lost (the
   * cluster keeps losing what it is sent until the test says otherwise), by a fresh anchorer.
   */
  const treeSignedAndLost = async (count: number) => {
    // (the two-instance test stopped the first anchorer)
    anchorer = anchorerFromConfig(server.config.anchoring, server.store, {
      logger: silentLogger,
      metrics: server.metrics,
    }) as Anchorer;
    const ids = await postFinishedRuns(count);
    await fingerprinted(ids);
    await rpc.loseSends(1_000);
    await sleep(120); // past ANCHOR_INTERVAL_MS
    for (let i = 0; i < 3; i++) await anchorer.pass();
    const [signed] = await server.store.anchors.batches(1);
    expect(signed).toMatchObject({ state: 'signed', size: count });
    return { ids, signed };
  };

  it('takes over trees another cluster left when ANCHOR_CLUSTER changes, anchoring their runs anew', async () => {
    const { ids, signed: stranded } = await treeSignedAndLost(4);
    expect(stranded).toMatchObject({ cluster: 'devnet', size: 4 });
    await rpc.loseSends(0);
    // another cluster, another blockhash (here one validator plays both)
    await rpc.advance(1);
    const mainnet = anchorerFromConfig(
      { ...server.config.anchoring, cluster: 'mainnet' },
      server.store,
      { logger: silentLogger, metrics: server.metrics },
    ) as Anchorer;
    for (let i = 0; i < 100 && (await countWhere(ids, 'anchor_signature IS NOT NULL')) < 4; i++) {
      await mainnet.pass();
      await sleep(10);
    }
    const [taken] = await server.store.anchors.batches(1);
    expect(taken).toMatchObject({ state: 'anchored', cluster: 'mainnet', size: 4 });
    expect((await server.store.anchors.batches()).map((b) => b.id)).not.toContain(stranded?.id);
    expect((await rpc.landed()).some((t) => t.signature === stranded?.signature)).toBe(false);
  });

  it('never signs a tree anew when its RPC cannot say whether the old transaction landed', async () => {
    const before = (await memoLandings()).length;
    const { signed } = await treeSignedAndLost(3);
    // a node that keeps no history, long after the blockhash expired
    await rpc.loseHistory();
    await rpc.advance(200);
    for (let i = 0; i < 5; i++) {
      await anchorer.pass();
      await sleep(30);
    }
    const [held] = await server.store.anchors.batches(1);
    expect(held).toMatchObject({ id: signed?.id, state: 'signed', signature: signed?.signature });
    expect(held?.lastError).toMatch(/history starts at slot \d+, after the transaction was signed/);
    expect((await memoLandings()).length).toBe(before);
    await rpc.loseSends(0);
  });
});
