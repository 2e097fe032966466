import type { AnalysisResult, StoredRun } from '../store/analysis-store.js';
import { agentMarkdown } from './agent-markdown.js';
import type { Analyzer } from './analyzer.js';
import { requestChatCompletion, type ChatEndpoint, type ChatMessage } from './chat-completions.js';
import { fitJson } from './fit-json.js';
import { collectRunFacts } from './run-facts.js';

/** The facts sent to the model: enough for a good autopsy, bounded whatever the run's size. */
export const DEFAULT_FACTS_BUDGET_BYTES = 24 * 1024;
/** Autopsies longer than this are cut (a model that rambles must not fill the table). */
const MAX_AUTOPSY_CHARS = 32 * 1024;

export const SYSTEM_PROMPT = [
  "You are Flightlog's run analyst. You write the autopsy of one finished run of a software agent",
  'for the engineer who owns the agent. Use only the facts given as JSON; never invent values.',
  'Write GitHub-flavoured Markdown, at most about 400 words:',
  '1. a first line "## Verdict: …" (succeeded, failed, or completed with problems) and one',
  '   sentence on the most likely cause;',
  '2. what happened: the first failure and the chain of parent steps that led to it, failing or',
  '   repeated tool calls (loops), the slowest steps;',
  '3. spend: tokens, model cost and lamports, naming the largest contributors;',
  '4. chain transactions and x402 payments with their outcomes (confirmation, settlement,',
  '   signatures);',
  '5. concrete next steps for the engineer.',
  'Say plainly what is unknown: payloads that are encrypted and unreadable, events left out, text',
  'cut to fit ("…[N characters cut]"). Refer to steps as #<sequence>.',
].join('\n');

export interface LlmAnalyzerOptions {
  endpoint: ChatEndpoint;
  /** What writes the autopsy when the endpoint fails. */
  fallback: Analyzer;
  /** SERVICE_MASTER_KEY; used for the prompt only with `sendDecrypted`. */
  masterKey?: Buffer | undefined;
  /** Whether facts from decrypted payloads may leave for the endpoint (default: no). */
  sendDecrypted?: boolean;
  factsBudgetBytes?: number;
}

/** The user message: the run's facts as JSON within the budget. */
export function factsMessage(factsJson: string): string {
  return `Facts of the run (JSON):\n\n${factsJson}`;
}

/**
 * An analyzer backed by any OpenAI-compatible chat-completions endpoint. When the endpoint
 * fails (error status, timeout, unreadable answer) the fallback writes the autopsy and the
 * result says why.
 */
export class LlmAnalyzer implements Analyzer {
  readonly name: string;

  constructor(private readonly options: LlmAnalyzerOptions) {
    this.name = `llm:${options.endpoint.model}`;
  }

  /** The messages for `run`; exposed so that tests can check the budget. */
  messagesFor(run: StoredRun): ChatMessage[] {
    const { masterKey, sendDecrypted = false } = this.options;
    // Decrypted payloads stay in this process unless the operator allowed sending them: the
    // endpoint is a third party, and the agent's owner encrypted them for a reason.
    const facts = collectRunFacts(run, { masterKey: sendDecrypted ? masterKey : undefined });
    const json = fitJson(facts, this.options.factsBudgetBytes ?? DEFAULT_FACTS_BUDGET_BYTES);
    return [
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'user', content: factsMessage(json) },
    ];
  }

  async analyze(run: StoredRun, signal: AbortSignal): Promise<AnalysisResult> {
    const answer = await requestChatCompletion(
      this.options.endpoint,
      this.messagesFor(run),
      signal,
    );
    if (answer.ok) {
      // The model read agent text and may repeat whatever the agent put there: its answer is
      // agent text too, shown as Markdown without HTML, links or images.
      const autopsy =
        agentMarkdown(answer.content, 'model', MAX_AUTOPSY_CHARS) +
        (answer.content.length > MAX_AUTOPSY_CHARS ? '\n\n…(cut)' : '');
      return { autopsy, analyzer: this.name, fallbackReason: null };
    }
    const fallback = await this.options.fallback.analyze(run, signal);
    return { ...fallback, fallbackReason: `${this.name} failed: ${answer.reason}` };
  }
}
