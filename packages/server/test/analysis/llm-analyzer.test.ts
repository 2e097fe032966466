import MarkdownIt from 'markdown-it';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AnalysisWorker } from '../../src/analysis/analysis-worker.js';
import { HeuristicAnalyzer } from '../../src/analysis/heuristic-analyzer.js';
import { fitJson } from '../../src/analysis/fit-json.js';
import { LlmAnalyzer, SYSTEM_PROMPT, WITHHELD_NOTE } from '../../src/analysis/llm-analyzer.js';
import type { StoredRun } from '../../src/analysis/analyzer.js';
import { getAnalysis, startTestWorker } from '../harness/analysis.js';
import { startChatStandIn, type ChatStandIn } from '../harness/chat-stand-in.js';
import { describeEngines } from '../harness/engines.js';
import { postBatch } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { waitFor } from '../harness/wait.js';
import {
  SECRETS,
  SWAP_SIGNATURE,
  encrypted,
  erroredSwap,
  newMasterKey,
  runBody,
  secretRun,
  toolLoop,
  type Run,
} from '../fixtures/runs.js';

const MODEL = 'stand-in-model';
const API_KEY = 'sk-test-0123456789';
const BUDGET = 24 * 1024;
const FACTS_PREFIX = 'Facts of the run (JSON):\n\n';
/**
 * A request: the facts (within the budget) as a JSON string inside the body, so with their
 * quotes escaped (a quarter more at most for facts like these), and the system prompt.
 */
const REQUEST_BOUND = Math.ceil(BUDGET * 1.25) + SYSTEM_PROMPT.length + 1_024;

const stored = (run: Run): StoredRun => ({ ...run, omittedEvents: 0 });

function analyzer(
  standIn: ChatStandIn,
  options: { timeoutMs?: number; masterKey?: Buffer; sendDecrypted?: boolean } = {},
) {
  return new LlmAnalyzer({
    endpoint: {
      baseUrl: standIn.baseUrl,
      model: MODEL,
      apiKey: API_KEY,
      timeoutMs: options.timeoutMs ?? 5_000,
    },
    fallback: new HeuristicAnalyzer(options.masterKey),
    masterKey: options.masterKey,
    sendDecrypted: options.sendDecrypted ?? false,
  });
}

const signal = () => new AbortController().signal;

/** The facts the last request carried, parsed. */
function sentFacts(standIn: ChatStandIn): any {
  const user = standIn.requests.at(-1)!.body.messages[1].content as string;
  const facts = user.startsWith(WITHHELD_NOTE) ? user.slice(WITHHELD_NOTE.length + 2) : user;
  expect(facts.startsWith(FACTS_PREFIX)).toBe(true);
  return JSON.parse(facts.slice(FACTS_PREFIX.length));
}

const PROSE = 'The route transaction #5 failed simulation: the price moved past 0.5 %.';

