import type { LabelledRun } from './labelled-run.js';
import { runOf } from './run-builder.js';

/** Repetition without progress, and repetition that is progress (not a loop). */
export const LOOPS: LabelledRun[] = [
  {
    id: 'loop-identical-input',
    shape: 'loop',
    why: 'dex.getPrice was called six times with the same pair, getting the same stale answer',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Find the cheapest route for 50 USDC to BONK',
        error: 'Tool loop: dex.getPrice called 6 times with the same arguments',
      });
      r.llm('gpt-4o-mini', { prompt: 'Find a route' });
      for (let i = 0; i < 6; i++) {
        r.tool('dex.getPrice', { pair: 'USDC/BONK' }, { output: { stale: true } });
        r.llm('gpt-4o-mini', { prompt: 'Stale price. Next?' });
      }
      r.custom('guardrail', { rule: 'max-repeated-tool-calls', limit: 6 });
      return r.done();
    },
    mustContain: ['loop', 'dex.getPrice', '6 times', 'same input'],
    mustNotContain: ['succeeded', 'no step failed'],
  },
  {
    id: 'loop-alternating-two-tools',
    shape: 'loop',
    why: 'the agent clicked "next" and read the same page five times over: the page never changed',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Collect all listings from the marketplace',
        error: 'max steps (30) reached',
      });
      r.tool('browser.open', { url: 'https://market.example/listings' });
      for (let i = 0; i < 5; i++) {
        r.tool('browser.click', { selector: 'a.next' });
        r.tool('browser.read', { selector: '.listing' }, { output: { items: 20, page: 1 } });
        r.llm('gpt-4o-mini', { prompt: 'Same listings again?' });
      }
      return r.done();
    },
    mustContain: ['loop', 'browser.click', 'browser.read', '5 times'],
    mustNotContain: ['browser.open', 'no step failed'],
  },
  {
    id: 'loop-alternating-inputs',
    shape: 'loop',
    why: 'the agent kept reading a.txt and b.txt in turn, four times each, without acting',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Merge the two configs',
        error: 'step budget exhausted',
      });
      for (let i = 0; i < 4; i++) {
        r.tool('fs.read', { path: 'a.txt' });
        r.tool('fs.read', { path: 'b.txt' });
      }
      return r.done();
    },
    mustContain: ['loop', 'fs.read', '2 inputs', '4 times'],
    mustNotContain: ['no step failed'],
  },
  {
    id: 'loop-in-completed-run',
    shape: 'loop',
    why: 'the run completed, but only after searching the same query four times in a row',
    run: () => {
      const r = runOf({
        status: 'completed',
        input: 'Find the founding year of Acme',
        output: '1999',
      });
      for (let i = 0; i < 4; i++) {
        r.tool('web.search', { q: 'Acme founding year' }, { ms: 900 });
        r.llm('gpt-4o-mini');
      }
      return r.done();
    },
    mustContain: ['completed', 'loop', 'web.search', '4 times'],
    mustNotContain: ['verdict: succeeded'],
  },
  {
    id: 'loop-then-guard-failure',
    shape: 'loop',
    why: 'a loop of identical balance checks was stopped by the step-limit guard: the loop is the cause',
    run: () => {
      const r = runOf({ status: 'errored', input: 'Wait for the deposit', error: 'step limit' });
      for (let i = 0; i < 5; i++) r.tool('wallet.balance', { account: 'deposit' }, { ms: 200 });
      r.custom('guard.steps', { max: 5 }, { error: 'step limit of 5 tool calls reached' });
      return r.done();
    },
    mustContain: ['loop', 'wallet.balance', '5 times'],
    mustNotContain: ['no step failed'],
  },
  {
    id: 'not-a-loop-pagination',
    shape: 'not a loop',
    why: 'eight calls of one tool, each for the next page: progress, not a loop',
    run: () => {
      const r = runOf({ status: 'completed', input: 'Export all customers', output: '780 rows' });
      for (let page = 1; page <= 8; page++) r.tool('crm.customers', { page, size: 100 });
      r.tool('csv.write', { rows: 780 });
      return r.done();
    },
    mustContain: ['succeeded'],
    mustNotContain: ['loop', 'failed'],
  },
  {
    id: 'not-a-loop-spread-out',
    shape: 'not a loop',
    why: 'the same auth refresh three times, far apart, between real work: not a loop',
    run: () => {
      const r = runOf({ status: 'completed', input: 'Sync three mailboxes', output: 'Synced' });
      for (const box of ['sales', 'support', 'billing']) {
        r.tool('auth.refresh', { client: 'mail' });
        r.tool('mail.list', { box });
        r.tool('mail.store', { box });
      }
      return r.done();
    },
    mustContain: ['succeeded'],
    mustNotContain: ['loop', 'failed'],
  },
  {
    id: 'not-a-loop-polling-with-progress',
    shape: 'not a loop',
    why: 'polling a render job until its status changed to done: waiting, not a loop',
    run: () => {
      const r = runOf({ status: 'completed', input: 'Render the video', output: 'video.mp4' });
      r.tool('render.start', { file: 'scene.blend' }, { output: { job: 'j-1' } });
      for (const status of ['queued', 'running', 'running', 'running', 'done'])
        r.tool('render.status', { job: 'j-1' }, { output: { status }, gapMs: 2_000 });
      return r.done();
    },
    mustContain: ['succeeded'],
    mustNotContain: ['loop'],
  },
];
