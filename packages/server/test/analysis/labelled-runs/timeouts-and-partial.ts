import type { LabelledRun } from './labelled-run.js';
import { runOf, signature } from './run-builder.js';

/** Runs that ran out of time, and runs that did part of what they were asked. */
export const TIMEOUTS_AND_PARTIAL: LabelledRun[] = [
  {
    id: 'step-timeout',
    shape: 'timeout',
    why: 'the page load timed out after 30 s in browser.open',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Screenshot the pricing page',
        error: 'TimeoutError',
      });
      r.llm('gpt-4o-mini');
      r.tool(
        'browser.open',
        { url: 'https://acme.example/pricing' },
        {
          error: 'Navigation timeout of 30000 ms exceeded',
          ms: 30_000,
        },
      );
      return r.done();
    },
    mustContain: ['browser.open', 'Navigation timeout of 30000 ms exceeded'],
    mustNotContain: ['loop', 'gpt-4o-mini failed'],
  },
  {
    id: 'run-timeout-unfinished-step',
    shape: 'timeout',
    why: 'the run timed out while the scrape step was still running (it never ended)',
    run: () => {
      const r = runOf({
        status: 'timeout',
        input: 'Scrape the competitor catalogue',
        durationMs: 300_000,
      });
      r.tool('catalogue.index', { site: 'shop.example' }, { ms: 4_000 });
      r.tool('catalogue.scrape', { pages: 2_000 }, { unfinished: true });
      return r.done();
    },
    mustContain: ['timed out', 'catalogue.scrape', 'still running'],
    mustNotContain: ['catalogue.index', 'no step failed'],
  },
  {
    id: 'run-errored-deadline-dominant-step',
    shape: 'timeout',
    why: 'no step failed, but one model call took 55 of the 60 seconds and the deadline hit',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Answer the support ticket within a minute',
        error: 'deadline exceeded after 60 s',
        durationMs: 60_000,
      });
      r.tool('kb.search', { q: 'refund policy' }, { ms: 1_500 });
      r.llm('o1', { ms: 55_000, tokens: [9_000, 14_000], costUsd: 0.98 });
      return r.done();
    },
    mustContain: ['deadline exceeded', 'o1', '92 %'],
    mustNotContain: ['kb.search'],
  },
  {
    id: 'partial-success-payouts',
    shape: 'partial success',
    why: 'two of five payouts failed for insufficient funds; the run still completed',
    run: () => {
      const r = runOf({
        status: 'completed',
        input: 'Send the five weekly payouts',
        output: '3 of 5 payouts sent',
      });
      ['a', 'b', 'c', 'd', 'e'].forEach((who, i) => {
        const fail = i >= 3;
        r.tx('transfer', String(250_000_000 + i * 17_000_000), {
          signature: signature(`${i + 2}Payout${who}`),
          ...(fail ? { error: 'Transfer: insufficient funds for fee and rent' } : {}),
        });
      });
      return r.done();
    },
    mustContain: ['completed', '2 failed steps', 'insufficient funds'],
    mustNotContain: ['verdict: succeeded', 'loop', 'attempts'],
  },
  {
    id: 'partial-success-handled-tool',
    shape: 'partial success',
    why: 'the translation step failed for one locale; the run completed with the others',
    run: () => {
      const r = runOf({
        status: 'completed',
        input: 'Translate the release notes into de, fr, ja',
        output: 'de and fr done; ja missing',
      });
      r.tool('translate', { to: 'de' });
      r.tool('translate', { to: 'fr' });
      r.tool('translate', { to: 'ja' }, { error: 'unsupported glossary term: "flightlog"' });
      r.tool('notes.publish', { locales: ['de', 'fr'] });
      return r.done();
    },
    mustContain: ['completed', '1 failed step', 'translate', 'unsupported glossary term'],
    mustNotContain: ['verdict: succeeded', 'attempts', 'loop'],
  },
];
