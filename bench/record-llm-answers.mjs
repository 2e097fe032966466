// Records the LLM analyzer's answers for the labelled set from a real chat-completions endpoint,
// into packages/server/test/analysis/labelled-runs/recorded-answers.json, which the tests and
// bench/analysis.mjs replay through a local stand-in. Each case is sent exactly the messages the
// analyzer sends (system prompt, then its facts within the budget; the worker's key for the
// encrypted cases, decrypted facts withheld as by default), and the answer is stored as given.
//
//   npm run build && ANALYSIS_LLM_BASE_URL=https://api.openai.com/v1 ANALYSIS_LLM_MODEL=gpt-4o-mini \
//     ANALYSIS_LLM_API_KEY=… node bench/record-llm-answers.mjs [case-id …]
//
// With case ids, only those are re-recorded. The prompt-injection cases are kept as they are
// unless named: their recorded answers are, on purpose, what a model that obeyed the payload
// would write. Nothing is written when a request fails.

import { renameSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { RECORDED_ANSWERS_FILE, loadLabelledSet } from './labelled-set.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SERVER_DIST = join(ROOT, 'packages/server/dist');

const baseUrl = process.env.ANALYSIS_LLM_BASE_URL?.trim();
const model = process.env.ANALYSIS_LLM_MODEL?.trim();
if (!baseUrl || !model) {
  console.error('Set ANALYSIS_LLM_BASE_URL and ANALYSIS_LLM_MODEL (and ANALYSIS_LLM_API_KEY).');
  process.exit(2);
}
const endpoint = {
  baseUrl,
  model,
  apiKey: process.env.ANALYSIS_LLM_API_KEY?.trim() || undefined,
  timeoutMs: 120_000,
};

const { LABELLED_RUNS } = await loadLabelledSet();
// the built server's modules, typed by their declarations next to them
const { LlmAnalyzer } =
  /** @type {typeof import('../packages/server/dist/analysis/llm-analyzer.js')} */ (
    await import(join(SERVER_DIST, 'analysis/llm-analyzer.js'))
  );
const { HeuristicAnalyzer } =
  /** @type {typeof import('../packages/server/dist/analysis/heuristic-analyzer.js')} */ (
    await import(join(SERVER_DIST, 'analysis/heuristic-analyzer.js'))
  );
const { requestChatCompletion } =
  /** @type {typeof import('../packages/server/dist/analysis/chat-completions.js')} */ (
    await import(join(SERVER_DIST, 'analysis/chat-completions.js'))
  );

const named = process.argv.slice(2);
const file = /** @type {import('./labelled-set.mjs').RecordedAnswers} */ (
  JSON.parse(readFileSync(RECORDED_ANSWERS_FILE, 'utf8'))
);
const chosen = LABELLED_RUNS.filter((c) =>
  named.length > 0 ? named.includes(c.id) : c.shape !== 'prompt injection',
);
for (const c of chosen) {
  const analyzer = new LlmAnalyzer({
    endpoint,
    fallback: new HeuristicAnalyzer(c.masterKey),
    masterKey: c.masterKey,
  });
  const answer = await requestChatCompletion(
    endpoint,
    analyzer.messagesFor(c.run()),
    new globalThis.AbortController().signal,
  );
  if (!answer.ok) {
    console.error(`!!! ${c.id}: ${answer.reason}; nothing written`);
    process.exit(1);
  }
  file.answers[c.id] = answer.content.endsWith('\n') ? answer.content : `${answer.content}\n`;
  console.log(`${c.id}: ${answer.content.length} characters`);
}
file.recordedWith = `${model} at ${new URL(baseUrl).host}, ${new Date().toISOString().slice(0, 10)}`;
const tmp = `${RECORDED_ANSWERS_FILE}.tmp`;
writeFileSync(tmp, `${JSON.stringify(file, null, 2)}\n`);
renameSync(tmp, RECORDED_ANSWERS_FILE);
console.log(`Written to ${RECORDED_ANSWERS_FILE} (run \`npm run format\` before committing).`);
