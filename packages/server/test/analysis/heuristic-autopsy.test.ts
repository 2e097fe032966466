import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import type { AnalysisWorker } from '../../src/analysis/analysis-worker.js';
import { HeuristicAnalyzer } from '../../src/analysis/heuristic-analyzer.js';
import { getAnalysis, startTestWorker } from '../harness/analysis.js';
import { describeEngines } from '../harness/engines.js';
import { postBatch } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { waitFor } from '../harness/wait.js';
import {
  ATA_SIGNATURE,
  SECRETS,
  SWAP_SIGNATURE,
  X402_SIGNATURE,
  encrypted,
  erroredSwap,
  newMasterKey,
  runBody,
  secretRun,
  toolLoop,
  type Run,
} from '../fixtures/runs.js';

describeEngines('heuristic autopsy of realistic runs [%s]', (engine) => {
  let server: TestServer;
  let agent: TestAgent;
  let token: string;
  let worker: AnalysisWorker | undefined;
  beforeAll(async () => {
    server = await startTestServer(engine);
    agent = await server.createAgent();
    token = await server.userToken('ana', agent.agentId);
  });
  afterEach(async () => {
    await worker?.stop(5_000);
    worker = undefined;
  });
  afterAll(() => server.close());

  /** Stores a finished run, lets a worker analyse it, returns the autopsy as the API serves it. */
  async function autopsyOf(run: Run, masterKey?: Buffer): Promise<string> {
    worker = startTestWorker(server.store, { analyzer: new HeuristicAnalyzer(masterKey) });
    expect((await postBatch(server.url, agent.apiKey, runBody(run))).status).toBe(202);
    const done = await waitFor(async () => {
      const res = await getAnalysis(server.url, token, run.trace.id);
      return res.body?.status === 'done' ? res.body : undefined;
    }, 'the autopsy');
    expect(done.analyzer).toBe('heuristic');
    return done.autopsy as string;
  }

  it('an errored swap: verdict, cause, the failed transaction and the chain that led to it, spend, payments', async () => {
    const autopsy = await autopsyOf(erroredSwap());
    expect(autopsy).toMatch(/^## Verdict: failed, 1 failed step/);
    // what it was asked and what it produced
    expect(autopsy).toContain('> Swap 1 SOL for USDC on Jupiter, slippage under 0.5 %');
    expect(autopsy).toContain('> No swap: the route moved past the 0.5 % slippage limit');
    expect(autopsy).toContain(
      '**Error:** Swap failed: Transaction simulation failed: slippage tolerance exceeded',
    );
    // the likely cause, on top: the failed chain transaction, its confirmation, error, signature
    expect(autopsy).toContain(
      '**Likely cause:** #5 `chain_tx route` failed (confirmation: failed): ' +
        'Transaction simulation failed: slippage tolerance exceeded (0x1771); ' +
        'signature `5VfYmGBjvQKe…RoBz`.',
    );
    // the failure and the parents that led there through parentEventId (ended before it
    // started: they led there, they did not handle it), nearest first
    expect(autopsy).toContain(
      '### Failure chain\n\n#5 `chain_tx route` (failed, 2.4 s): Transaction simulation failed',
    );
    expect(autopsy).toContain(
      'Led there by its parent steps: #1 `tool_call jupiter.quote` ← #0 `llm_call gpt-4o-mini`.',
    );
    // one model call was almost all of the model cost
    expect(autopsy).toContain(
      '### Dominant steps\n\n#3 `llm_call gpt-4o` was 96 % of the model cost ($0.00329 of $0.00341).',
    );
    // slowest step first
    expect(autopsy).toMatch(
      /### Slowest steps\n\n1\. #5 `chain_tx route`: 2\.4 s, 27 % of the run/,
    );
    // tokens, model cost with its largest contributor, lamports with theirs
    expect(autopsy).toContain('**Tokens:** 1,400 over 2 model calls (1,100 in, 300 out)');
    expect(autopsy).toContain(
      '**Model cost:** $0.00341; largest: #3 `llm_call gpt-4o` $0.00329 (96 %, 900 tokens)',
    );
    expect(autopsy).toContain('**Lamports:** 1,002,039,280 (1.00203928 SOL), plus 10,000 in fees');
    expect(autopsy).toContain('1,000,000,000 of them in failed transactions');
    expect(autopsy).toContain('largest: #5 `chain_tx route` 1,000,000,000 lamports (>99 %)');
    // every chain transaction with its outcome and signature
    expect(autopsy).toContain(
      `| #4 | \`createAssociatedTokenAccount\` | 2,039,280 | finalized | ok | \`${ATA_SIGNATURE}\` |`,
    );
    expect(autopsy).toContain(
      `| #5 | \`route\` | 1,000,000,000 | failed | failed: Transaction simulation failed: slippage tolerance exceeded (0x1771) | \`${SWAP_SIGNATURE}\` |`,
    );
    // the x402 payment with its settlement
    expect(autopsy).toContain(
      `| #2 | \`https://oracle.example/v1/price/SOL-USDC\` | 0.001 USDC | yes | ok | \`${X402_SIGNATURE}\` |`,
    );
    expect(autopsy).not.toContain('Encrypted payloads');
  });

  it('a tool loop: the repeated call with its input, the retry that recovered, the guardrail', async () => {
    const autopsy = await autopsyOf(toolLoop());
    expect(autopsy).toMatch(/^## Verdict: failed, 2 failed steps/);
    expect(autopsy).toContain(
      '**Likely cause:** stuck in a loop: `dex.getPrice` was called 6 times in a row with the ' +
        'same input `{"pair":"USDC/BONK"}` and the same answer, from #1 to #11.',
    );
    expect(autopsy).toContain(
      '### Loops\n\n- `dex.getPrice` called 6 times in a row with the same input ' +
        '`{"pair":"USDC/BONK"}` and the same answer (steps #1, #3, #5, #7, #9, #11).',
    );
    // price.fallback failed twice and then worked: a retry that recovered, not a loop or a cause
    expect(autopsy).toContain(
      '### Retries\n\n- `tool_call price.fallback` needed 3 attempts (#13, #14, #15): ' +
        '2 failures (429 Too Many Requests) before the one that worked, 2.0 s, with a changed input.',
    );
    expect(autopsy).not.toMatch(/Loops[^#]*price\.fallback/);
    // a failing tool: calls, failures and the first error
    expect(autopsy).toContain('| `price.fallback` | 3 | 2 | 429 Too Many Requests |');
    expect(autopsy).toContain('| `dex.getPrice` | 6 | 0 | — |');
    expect(autopsy).toContain('Custom events: `guardrail`.');
    expect(autopsy).toContain('**Tokens:** 780 over 7 model calls');
  });

  it('an encrypted run without SERVICE_MASTER_KEY: says what it could not read, states what it can', async () => {
    const key = newMasterKey();
    const autopsy = await autopsyOf(encrypted(secretRun(), key));
    expect(autopsy).toContain(
      '5 of 5 encrypted payloads could not be read: the worker has no SERVICE_MASTER_KEY.',
    );
    expect(autopsy).toContain('The trace lists these tools: `vault.lookup`.');
    // still known: the verdict, the failing step (type, status, error), the trace's totals
    expect(autopsy).toMatch(/^## Verdict: failed, 1 failed step/);
    expect(autopsy).toContain('#4 `chain_tx (encrypted)` (failed, 300 ms): blockhash not found');
    expect(autopsy).toContain('**Tokens:** 300');
    expect(autopsy).toContain('**Model cost:** $0.0009');
    expect(autopsy).toContain('**Lamports:** 5,000,000,000 (5 SOL)');
    // nothing it could only have read from the payloads
    expect(autopsy).not.toContain('### Loops');
    expect(autopsy).not.toContain('### Retries');
    expect(autopsy).not.toContain(SWAP_SIGNATURE);
    for (const secret of SECRETS) expect(autopsy).not.toContain(secret);
  });

  it('an encrypted run with SERVICE_MASTER_KEY: decrypts for the analysis only, stores no plaintext', async () => {
    const key = newMasterKey();
    const run = encrypted(secretRun(), key);
    const autopsy = await autopsyOf(run, key);
    expect(autopsy).toContain(
      '5 of 5 encrypted payloads were decrypted for this analysis only; their contents',
    );
    // facts that only the payloads hold: the loop (found by comparing decrypted inputs), the
    // model and its cost, the failed transfer with its confirmation and signature
    expect(autopsy).toContain(
      '- `vault.lookup` called 3 times in a row with the same input and the same answer ' +
        '(steps #1, #2, #3).',
    );
    expect(autopsy).toContain('largest: #0 `llm_call gpt-4o` $0.0009');
    expect(autopsy).toContain(
      `| #4 | \`transfer\` | 5,000,000,000 | failed | failed: blockhash not found | \`${SWAP_SIGNATURE}\` |`,
    );
    // the decrypted contents are quoted nowhere: not in the autopsy, not in any stored row
    for (const secret of SECRETS) expect(autopsy).not.toContain(secret);
    const rows = await server.store.sql.query<{ row: string }>(
      'SELECT row_to_json(j)::text AS row FROM analysis_jobs j WHERE trace_id = $1',
      [run.trace.id],
    );
    expect(rows).toHaveLength(1);
    for (const secret of SECRETS) expect(rows[0]!.row).not.toContain(secret);
    // the events keep the envelopes as sent
    const events = await server.store.sql.query<{ payload: Record<string, unknown> }>(
      'SELECT payload FROM events WHERE trace_id = $1 ORDER BY sequence',
      [run.trace.id],
    );
    expect(events.map((e) => e.payload)).toEqual(run.events.map((e) => e.payload));
  });

  it('an encrypted run with a different key: says the key does not open them', async () => {
    const autopsy = await autopsyOf(encrypted(secretRun(), newMasterKey()), newMasterKey());
    expect(autopsy).toContain(
      "5 of 5 encrypted payloads could not be opened with the worker's SERVICE_MASTER_KEY " +
        '(authentication-failed: a different key?)',
    );
  });
});
