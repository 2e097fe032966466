import fc from 'fast-check';
import MarkdownIt from 'markdown-it';
import { describe, expect, it } from 'vitest';
import { agentMarkdown } from '../../src/analysis/agent-markdown.js';
import { HeuristicAnalyzer } from '../../src/analysis/heuristic-analyzer.js';
import { erroredSwap, toolLoop, type Run } from '../fixtures/runs.js';

/*
 * Whatever an agent writes, the autopsy shows it as text: a real CommonMark parser (with raw
 * HTML and linkify on, the most permissive settings a renderer may use) finds no HTML, no link or
 * image, and no heading but the autopsy's own in it.
 */

const md = new MarkdownIt('commonmark', { html: true, linkify: true }).enable(['table', 'linkify']);
// linkify's loosest: domains without a scheme or www (evil.com), e-mail addresses
md.linkify.set({ fuzzyLink: true, fuzzyEmail: true });

const OWN_HEADINGS = new Set([
  'Asked',
  'Produced',
  'Failure chain',
  'Retries',
  'Loops',
  'Dominant steps',
  'Tool calls',
  'Slowest steps',
  'Spend',
  'Chain transactions',
  'x402 payments',
  'Encrypted payloads',
]);

interface Found {
  html: string[];
  links: string[];
  headings: { level: string; text: string }[];
}

function inspect(markdown: string): Found {
  const found: Found = { html: [], links: [], headings: [] };
  const tokens = md.parse(markdown, {});
  tokens.forEach((token, i) => {
    if (token.type === 'html_block') found.html.push(token.content);
    if (token.type === 'heading_open')
      found.headings.push({ level: token.tag, text: tokens[i + 1]?.content ?? '' });
    for (const child of token.children ?? []) {
      if (child.type === 'html_inline') found.html.push(child.content);
      if (child.type === 'link_open' || child.type === 'image')
        found.links.push(String(child.attrGet('href') ?? child.attrGet('src') ?? '?'));
    }
  });
  return found;
}

/** The autopsy's own structure, whatever the agent text. */
function expectOnlyOwnStructure(autopsy: string) {
  const found = inspect(autopsy);
  expect(found.html).toEqual([]);
  expect(found.links).toEqual([]);
  const [verdict, ...rest] = found.headings;
  expect(verdict?.level).toBe('h2');
  expect(verdict?.text).toMatch(/^Verdict: /);
  for (const h of rest) {
    expect(h.level).toBe('h3');
    expect(OWN_HEADINGS.has(h.text)).toBe(true);
  }
}

const HOSTILE_PIECES = [
  '\r',
  '\n',
  '\r\n',
  '\u2028',
  '\u2029',
  '\u0085',
  '\v',
  '\f',
  '\t',
  '    ',
  '## Verdict: succeeded',
  '# ',
  '### ',
  '===',
  '---',
  '> ',
  '- ',
  '1. ',
  '<img src=x onerror=alert(1)>',
  '<script>',
  '<!--',
  '<https://evil.example>',
  '[click](https://evil.example)',
  '![x](https://evil.example/x.png)',
  '[ref]: https://evil.example',
  '[ref]',
  'https://evil.example',
  'www.evil.example',
  'evil.com',
  'evil.рф',
  'пример.рф',
  'a.b.c.d',
  'me@evil.example',
  '&lt;b&gt;',
  '&#60;',
  '`',
  '``',
  '|',
  '\\',
  '*',
  '_',
  '~~~',
  '```',
  'a',
  ' ',
];

const agentString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 80 }),
  fc.array(fc.constantFrom(...HOSTILE_PIECES), { maxLength: 12 }).map((a) => a.join('')),
);

/**
 * A run that went well, whose verdict line names a step (the one that took most of the time),
 * so that agent text (the step's name) is in the verdict heading itself.
 */
function dominantSuccess(): Run {
  const run = erroredSwap();
  return {
    trace: { ...run.trace, status: 'completed', errorMessage: null },
    events: run.events.map((e, n) => ({
      ...e,
      status: 'ok',
      errorMessage: null,
      durationMs: n === 3 ? 8_000 : e.durationMs,
      payload: { ...e.payload, confirmation: 'finalized' },
    })),
  };
}

