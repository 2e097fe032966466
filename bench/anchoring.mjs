// Anchoring benchmark (issue 25, part 3): ingest throughput with anchoring on against off, in
// the same run. Two `flightlog serve` processes (the built server) on the same engine, each with
// a store of its own and the analysis worker on (which fingerprints finished runs): `off` without
// ANCHOR_KEYPAIR, `on` anchoring every finished run on a local Solana validator (LiteSVM, with the
// Memo program, in a process of its own: packages/test-support/src/litesvm-validator.mjs) with
// ANCHOR_INTERVAL_MS=1000. Every batch carries BENCH_RUNS_PER_BATCH (10) finished runs of two
// llm_call events, so the `on` server gathers, signs and records trees throughout its load.
//
// Per engine, a pair not counted (the first server of a run starts cold), then BENCH_ROUNDS (5)
// rounds, the two sides in alternating order. Each side is measured
// alone: a fresh server on a fresh store (another server's background analysis, or an earlier
// round's backlog, would otherwise weigh on it — two servers side by side differed by 2x either
// way), BENCH_WARMUP_SECONDS (3) of load (so the analysis grace has passed and trees are being
// anchored), then a closed loop of BENCH_CONNECTIONS (8) senders for BENCH_SECONDS (5):
// batches/s accepted (202). The figure is the median of the per-round ratios on / off (target
// ≥ 0.95, that is within 5 %); the runs the `on` server anchored during the measured load (its
// flightlog_anchored_runs_total) show anchoring really ran.
// Writes bench/results/anchoring-latest.json. A benchmark, not a test: nothing is asserted.
//
// Env: BENCH_SECONDS (5), BENCH_ROUNDS (5), BENCH_WARMUP_SECONDS (3), BENCH_CONNECTIONS (8), BENCH_RUNS_PER_BATCH (10),
//      BENCH_ENGINES (pglite,postgres), BENCH_DATABASE_URL, BENCH_TIMEOUT_SECONDS (600).

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { getBase58Decoder } from '@solana/kit';
import pg from 'pg';
import { monotonicFactory } from 'ulidx';
import { post } from './load.mjs';
import {
  createItemFactory,
  createLifecycle,
  envList,
  envNumber,
  machineInfo,
  median,
  redactUrl,
  request,
  runBenchmark,
  spawnCli,
  startFlightlogServer,
  textTable,
  writeJsonAtomic,
} from './support.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLI = join(ROOT, 'packages/server/dist/cli.js');
const VALIDATOR = join(ROOT, 'packages/test-support/src/litesvm-validator.mjs');
const SECONDS = envNumber('BENCH_SECONDS', 5, 1, 600);
const ROUNDS = envNumber('BENCH_ROUNDS', 5, 1, 20);
const WARMUP_SECONDS = envNumber('BENCH_WARMUP_SECONDS', 3, 0, 60);
const CONNECTIONS = envNumber('BENCH_CONNECTIONS', 8, 1, 256);
const RUNS_PER_BATCH = envNumber('BENCH_RUNS_PER_BATCH', 10, 1, 100);
const ENGINES = /** @type {('pglite' | 'postgres')[]} */ (
  envList('BENCH_ENGINES', 'pglite,postgres', ['pglite', 'postgres'])
);
const DATABASE_URL =
  process.env.BENCH_DATABASE_URL?.trim() || 'postgres://postgres@127.0.0.1:5432/test';
const TARGET_RATIO = 0.95;

const lifecycle = createLifecycle({
  timeoutSeconds: envNumber('BENCH_TIMEOUT_SECONDS', 600, 30, 7_200),
});
const ulid = monotonicFactory();
const makeItem = createItemFactory({ ulid, eventsPerBatch: 2 });

/** A Solana keypair as solana-keygen writes it (secret, then public key), and its address. */
function anchoringKeypair() {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const secret = Buffer.from(privateKey.export({ format: 'jwk' }).d ?? '', 'base64url');
  const pub = Buffer.from(publicKey.export({ format: 'jwk' }).x ?? '', 'base64url');
  return { bytes: [...secret, ...pub], address: getBase58Decoder().decode(pub) };
}

