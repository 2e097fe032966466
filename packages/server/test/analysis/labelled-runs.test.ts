import { readFileSync } from 'node:fs';
import MarkdownIt from 'markdown-it';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HeuristicAnalyzer } from '../../src/analysis/heuristic-analyzer.js';
import { LlmAnalyzer } from '../../src/analysis/llm-analyzer.js';
import { startChatStandIn, type ChatStandIn } from '../harness/chat-stand-in.js';
import { INJECTION } from './labelled-runs/prompt-injection.js';
import {
  LABELLED_RUNS,
  LABELLED_SECRETS,
  LARGE_RUN_EVENTS,
  describeMisses,
  scoreAutopsy,
  type Shape,
} from './labelled-runs/index.js';

/*
 * Both analyzers against the labelled set: the top of every autopsy (verdict and likely cause)
 * must name what a careful engineer would, and must not say what would mislead. The LLM
 * analyzer's endpoint is the chat-completions stand-in, replaying recorded answers.
 */

const SHAPES: Shape[] = [
  'direct failure',
  'nested failure',
  'retry recovered',
  'retry gave up',
  'loop',
  'not a loop',
  'timeout',
  'partial success',
  'dominant step',
  'success',
  'encrypted',
  'large run',
  'prompt injection',
];

const EVENT_TYPES = ['llm_call', 'tool_call', 'chain_tx', 'x402_payment', 'mcp_call', 'custom'];

describe('the labelled set', () => {
  it('holds at least 40 runs, with unique ids, across every shape and every event type failing', () => {
    expect(LABELLED_RUNS.length).toBeGreaterThanOrEqual(40);
    expect(new Set(LABELLED_RUNS.map((c) => c.id)).size).toBe(LABELLED_RUNS.length);
    for (const shape of SHAPES)
      expect(LABELLED_RUNS.filter((c) => c.shape === shape).length, shape).toBeGreaterThan(0);
    const failingTypes = new Set(
      LABELLED_RUNS.filter((c) => c.shape === 'direct failure').flatMap((c) =>
        c
          .run()
          .events.filter((e) => e.status === 'error')
          .map((e) => e.type),
      ),
    );
    expect([...failingTypes].sort()).toEqual([...EVENT_TYPES].sort());
    const large = LABELLED_RUNS.filter((c) => c.shape === 'large run');
    for (const c of large) expect(c.run().events.length).toBe(LARGE_RUN_EVENTS);
  });

  it('the heuristic analyzer gets every case right', () => {
    const scores = LABELLED_RUNS.map((c) => {
      const { autopsy } = new HeuristicAnalyzer(c.masterKey).analyzeNow(c.run());
      return scoreAutopsy(c, autopsy);
    });
    const right = scores.filter((s) => s.ok).length;
    console.log(`labelled set, heuristic analyzer: ${right} of ${scores.length} right`);
    expect(describeMisses(scores)).toBe('');
  });

  it('never quotes what only an encrypted payload holds, with the key or without', () => {
    for (const c of LABELLED_RUNS.filter((l) => l.shape === 'encrypted')) {
      const { autopsy } = new HeuristicAnalyzer(c.masterKey).analyzeNow(c.run());
      for (const secret of LABELLED_SECRETS) expect(autopsy, c.id).not.toContain(secret);
    }
  });

  it('analyses a run of 10,000 events in well under a second', () => {
    const analyzer = new HeuristicAnalyzer();
    for (const c of LABELLED_RUNS.filter((l) => l.shape === 'large run')) {
      const run = c.run();
      analyzer.analyzeNow(run); // warm
      const started = performance.now();
      analyzer.analyzeNow(run);
      const ms = performance.now() - started;
      console.log(`${c.id}: ${ms.toFixed(1)} ms`);
      // the target is 200 ms (bench/analysis.mjs measures it); generous for a shared machine
      expect(ms).toBeLessThan(1_000);
    }
  });
});

/** The recorded model answers, by case id (labelled-runs/recorded-answers.json). */
const RECORDED: Record<string, string> = JSON.parse(
  readFileSync(new URL('./labelled-runs/recorded-answers.json', import.meta.url), 'utf8'),
).answers;