/** Replaces every string the agent controls in `run` with the next of `texts`. */
function withAgentText(run: Run, texts: string[], fail = true): Run {
  let i = 0;
  const next = () => texts[i++ % texts.length] ?? '';
  const rewrite = (value: unknown, key = ''): unknown => {
    if (typeof value === 'string')
      return key === 'lamports' || key === 'feeLamports' ? value : next();
    if (Array.isArray(value)) return value.map((v) => rewrite(v));
    if (value !== null && typeof value === 'object')
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, rewrite(v, k)]));
    return value;
  };
  return {
    trace: {
      ...run.trace,
      inputSummary: next(),
      outputSummary: next(),
      errorMessage: next(),
      toolsCalled: [next(), next()],
    },
    events: run.events.map((e, n) => ({
      ...e,
      status: fail && n % 2 === 0 ? 'error' : e.status,
      errorMessage: fail ? next() : null,
      payload: rewrite(e.payload) as typeof e.payload,
    })),
  };
}

const autopsyOf = (run: Run) =>
  new HeuristicAnalyzer().analyzeNow({ ...run, omittedEvents: 0 }).autopsy;

describe('agent text in the autopsy', () => {
  it('a carriage return in inputSummary cannot forge a heading, nor errorMessage add HTML or links', () => {
    const run = erroredSwap();
    run.trace.inputSummary = 'Swap 1 SOL\r## Verdict: succeeded\u2028## Verdict: succeeded';
    run.trace.errorMessage = '<img src=x onerror=alert(1)> see [the fix](https://evil.example)';
    const autopsy = autopsyOf(run);
    expectOnlyOwnStructure(autopsy);
    // shown as text, all of it
    expect(md.renderInline(agentMarkdown(run.trace.errorMessage, 'inline', 300))).toBe(
      '&lt;img src=x onerror=alert(1)&gt; see [the fix](https://evil.example)',
    );
    expect(autopsy).toContain(
      '> Swap 1 SOL\n> \\#\\# Verdict: succeeded\n> \\#\\# Verdict: succeeded\n\n### Produced',
    );
  });

  it('whatever strings the agent sends, the autopsy has no HTML, no link or image, and only its own headings', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(erroredSwap, toolLoop),
        fc.array(agentString, { minLength: 1, maxLength: 40 }),
        (fixture, texts) => expectOnlyOwnStructure(autopsyOf(withAgentText(fixture(), texts))),
      ),
      { numRuns: 300 },
    );
  });

  it('a run that went well names its dominant step in the verdict: any name stays text there', () => {
    const plain = autopsyOf(dominantSuccess());
    expect(plain).toMatch(/^## Verdict: succeeded; #3 `llm_call gpt-4o` took \d+ % of the time/);
    fc.assert(
      fc.property(fc.array(agentString, { minLength: 1, maxLength: 40 }), (texts) => {
        const autopsy = autopsyOf(withAgentText(dominantSuccess(), texts, false));
        expectOnlyOwnStructure(autopsy);
        expect(autopsy.split('\n')[0]).toMatch(/^## Verdict: succeeded; #3 /);
      }),
      { numRuns: 200 },
    );
  });

  it("a model's prose between the computed sections has no heading, HTML, link or image of its own", () => {
    fc.assert(
      fc.property(agentString, agentString, (a, b) => {
        const found = inspect(
          agentMarkdown(`## Verdict: succeeded\n${a}\n${b}\n===\n`, 'prose', 32_768),
        );
        expect(found.html).toEqual([]);
        expect(found.links).toEqual([]);
        expect(found.headings).toEqual([]);
      }),
      { numRuns: 500 },
    );
  });

  it('each piece of agent text renders as exactly its own characters (line breaks as spaces)', () => {
    fc.assert(
      fc.property(agentString, (text) => {
        const shown = md.renderInline(agentMarkdown(text, 'inline', 10_000));
        const expected = md.utils.escapeHtml(
          text
            .replace(/\r\n|[\n\v\f\r\u0085\u2028\u2029]|\p{Cc}/gu, ' ')
            .replace(/\s+/g, ' ')
            .trim(),
        );
        expect(shown).toBe(expected);
      }),
      { numRuns: 500 },
    );
  });

  it("a model's answer keeps its Markdown but no HTML, link or image survives", () => {
    fc.assert(
      fc.property(agentString, agentString, (a, b) => {
        const found = inspect(agentMarkdown(`## Verdict: failed\n${a}\n\n${b}`, 'model', 32_768));
        expect(found.html).toEqual([]);
        expect(found.links).toEqual([]);
        expect(found.headings[0]).toEqual({ level: 'h2', text: 'Verdict: failed' });
      }),
      { numRuns: 500 },
    );
  });
});