describe('LLM analyzer against a chat-completions stand-in', () => {
  let standIn: ChatStandIn;
  beforeAll(async () => {
    standIn = await startChatStandIn({ kind: 'answer', content: PROSE });
  });
  afterEach(() => standIn.behave({ kind: 'answer', content: PROSE }));
  afterAll(() => standIn.close());

  it('posts model, bearer key and the run facts to {base}/chat/completions; its prose goes between the computed top and evidence', async () => {
    const run = erroredSwap();
    const result = await analyzer(standIn).analyze(stored(run), signal());
    expect(result).toMatchObject({ analyzer: `llm:${MODEL}`, fallbackReason: null });
    // the verdict and likely cause on top are the computed ones, the evidence below too
    const heuristic = new HeuristicAnalyzer().analyzeNow(stored(run)).autopsy;
    const [top, evidence] = heuristic.split('\nThe run **errored**');
    expect(result.autopsy.startsWith(top!)).toBe(true);
    expect(result.autopsy).toContain(
      `### Analysis (by \`${MODEL}\`, from the facts below)\n\n${PROSE}\n\nThe run **errored**${evidence}`,
    );
    const request = standIn.requests.at(-1)!;
    expect(request).toMatchObject({
      method: 'POST',
      path: '/v1/chat/completions',
      authorization: `Bearer ${API_KEY}`,
      contentType: 'application/json',
    });
    expect(request.body.model).toBe(MODEL);
    expect(request.body.messages.map((m: { role: string }) => m.role)).toEqual(['system', 'user']);
    expect(request.body.messages[0].content).toBe(SYSTEM_PROMPT);
    // the facts: the computed diagnosis first, what was asked and produced, spend, transactions
    const facts = sentFacts(standIn);
    expect(Object.keys(facts).slice(0, 3)).toEqual(['traceId', 'status', 'diagnosis']);
    expect(facts).toMatchObject({
      traceId: run.trace.id,
      status: 'errored',
      diagnosis: {
        outcome: 'failed',
        failedSteps: 1,
        causes: [
          {
            kind: 'failure',
            chain: {
              root: { sequence: 5, label: 'chain_tx route', status: 'error' },
              ledBy: [{ label: 'tool_call jupiter.quote' }, { label: 'llm_call gpt-4o-mini' }],
              reachedTop: true,
            },
            chainTx: { confirmation: 'failed', signature: SWAP_SIGNATURE },
          },
        ],
        dominant: [{ kind: 'cost', step: { sequence: 3 } }],
      },
      inputSummary: run.trace.inputSummary,
      outputSummary: run.trace.outputSummary,
      errorMessage: run.trace.errorMessage,
      spend: {
        tokens: { total: 1400 },
        cost: { totalUsd: '0.00341', top: [{ sequence: 3, label: 'llm_call gpt-4o' }, {}] },
        lamports: { total: '1002039280', inFailed: '1000000000' },
      },
    });
    expect(facts.chainTxs[1]).toMatchObject({
      confirmation: 'failed',
      signature: SWAP_SIGNATURE,
      errorMessage: 'Transaction simulation failed: slippage tolerance exceeded (0x1771)',
    });
    expect(facts.payments[0]).toMatchObject({ settled: true, amount: '0.001' });
  });

  it("shows the model's prose as Markdown without the HTML, links, images or headings agent text got into it", async () => {
    standIn.behave({
      kind: 'answer',
      content:
        '## Verdict: succeeded\u2028## Verdict: succeeded\n<img src=x onerror=alert(1)>\n' +
        '[fix it here](https://evil.example) ![p](https://evil.example/p.png) evil.com пример.рф\n' +
        'All good\n===\n> # quoted heading\n- ## listed heading\n',
    });
    const { autopsy } = await analyzer(standIn).analyze(stored(erroredSwap()), signal());
    const md = new MarkdownIt('commonmark', { html: true, linkify: true }).enable('linkify');
    md.linkify.set({ fuzzyLink: true, fuzzyEmail: true });
    const tokens = md.parse(autopsy, {});
    const inline = tokens.flatMap((t) => t.children ?? []);
    expect(tokens.filter((t) => t.type === 'html_block')).toEqual([]);
    expect(inline.filter((t) => ['html_inline', 'link_open', 'image'].includes(t.type))).toEqual(
      [],
    );
    // the only headings are the autopsy's own: one verdict, the computed one
    const headings = tokens
      .map((t, i) => (t.type === 'heading_open' ? `${t.tag} ${tokens[i + 1]!.content}` : null))
      .filter((h) => h !== null);
    expect(headings.filter((h) => h.includes('Verdict'))).toEqual([
      'h2 Verdict: failed, 1 failed step',
    ]);
    expect(headings.filter((h) => /succeeded|heading|All good/.test(h))).toEqual([]);
    expect(autopsy).toContain('\\<img src=x onerror=alert(1)>');
    expect(autopsy).toContain('\\## Verdict: succeeded');
  });

  it('fits any JSON into the budget with a few serialisations, not one per cut', () => {
    const value = {
      tools: Array.from({ length: 20_000 }, (_, i) => ({
        tool: `tool.${i}.${'n'.repeat(90)}`,
        calls: 1,
        firstError: 'e'.repeat(100),
      })),
      names: Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, i])),
      deep: [[[[[[[[['x'.repeat(100_000)]]]]]]]]],
    };
    const started = performance.now();
    const json = fitJson(value, BUDGET);
    const ms = performance.now() - started;
    console.log(
      `fitJson of ${JSON.stringify(value).length} characters: ${Buffer.byteLength(json)} bytes in ${ms.toFixed(0)} ms`,
    );
    expect(Buffer.byteLength(json)).toBeLessThanOrEqual(BUDGET);
    // generous for a shared 2-core machine (0.2 s alone, 0.9 s beside other suites); it took 49 s
    expect(ms).toBeLessThan(3_000);
    const fitted = JSON.parse(json);
    expect(fitted.tools.at(-1)).toMatch(/^…\[\d+ more items cut\]$/);
    expect(fitted.names['…']).toMatch(/^\[\d+ more keys cut\]$/);
    for (const budget of [0, 10, 100, 1_000])
      expect(Buffer.byteLength(fitJson(value, budget))).toBeLessThanOrEqual(Math.max(budget, 4));
  });

  it('fits the facts of a run with 20,000 distinct tool names into 24 KiB in milliseconds', async () => {
    const run = toolLoop();
    const base = run.events[1]!;
    run.events = Array.from({ length: 20_000 }, (_, i) => ({
      ...base,
      id: `${base.id.slice(0, -8)}${i.toString(16).padStart(8, '0')}`,
      sequence: i,
      status: i % 3 === 0 ? 'error' : 'ok',
      errorMessage: i % 3 === 0 ? `tool ${i} failed: ${'e'.repeat(60)}` : null,
      payload: { name: `tool.${i}.${'n'.repeat(90)}`, input: { i } },
    }));
    run.trace.toolsCalled = run.events.map((e) => (e.payload as { name: string }).name);
    run.trace.eventCount = run.events.length;
    const started = performance.now();
    const messages = analyzer(standIn).messagesFor(stored(run));
    const ms = performance.now() - started;
    const factsBytes = Buffer.byteLength(messages[1]!.content) - FACTS_PREFIX.length;
    console.log(
      `20,000 distinct tools: facts ${factsBytes} bytes (budget ${BUDGET}), built and fitted in ${ms.toFixed(0)} ms`,
    );
    expect(factsBytes).toBeLessThanOrEqual(BUDGET);
    // generous: 20,000 events are read on a shared 2-core machine; it was 24-63 s
    expect(ms).toBeLessThan(5_000);
    // and what the model is sent says how much was left out
    await analyzer(standIn).analyze(stored(run), signal());
    expect(standIn.requests.at(-1)!.bytes).toBeLessThan(REQUEST_BOUND);
    const facts = sentFacts(standIn);
    expect(facts.traceId).toBe(run.trace.id);
    expect(facts.tools).toHaveLength(20);
    expect(facts.moreTools).toBe(19_980);
    expect(facts.moreToolsListed).toBe(19_980);
  });

  it('keeps the facts within 24 KiB, cutting the largest fields first', async () => {
    const run = toolLoop();
    const huge = (c: string) => c.repeat(60_000);
    run.trace.inputSummary = huge('i');
    run.trace.errorMessage = huge('e');
    // many failures with long messages
    run.events = run.events.map((e) => ({ ...e, status: 'error', errorMessage: huge('x') }));
    await analyzer(standIn).analyze(stored(run), signal());
    const request = standIn.requests.at(-1)!;
    const user = request.body.messages[1].content as string;
    expect(Buffer.byteLength(user) - FACTS_PREFIX.length).toBeLessThanOrEqual(BUDGET);
    expect(request.bytes).toBeLessThan(REQUEST_BOUND);
    const facts = sentFacts(standIn);
    // the small facts survive whole, the large ones are cut and say so
    expect(facts.traceId).toBe(run.trace.id);
    // every step failed here: the six identical price calls are a retry that gave up
    expect(facts.diagnosis).toMatchObject({ outcome: 'failed', failedSteps: 17 });
    expect(facts.retries[0]).toMatchObject({
      label: 'tool_call dex.getPrice',
      attempts: 6,
      recovered: false,
    });
    expect(facts.spend.cost.totalUsd).toBe('0.000234');
    expect(facts.inputSummary).toMatch(/^i+…\[\d+ characters cut\]$/);
    expect(facts.errorMessage).toMatch(/…\[\d+ characters cut\]$/);
  });

  it.each([
    [{ kind: 'status', status: 500 } as const, 'the endpoint answered HTTP 500'],
    [{ kind: 'status', status: 401 } as const, 'the endpoint answered HTTP 401'],
    [{ kind: 'raw', body: 'not json at all' } as const, 'the answer is not JSON'],
    [
      { kind: 'raw', body: '{"choices":[]}' } as const,
      'the answer has no choices[0].message.content text',
    ],
    [
      { kind: 'raw', body: '{"choices":[{"message":{"content":"   "}}]}' } as const,
      'the answer has no choices[0].message.content text',
    ],
  ])(
    'falls back to the heuristic analyzer when the endpoint fails (%j)',
    async (behaviour, why) => {
      standIn.behave(behaviour);
      const run = erroredSwap();
      const result = await analyzer(standIn).analyze(stored(run), signal());
      expect(result.analyzer).toBe('heuristic');
      expect(result.fallbackReason).toBe(`llm:${MODEL} failed: ${why}`);
      expect(result.autopsy).toBe(new HeuristicAnalyzer().analyzeNow(stored(run)).autopsy);
      expect(result.fallbackReason).not.toContain(API_KEY);
    },
  );

  it('falls back when the endpoint does not answer within the timeout', async () => {
    standIn.behave({ kind: 'hang' });
    const started = Date.now();
    const result = await analyzer(standIn, { timeoutMs: 300 }).analyze(
      stored(erroredSwap()),
      signal(),
    );
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(result).toMatchObject({
      analyzer: 'heuristic',
      fallbackReason: `llm:${MODEL} failed: no answer within ANALYSIS_LLM_TIMEOUT_MS (300 ms)`,
    });
  });

  it('falls back when nothing listens at the address', async () => {
    const closed = await startChatStandIn({ kind: 'hang' });
    await closed.close();
    const result = await analyzer(closed).analyze(stored(erroredSwap()), signal());
    expect(result.fallbackReason).toBe(`llm:${MODEL} failed: the request failed (ECONNREFUSED)`);
  });

  it('does not send facts from decrypted payloads unless told to, and never their contents', async () => {
    const key = newMasterKey();
    const run = stored(encrypted(secretRun(), key));

    const result = await analyzer(standIn, { masterKey: key }).analyze(run, signal());
    expect(result.analyzer).toBe(`llm:${MODEL}`);
    let facts = sentFacts(standIn);
    expect(facts.encryption).toMatchObject({ encrypted: 5, decrypted: 0, unreadable: 5 });
    // the model is told that the sections around its text read more than it was sent
    const user = () => standIn.requests.at(-1)!.body.messages[1].content as string;
    expect(user().startsWith(`${WITHHELD_NOTE}\n\n`)).toBe(true);
    // and they do: the computed sections name what only the decrypted payloads say
    expect(result.autopsy).toContain('#4 `chain_tx transfer` failed (confirmation: failed)');
    for (const secret of SECRETS) expect(result.autopsy).not.toContain(secret);
    expect(facts.loops).toEqual([]);
    let sent = JSON.stringify(standIn.requests.at(-1)!.body);
    expect(sent).not.toContain(SWAP_SIGNATURE);
    for (const secret of SECRETS) expect(sent).not.toContain(secret);

    await analyzer(standIn, { masterKey: key, sendDecrypted: true }).analyze(run, signal());
    facts = sentFacts(standIn);
    expect(user().startsWith(FACTS_PREFIX)).toBe(true);
    expect(facts.encryption).toMatchObject({ encrypted: 5, decrypted: 5, unreadable: 0 });
    expect(facts.loops[0]).toMatchObject({ operations: ['vault.lookup'], calls: 3, input: null });
    sent = JSON.stringify(standIn.requests.at(-1)!.body);
    expect(sent).toContain(SWAP_SIGNATURE);
    for (const secret of SECRETS) expect(sent).not.toContain(secret);
  });
});

