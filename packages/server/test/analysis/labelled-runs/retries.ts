import type { LabelledRun } from './labelled-run.js';
import { runOf, signature } from './run-builder.js';

/** A step fails and is tried again: it recovers (not a loop), or the agent gives up. */
export const RETRIES: LabelledRun[] = [
  {
    id: 'retry-recovered-tool',
    shape: 'retry recovered',
    why: 'jupiter.quote was rate limited twice and worked on the third attempt; the run succeeded',
    run: () => {
      const r = runOf({
        status: 'completed',
        input: 'Quote 1 SOL to USDC',
        output: '1 SOL = 148.21 USDC',
      });
      r.llm('gpt-4o-mini');
      const input = { inputMint: 'SOL', outputMint: 'USDC', amount: '1000000000' };
      r.tool('jupiter.quote', input, { error: '429 Too Many Requests', ms: 120 });
      r.tool('jupiter.quote', input, { error: '429 Too Many Requests', ms: 110, gapMs: 1_000 });
      r.tool('jupiter.quote', input, { ms: 300, gapMs: 2_000 });
      r.llm('gpt-4o-mini');
      return r.done();
    },
    mustContain: ['succeeded', 'jupiter.quote', '3 attempts', '429 Too Many Requests'],
    mustNotContain: ['loop', 'likely cause'],
  },
  {
    id: 'retry-recovered-llm',
    shape: 'retry recovered',
    why: 'the model was overloaded once; the second call worked',
    run: () => {
      const r = runOf({ status: 'completed', input: 'Classify the ticket', output: 'billing' });
      r.llm('claude-sonnet-4', { error: '529 Overloaded', ms: 4_000 });
      r.llm('claude-sonnet-4', { ms: 900, gapMs: 500 });
      return r.done();
    },
    mustContain: ['succeeded', 'claude-sonnet-4', '2 attempts', '529 Overloaded'],
    mustNotContain: ['loop', 'likely cause'],
  },
  {
    id: 'retry-recovered-chain-tx',
    shape: 'retry recovered',
    why: 'the transfer expired (blockhash not found) and went through when sent again',
    run: () => {
      const r = runOf({ status: 'completed', input: 'Pay the invoice', output: 'Paid 0.4 SOL' });
      r.tx('transfer', '400000000', {
        signature: signature('2aaExpired'),
        error: 'Blockhash not found',
      });
      r.tx('transfer', '400000000', { signature: signature('2bbLanded') });
      return r.done();
    },
    mustContain: ['succeeded', 'transfer', '2 attempts', 'Blockhash not found'],
    mustNotContain: ['loop', 'likely cause'],
  },
  {
    id: 'retry-recovered-then-other-failure',
    shape: 'retry recovered',
    why: 'the quote retry recovered; the run failed because the swap transaction ran out of compute',
    run: () => {
      const r = runOf({ status: 'errored', input: 'Swap 3 SOL for BONK', error: 'swap failed' });
      const input = { pair: 'SOL/BONK', amount: 3 };
      r.tool('dex.quote', input, { error: '429 Too Many Requests' });
      r.tool('dex.quote', input);
      r.tx('swap', '3000000000', {
        signature: signature('5xComputeOut'),
        error: 'Program failed to complete: exceeded CUs meter at BPF instruction',
      });
      return r.done();
    },
    mustContain: ['swap', 'exceeded CUs meter', '5xComput'],
    mustNotContain: ['loop', '429 Too Many Requests'],
  },
  {
    id: 'retry-recovered-wrapper',
    shape: 'retry recovered',
    why: 'the first plan attempt failed (its search timed out); the second attempt worked',
    run: () => {
      const r = runOf({ status: 'completed', input: 'Plan the trip', output: 'Itinerary ready' });
      r.wrap(
        'tool_call',
        { name: 'plan', input: { city: 'Lisbon' } },
        { error: 'search timed out' },
        () => {
          r.tool('search', { q: 'Lisbon hotels' }, { error: 'search timed out', ms: 5_000 });
        },
      );
      r.wrap('tool_call', { name: 'plan', input: { city: 'Lisbon' } }, {}, () => {
        r.tool('search', { q: 'Lisbon hotels' }, { ms: 700 });
      });
      return r.done();
    },
    mustContain: ['succeeded', 'plan', '2 attempts', 'search timed out'],
    mustNotContain: ['loop', 'likely cause'],
  },
  {
    id: 'retry-recovered-changed-input',
    shape: 'retry recovered',
    why: 'the priority-fee bump after two dropped transactions got the mint through',
    run: () => {
      const r = runOf({ status: 'completed', input: 'Mint the badge NFT', output: 'Minted' });
      for (const fee of [1_000, 5_000])
        r.tool('nft.mint', { priorityFee: fee }, { error: 'transaction dropped: fee too low' });
      r.tool('nft.mint', { priorityFee: 25_000 });
      return r.done();
    },
    mustContain: ['succeeded', 'nft.mint', '3 attempts', 'fee too low'],
    mustNotContain: ['loop', 'likely cause'],
  },
  {
    id: 'retry-gave-up-tool',
    shape: 'retry gave up',
    why: 'the weather API answered 503 three times and the agent gave up',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Should we fly the drone today?',
        error: 'weather unavailable',
      });
      r.llm('gpt-4o-mini');
      for (let i = 0; i < 3; i++)
        r.tool(
          'weather.get',
          { city: 'Porto' },
          { error: '503 Service Unavailable', gapMs: 1_000 * 2 ** i },
        );
      return r.done();
    },
    mustContain: ['weather.get', '3 attempts', '503 Service Unavailable'],
    mustNotContain: ['loop', 'recovered'],
  },
  {
    id: 'retry-gave-up-mcp',
    shape: 'retry gave up',
    why: 'the search MCP server timed out on all four attempts',
    run: () => {
      const r = runOf({ status: 'errored', input: 'Find the changelog', error: 'search failed' });
      for (let i = 0; i < 4; i++)
        r.mcp('brave', 'web_search', { q: 'acme changelog' }, { error: 'ETIMEDOUT', ms: 5_000 });
      return r.done();
    },
    mustContain: ['brave/web_search', '4 attempts', 'ETIMEDOUT'],
    mustNotContain: ['loop'],
  },
  {
    id: 'retry-gave-up-chain-tx',
    shape: 'retry gave up',
    why: 'every send of the transfer expired before landing (blockhash not found)',
    run: () => {
      const r = runOf({ status: 'errored', input: 'Sweep the hot wallet', error: 'sweep failed' });
      for (const tag of ['1aa', '1bb', '1cc'])
        r.tx('transfer', '700000000', {
          signature: signature(`${tag}Sweep`),
          error: 'Blockhash not found',
        });
      return r.done();
    },
    mustContain: ['transfer', '3 attempts', 'Blockhash not found'],
    mustNotContain: ['loop', 'recovered'],
  },
];
