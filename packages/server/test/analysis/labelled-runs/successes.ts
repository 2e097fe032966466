import type { LabelledRun } from './labelled-run.js';
import { runOf } from './run-builder.js';

/** Runs that succeeded: the verdict names a step that took most of the time or the cost. */
export const SUCCESSES: LabelledRun[] = [
  {
    id: 'dominant-time',
    shape: 'dominant step',
    why: 'it worked; the gpt-4o call took 70 % of the run',
    run: () => {
      const r = runOf({
        status: 'completed',
        input: 'Write the release summary',
        output: 'Summary posted',
        durationMs: 10_000,
      });
      r.tool('git.log', { since: 'v1.2.0' }, { ms: 800 });
      r.tool('issues.list', { milestone: '1.3' }, { ms: 900 });
      r.llm('gpt-4o', { ms: 7_000, tokens: [3_000, 800], costUsd: 0.0155 });
      r.tool('slack.post', { channel: '#releases' }, { ms: 400 });
      return r.done();
    },
    mustContain: ['succeeded', 'gpt-4o', '70 %', 'time'],
    mustNotContain: ['failed', 'loop'],
  },
  {
    id: 'dominant-cost',
    shape: 'dominant step',
    why: 'it worked; one o1 call was 93 % of the model cost',
    run: () => {
      const r = runOf({
        status: 'completed',
        input: 'Prove the invariant holds',
        output: 'Proof attached',
      });
      r.llm('gpt-4o-mini', { ms: 1_200, costUsd: 0.01 });
      r.llm('o1', { ms: 1_400, costUsd: 0.42, tokens: [4_000, 20_000] });
      r.llm('gpt-4o-mini', { ms: 1_300, costUsd: 0.02 });
      r.tool('docs.write', { file: 'proof.md' }, { ms: 1_000 });
      return r.done();
    },
    mustContain: ['succeeded', 'o1', '93 %', 'cost'],
    mustNotContain: ['failed', 'loop'],
  },
  {
    id: 'dominant-nested-leaf',
    shape: 'dominant step',
    why: 'vector.search inside the agent.run wrapper took 80 % of the run; the wrapper itself did little',
    run: () => {
      const r = runOf({ status: 'completed', input: 'Answer from the wiki', output: 'Answered' });
      r.wrap('tool_call', { name: 'agent.run', input: {} }, {}, () => {
        r.llm('gpt-4o-mini', { ms: 500 });
        r.tool('vector.search', { q: 'vacation policy', k: 8 }, { ms: 8_300 });
        r.llm('gpt-4o-mini', { ms: 900 });
      });
      return r.done();
    },
    mustContain: ['succeeded', 'vector.search', '%'],
    mustNotContain: ['agent.run', 'failed'],
  },
  {
    id: 'success-evenly-spread',
    shape: 'success',
    why: 'it worked, and no single step stood out',
    run: () => {
      const r = runOf({
        status: 'completed',
        input: 'Tag the new photos',
        output: '4 photos tagged',
      });
      for (const photo of ['a', 'b', 'c', 'd'])
        r.tool('vision.tag', { photo: `${photo}.jpg` }, { ms: 1_000 });
      return r.done();
    },
    mustContain: ['succeeded'],
    mustNotContain: ['failed', 'loop', '%'],
  },
  {
    id: 'success-simple-swap',
    shape: 'success',
    why: 'it worked: quote, then swap, confirmed',
    run: () => {
      const r = runOf({
        status: 'completed',
        input: 'Swap 1 SOL for USDC',
        output: 'Swapped 1 SOL for 148.21 USDC',
      });
      r.llm('gpt-4o-mini', { ms: 700 });
      r.tool('jupiter.quote', { inputMint: 'SOL', outputMint: 'USDC' }, { ms: 500 });
      r.tx('route', '1000000000', { ms: 900 });
      return r.done();
    },
    mustContain: ['succeeded'],
    mustNotContain: ['failed', 'loop', 'likely cause'],
  },
  {
    id: 'dominant-time-and-cost',
    shape: 'dominant step',
    why: 'it worked; one long gpt-4.1 call took most of both the time and the model cost',
    run: () => {
      const r = runOf({ status: 'completed', input: 'Review the contract', output: 'Approved' });
      r.tool('pdf.text', { file: 'msa.pdf' }, { ms: 600 });
      r.llm('gpt-4.1', { ms: 12_000, costUsd: 0.31, tokens: [60_000, 3_000] });
      r.llm('gpt-4o-mini', { ms: 800, costUsd: 0.004 });
      return r.done();
    },
    mustContain: ['succeeded', 'gpt-4.1', 'time', 'cost'],
    mustNotContain: ['failed', 'pdf.text'],
  },
];