/** @param {string} url @param {string} method @param {unknown[]} params */
async function rpc(url, method, params) {
  const { status, text } = await request('POST', url, {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  if (status !== 200) throw new Error(`${method}: HTTP ${status}`);
  return JSON.parse(text);
}

/** @param {string} base */
async function anchoredRuns(base) {
  const { text } = await request('GET', `${base}/metrics`);
  return Number(/^flightlog_anchored_runs_total (\d+)/m.exec(text)?.[1] ?? 0);
}

/**
 * A closed loop of CONNECTIONS senders for `seconds`: batches accepted per second.
 * @param {string} base @param {string} apiKey @param {string} agentId @param {number} seconds
 */
async function load(base, apiKey, agentId, seconds) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` };
  const end = performance.now() + seconds * 1000;
  let accepted = 0;
  let refused = 0;
  const sender = async () => {
    while (performance.now() < end) {
      const items = Array.from({ length: RUNS_PER_BATCH }, () => {
        const item = makeItem(agentId);
        item.trace.status = 'completed';
        item.trace.endedAt = new Date().toISOString();
        item.trace.durationMs = 2_000;
        return item;
      });
      const body = Buffer.from(JSON.stringify({ batchId: ulid(), items }));
      const result = await post(`${base}/v1/traces/batch`, body, headers, agent);
      if (result.status === 202) accepted++;
      else refused++;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: CONNECTIONS }, sender));
  const elapsed = (performance.now() - started) / 1000;
  agent.destroy();
  return { batchesPerSecond: accepted / elapsed, refused };
}

/**
 * One side measured alone: a fresh server on a fresh store (so no other server's background
 * work, and no backlog of an earlier round, runs meanwhile), a warm-up, then the load.
 * @param {'pglite' | 'postgres'} engine @param {'off' | 'on'} side @param {string} validatorUrl
 */
async function measureSide(engine, side, validatorUrl) {
  const mark = lifecycle.mark();
  /** @type {Record<string, string>} */
  let storeEnv;
  if (engine === 'pglite') {
    const dir = mkdtempSync(join(tmpdir(), `flightlog-bench-anchor-${side}-`));
    lifecycle.onCleanup(() => rmSync(dir, { recursive: true, force: true }));
    storeEnv = { DATA_DIR: dir };
  } else {
    const schema = `bench_anchor_${side}_${randomBytes(4).toString('hex')}`;
    lifecycle.onCleanup(async () => {
      const db = new pg.Client({ connectionString: DATABASE_URL });
      await db.connect();
      await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
      await db.end();
    });
    storeEnv = { DATABASE_URL, DATABASE_SCHEMA: schema };
  }
  /** @type {Record<string, string>} */
  let anchorEnv = {};
  if (side === 'on') {
    const key = anchoringKeypair();
    await rpc(validatorUrl, 'test_airdrop', [key.address, String(1_000_000_000_000n)]);
    anchorEnv = {
      ANCHOR_KEYPAIR: JSON.stringify(key.bytes),
      ANCHOR_CLUSTER: 'devnet',
      ANCHOR_RPC_URL: validatorUrl,
      ANCHOR_INTERVAL_MS: '1000',
    };
  }
  const server = await startFlightlogServer(lifecycle, {
    cli: CLI,
    tag: `${engine} ${side}`,
    env: { ...storeEnv, ...anchorEnv },
  });
  const { status, text } = await request('POST', `${server.base}/admin/v1/agents`, {
    headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'bench' }),
  });
  if (status !== 201) throw new Error(`agent create on ${side}: ${status} ${text}`);
  const agent = /** @type {{ apiKey: string, agentId: string }} */ (JSON.parse(text));
  await load(server.base, agent.apiKey, agent.agentId, WARMUP_SECONDS);
  const anchoredBefore = await anchoredRuns(server.base);
  const result = await load(server.base, agent.apiKey, agent.agentId, SECONDS);
  const anchored = (await anchoredRuns(server.base)) - anchoredBefore;
  if (result.refused > 0) console.log(`    !!! ${engine} ${side}: ${result.refused} refused`);
  await lifecycle.runCleanupsFrom(mark);
  return { batchesPerSecond: result.batchesPerSecond, anchored };
}

/** @param {'pglite' | 'postgres'} engine @param {string} validatorUrl */
async function benchEngine(engine, validatorUrl) {
  // a pair not counted first: the first server of a run starts cold (it was 2x slower)
  for (const side of /** @type {const} */ (['off', 'on']))
    await measureSide(engine, side, validatorUrl);
  /** @type {{ off: number, on: number, ratio: number, anchored: number }[]} */
  const rounds = [];
  for (let round = 0; round < ROUNDS; round++) {
    /** @type {('off' | 'on')[]} */
    const order = round % 2 === 0 ? ['off', 'on'] : ['on', 'off'];
    const rate = { off: 0, on: 0 };
    let anchored = 0;
    for (const side of order) {
      const measured = await measureSide(engine, side, validatorUrl);
      rate[side] = measured.batchesPerSecond;
      if (side === 'on') anchored = measured.anchored;
    }
    rounds.push({ ...rate, ratio: rate.on / rate.off, anchored });
    console.log(
      `  ${engine} round ${round + 1}: off ${rate.off.toFixed(0)}/s, on ${rate.on.toFixed(0)}/s ` +
        `(${anchored} runs anchored during the load)`,
    );
  }
  const landed = (await rpc(validatorUrl, 'test_landed', [])).result.length;
  return {
    engine,
    rounds,
    ratio: median(rounds.map((r) => r.ratio)) ?? 0,
    offBatchesPerSecond: median(rounds.map((r) => r.off)) ?? 0,
    onBatchesPerSecond: median(rounds.map((r) => r.on)) ?? 0,
    runsAnchoredDuringLoad: median(rounds.map((r) => r.anchored)) ?? 0,
    memoTransactions: landed,
  };
}

await runBenchmark(lifecycle, async () => {
  console.log(
    `anchoring benchmark: ${ENGINES.join(', ')}; ${ROUNDS} rounds of ${SECONDS} s, ` +
      `${CONNECTIONS} senders, ${RUNS_PER_BATCH} finished runs a batch (${redactUrl(DATABASE_URL)})`,
  );
  const validator = spawnCli(lifecycle, { cli: VALIDATOR, tag: 'validator', stdin: 'pipe' });
  const [, validatorUrl] = await validator.waitFor(/"url":"([^"]+)"/, 30_000);
  const results = [];
  for (const engine of ENGINES) results.push(await benchEngine(engine, String(validatorUrl)));
  console.log(
    `\n${textTable([
      ['engine', 'off (batches/s)', 'on (batches/s)', 'on / off', 'target', 'met', 'runs anchored'],
      ...results.map((r) => [
        r.engine,
        r.offBatchesPerSecond.toFixed(0),
        r.onBatchesPerSecond.toFixed(0),
        r.ratio.toFixed(3),
        `≥ ${TARGET_RATIO}`,
        r.ratio >= TARGET_RATIO ? 'yes' : 'NO',
        String(r.runsAnchoredDuringLoad),
      ]),
    ])}`,
  );
  writeJsonAtomic(join(ROOT, 'bench/results/anchoring-latest.json'), {
    benchmark: 'anchoring',
    at: new Date().toISOString(),
    machine: machineInfo(ROOT),
    settings: {
      seconds: SECONDS,
      rounds: ROUNDS,
      connections: CONNECTIONS,
      runsPerBatch: RUNS_PER_BATCH,
    },
    targetRatio: TARGET_RATIO,
    results,
  });
});
