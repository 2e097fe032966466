import type { LabelledRun } from './labelled-run.js';
import { runOf, signature } from './run-builder.js';

/** One step of each event type fails on its own; the run fails with it. */
export const DIRECT_FAILURES: LabelledRun[] = [
  {
    id: 'tool-call-fails',
    shape: 'direct failure',
    why: 'db.query failed because the orders table does not exist',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Summarise yesterday’s orders',
        error: 'Tool db.query failed',
      });
      r.llm('gpt-4o-mini', { prompt: 'Plan the report' });
      r.tool(
        'db.query',
        { sql: 'SELECT count(*) FROM orders' },
        {
          error: 'relation "orders" does not exist',
        },
      );
      return r.done();
    },
    mustContain: ['failed', 'db.query', 'relation "orders" does not exist'],
    mustNotContain: ['loop', 'succeeded'],
  },
  {
    id: 'llm-call-fails',
    shape: 'direct failure',
    why: 'the gpt-4o call hit the tokens-per-minute rate limit',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Draft the weekly treasury memo',
        error: 'RateLimitError',
      });
      r.tool('notion.search', { q: 'treasury' });
      r.llm('gpt-4o', {
        error: '429 Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM)',
      });
      return r.done();
    },
    mustContain: ['gpt-4o', '429 Rate limit reached'],
    mustNotContain: ['notion.search', 'loop'],
  },
  {
    id: 'chain-tx-fails',
    shape: 'direct failure',
    why: 'the transfer transaction failed: the payer has too few lamports',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Pay 2 SOL to the contractor',
        error: 'transfer failed',
      });
      r.llm('gpt-4o-mini');
      r.tx('transfer', '2000000000', {
        signature: signature('4kTransferFail'),
        error: 'Transfer: insufficient lamports 1203000, need 2000005000',
      });
      return r.done();
    },
    mustContain: ['transfer', 'insufficient lamports', '4kTransfe'],
    mustNotContain: ['loop', 'succeeded'],
  },
  {
    id: 'chain-tx-confirmation-failed',
    shape: 'direct failure',
    why: 'the stake transaction was sent but its confirmation failed (status ok, no message)',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Delegate 10 SOL to the validator',
        error: 'Delegation not confirmed',
      });
      r.tool('validators.pick', { apy: 'max' });
      r.tx('delegateStake', '10000000000', {
        signature: signature('3DelegStake'),
        confirmation: 'failed',
        programId: 'Stake11111111111111111111111111111111111111',
      });
      return r.done();
    },
    mustContain: ['delegateStake', 'confirmation: failed', '3DelegSt'],
    mustNotContain: ['validators.pick', 'no step failed'],
  },
  {
    id: 'x402-payment-fails',
    shape: 'direct failure',
    why: 'the x402 payment was rejected by the facilitator for an insufficient USDC balance',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Buy the SOL/USDC price feed',
        error: 'Payment required',
      });
      r.llm('gpt-4o-mini');
      r.pay('https://oracle.example/v1/price/SOL-USDC', '0.001', {
        error: 'facilitator rejected payment: insufficient USDC balance',
        settled: false,
      });
      return r.done();
    },
    mustContain: [
      'https://oracle.example/v1/price/SOL-USDC',
      'insufficient USDC balance',
      'not settled',
    ],
    mustNotContain: ['loop', 'succeeded'],
  },
  {
    id: 'x402-payment-unsettled',
    shape: 'direct failure',
    why: 'the payment step reported ok but was never settled, so the resource answered 402',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Fetch the premium research note',
        error: 'Resource answered 402 after payment',
      });
      r.pay('https://research.example/notes/42', '0.25', { settled: false });
      r.tool('http.get', { url: 'https://research.example/notes/42' });
      return r.done();
    },
    mustContain: ['https://research.example/notes/42', 'not settled', '0.25 USDC'],
    mustNotContain: ['no step failed', 'http.get'],
  },
  {
    id: 'mcp-call-fails',
    shape: 'direct failure',
    why: 'the GitHub MCP server refused to create the issue (403)',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'File a bug for the failing deploy',
        error: 'MCP error',
      });
      r.llm('claude-sonnet-4');
      r.mcp(
        'github',
        'create_issue',
        { repo: 'acme/api', title: 'Deploy fails' },
        {
          error: '403 Resource not accessible by integration',
        },
      );
      return r.done();
    },
    mustContain: ['github/create_issue', '403 Resource not accessible by integration'],
    mustNotContain: ['loop', 'claude-sonnet-4'],
  },
  {
    id: 'custom-guard-fails',
    shape: 'direct failure',
    why: 'the spend guardrail stopped the run: the daily limit was exceeded',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Rebalance the portfolio',
        error: 'Guardrail stopped the run',
      });
      r.tool('portfolio.read', { account: 'main' });
      r.llm('gpt-4o');
      r.custom(
        'guardrail.spend',
        { limitSol: 0.5 },
        {
          error: 'daily spend limit of 0.5 SOL would be exceeded (planned 1.2 SOL)',
        },
      );
      return r.done();
    },
    mustContain: ['guardrail.spend', 'daily spend limit'],
    mustNotContain: ['portfolio.read'],
  },
  {
    id: 'run-error-without-failed-step',
    shape: 'direct failure',
    why: 'every step succeeded; the agent rejected its own output (schema validation)',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Extract the invoice fields',
        error: "Output failed schema validation: missing field 'amount'",
      });
      r.tool('pdf.text', { file: 'inv-0042.pdf' });
      r.llm('gpt-4o-mini');
      return r.done();
    },
    mustContain: ['no step failed', "missing field 'amount'"],
    mustNotContain: ['pdf.text failed', 'loop'],
  },
  {
    id: 'run-error-without-message',
    shape: 'direct failure',
    why: 'the run errored with no failed step and no message: nothing to go on but that',
    run: () => {
      const r = runOf({ status: 'errored', input: 'Sync the CRM' });
      r.tool('crm.pull', { since: '2026-10-31' });
      return r.done();
    },
    mustContain: ['failed', 'no step failed', 'no error message'],
    mustNotContain: ['crm.pull failed'],
  },
  {
    id: 'late-cascade-after-first-failure',
    shape: 'direct failure',
    why: 'the price fetch failed first; the later swap and report failures followed from it',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Swap when SOL is under 150',
        error: 'Swap aborted',
      });
      r.tool('price.get', { pair: 'SOL/USDC' }, { error: 'upstream 502 Bad Gateway' });
      r.llm('gpt-4o-mini');
      r.tool('swap.plan', { pair: 'SOL/USDC' }, { error: 'no price available' });
      r.tool('report.send', { to: 'ops' }, { error: 'nothing to report' });
      return r.done();
    },
    mustContain: ['price.get', 'upstream 502 Bad Gateway'],
    mustNotContain: ['nothing to report', 'loop'],
  },
];