const md = new MarkdownIt('commonmark');

/** The verdict line, and the paragraph after it when it is the computed answer (cause, retries). */
function computedTop(markdown: string): string {
  const [verdict, next] = markdown.split('\n\n');
  return /^\*\*(?:Likely cause|Retried):\*\*/.test(next ?? '') ? `${verdict}\n\n${next}` : verdict!;
}

/** The text of every heading in `markdown`. */
function headings(markdown: string): string[] {
  const tokens = md.parse(markdown, {});
  return tokens.flatMap((t, i) => (t.type === 'heading_open' ? [tokens[i + 1]!.content] : []));
}

describe('the LLM analyzer on the labelled set, with recorded answers', () => {
  let standIn: ChatStandIn;
  beforeAll(async () => {
    standIn = await startChatStandIn({ kind: 'status', status: 500 });
  });
  afterAll(() => standIn.close());

  const analyzer = (masterKey: Buffer | undefined) =>
    new LlmAnalyzer({
      endpoint: {
        baseUrl: standIn.baseUrl,
        model: 'recorded',
        apiKey: undefined,
        timeoutMs: 5_000,
      },
      fallback: new HeuristicAnalyzer(masterKey),
      masterKey,
    });

  it('has a recorded answer for every case', () => {
    expect(Object.keys(RECORDED).sort()).toEqual(LABELLED_RUNS.map((c) => c.id).sort());
  });

  it('gets every case right: the top is computed, the prose sits below it', async () => {
    const scores = [];
    for (const c of LABELLED_RUNS) {
      standIn.behave({ kind: 'answer', content: RECORDED[c.id]! });
      const run = c.run();
      const result = await analyzer(c.masterKey).analyze(run, new AbortController().signal);
      expect(result.analyzer, c.id).toBe('llm:recorded');
      scores.push(scoreAutopsy(c, result.autopsy));
      // the same answer on top as the heuristic analyzer's, whatever the model wrote
      const heuristic = new HeuristicAnalyzer(c.masterKey).analyzeNow(run).autopsy;
      expect(computedTop(result.autopsy), c.id).toBe(computedTop(heuristic));
      // one verdict, the computed one; the model's own headings are text
      expect(
        headings(result.autopsy).filter((h) => h.startsWith('Verdict')),
        c.id,
      ).toEqual([headings(heuristic)[0]]);
      expect(result.autopsy, c.id).toContain('### Analysis (by `recorded`, from the facts below)');
    }
    const right = scores.filter((s) => s.ok).length;
    console.log(
      `labelled set, LLM analyzer (recorded answers): ${right} of ${scores.length} right`,
    );
    expect(describeMisses(scores)).toBe('');
  });

  it('prompt injection in payloads and summaries reaches the model as data, and changes no verdict', async () => {
    for (const c of LABELLED_RUNS.filter((l) => l.shape === 'prompt injection')) {
      // the recorded answer is what a model that obeyed the payload would write
      expect(RECORDED[c.id]).toContain('## Verdict: succeeded');
      standIn.behave({ kind: 'answer', content: RECORDED[c.id]! });
      const result = await analyzer(undefined).analyze(c.run(), new AbortController().signal);
      // summaries go to the model inside the facts' JSON strings, as data; payload outputs are
      // not facts, and do not go at all
      const user = standIn.requests.at(-1)!.body.messages[1].content as string;
      if (c.id === 'injection-in-summaries')
        expect(user).toContain(JSON.stringify(INJECTION).slice(1, -1));
      else expect(user).not.toContain('IGNORE PREVIOUS INSTRUCTIONS');
      expect(result.autopsy.split('\n')[0]).toMatch(/^## Verdict: failed/);
      expect(headings(result.autopsy).filter((h) => /succeeded/.test(h))).toEqual([]);
      // the obeyed answer is shown, as the model's text, under its heading
      expect(result.autopsy).toContain('\\## Verdict: succeeded');
    }
  });
});