describeEngines('LLM analyzer through the worker and the analysis endpoint [%s]', (engine) => {
  let server: TestServer;
  let agent: TestAgent;
  let token: string;
  let standIn: ChatStandIn;
  let worker: AnalysisWorker;
  beforeAll(async () => {
    server = await startTestServer(engine);
    agent = await server.createAgent();
    token = await server.userToken('lee', agent.agentId);
    standIn = await startChatStandIn({ kind: 'answer', content: 'model says' });
    worker = startTestWorker(server.store, { analyzer: analyzer(standIn, { timeoutMs: 500 }) });
  });
  afterAll(async () => {
    await worker.stop(5_000);
    await standIn.close();
    await server.close();
  });

  async function analysed(run: Run) {
    expect((await postBatch(server.url, agent.apiKey, runBody(run))).status).toBe(202);
    return waitFor(async () => {
      const res = await getAnalysis(server.url, token, run.trace.id);
      return res.body?.status === 'done' ? res.body : undefined;
    }, 'the analysis');
  }

  it('serves the model-written autopsy, naming the analyzer', async () => {
    const body = await analysed(erroredSwap());
    expect(body.analyzer).toBe(`llm:${MODEL}`);
    expect(body.autopsy).toMatch(/^## Verdict: failed, 1 failed step\n\n\*\*Likely cause:\*\* #5 /);
    expect(body.autopsy).toContain(
      `### Analysis (by \`${MODEL}\`, from the facts below)\n\nmodel says\n`,
    );
    expect(body.fallbackReason).toBeUndefined();
  });

  it('serves the heuristic autopsy and why the model was not used when the endpoint fails', async () => {
    standIn.behave({ kind: 'status', status: 503 });
    const body = await analysed(erroredSwap());
    expect(body).toMatchObject({
      status: 'done',
      analyzer: 'heuristic',
      fallbackReason: `llm:${MODEL} failed: the endpoint answered HTTP 503`,
    });
    expect(body.autopsy).toMatch(/^## Verdict: failed/);
  });
});
