import type { LlmCallPayload, LlmMessage } from '@flightlog/protocol';
import { costOf, findModelPrice, type PriceTable } from '../model-prices.js';

/** Options every instrumentation takes. */
export interface ObserveOptions {
  /**
   * `false`: record metadata only — timing, status, error message, model, usage, cost, tool
   * names, amounts, signatures — and no inputs or outputs (prompts, completions, tool arguments
   * and results). Default `true`. Captured payloads are still encrypted when the client is.
   */
  capture?: boolean;
}

/** Token counts of one model call, as recorded in `usage`. */
export interface LlmUsage {
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  /** Input tokens read from the provider's prompt cache (part of `inputTokens`). */
  cachedInputTokens?: number;
  /** Input tokens written to the prompt cache (Anthropic; part of `inputTokens`). */
  cacheWriteInputTokens?: number;
}

/** What a `costUsd` option is asked about each call. */
export interface LlmCostQuery {
  provider: string;
  model: string;
  usage: LlmUsage;
  /** The request as the SDK got it (its body or call options). */
  request: unknown;
}

/** Options of the model instrumentations (OpenAI, Anthropic, the AI SDK middleware). */
export interface LlmObserveOptions extends ObserveOptions {
  /** Prices by model id (USD per million tokens), over the built-in table `MODEL_PRICES`. */
  prices?: PriceTable;
  /**
   * The cost of one call in USD, decided by you; `undefined` falls back to the price table.
   * Called once per call (a throw, or a negative or non-finite answer, counts as undefined).
   */
  costUsd?: (call: LlmCostQuery) => number | undefined;
}

/** A message as recorded: the spec's `{role, content}`, plus tool calls or ids where there are. */
export type RecordedMessage = LlmMessage & { [extra: string]: unknown };

/** A tool call the model asked for. */
export interface LlmToolCall {
  id?: string;
  name: string;
  arguments?: string;
}

/** One model call as the instrumentations saw it. */
export interface LlmCallRecord {
  provider: string;
  model: string;
  /** SDK method: `chat.completions`, `responses`, `embeddings`, `messages`, `generate`, `stream`. */
  operation: string;
  messages: RecordedMessage[];
  content: string;
  finishReason: string;
  toolCalls: LlmToolCall[];
  /** Undefined when the provider did not report usage (a stream without it, an aborted call). */
  usage: LlmUsage | undefined;
  streamed: boolean;
  aborted?: boolean;
  request: unknown;
  /** Further payload fields (response id, embedding count, …). */
  extra?: Record<string, unknown>;
}

const NO_USAGE: LlmUsage = { inputTokens: 0, outputTokens: 0, totalTokens: 0 };

/** The `llm_call` payload of a call: cost from the options or the price table, capture applied. */
export function llmCallPayload(call: LlmCallRecord, options: LlmObserveOptions): LlmCallPayload {
  const usage = call.usage ?? NO_USAGE;
  const capture = options.capture !== false;
  const { cost, priced } = callCost(call, usage, options);
  const output: LlmCallPayload['output'] & Record<string, unknown> = {
    content: capture ? call.content : '',
    finishReason: call.finishReason,
  };
  if (call.toolCalls.length > 0)
    output.toolCalls = capture
      ? call.toolCalls
      : call.toolCalls.map((toolCall) => ({ name: toolCall.name }));
  const payload: LlmCallPayload = {
    provider: call.provider,
    model: call.model,
    operation: call.operation,
    input: { messages: capture ? call.messages : [] },
    output,
    usage,
    costUsd: cost,
    streamed: call.streamed,
  };
  if (call.usage === undefined) payload.usageReported = false;
  if (!priced) payload.priced = false;
  if (call.aborted === true) payload.aborted = true;
  if (!capture) payload.captured = false;
  if (call.extra !== undefined) Object.assign(payload, call.extra);
  return payload;
}

function callCost(
  call: LlmCallRecord,
  usage: LlmUsage,
  options: LlmObserveOptions,
): { cost: number; priced: boolean } {
  if (typeof options.costUsd === 'function') {
    let chosen: unknown;
    try {
      chosen = options.costUsd({
        provider: call.provider,
        model: call.model,
        usage: { ...usage },
        request: call.request,
      });
    } catch {
      chosen = undefined;
    }
    if (typeof chosen === 'number' && Number.isFinite(chosen) && chosen >= 0)
      return { cost: chosen, priced: true };
  }
  const price = findModelPrice(call.model, options.prices);
  if (price === undefined) return { cost: 0, priced: false };
  const cached = usage.cachedInputTokens ?? 0;
  const written = usage.cacheWriteInputTokens ?? 0;
  return {
    cost: costOf(price, {
      input: Math.max(0, usage.inputTokens - cached - written),
      output: usage.outputTokens,
      cachedInput: cached,
      cacheWrite: written,
    }),
    priced: true,
  };
}

/** The text of message content in any of the SDKs' shapes (a string, or parts). */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (content === null || content === undefined) return '';
  if (Array.isArray(content)) return content.map(partText).join('');
  return partText(content);
}

function partText(part: unknown): string {
  if (typeof part === 'string') return part;
  if (typeof part !== 'object' || part === null) return '';
  const p = part as Record<string, unknown>;
  if (typeof p.text === 'string') return p.text;
  if (typeof p.refusal === 'string') return p.refusal;
  if (typeof p.type === 'string') return `[${p.type}]`;
  return '';
}

/** A non-negative integer from a usage field, else 0. */
export function count(value: unknown): number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : 0;
}

/** A string field, else the fallback. */
export function text(value: unknown, fallback = ''): string {
  return typeof value === 'string' ? value : fallback;
}

/** A property of an unknown value. */
export function field(value: unknown, key: string): unknown {
  return typeof value === 'object' && value !== null
    ? (value as Record<string, unknown>)[key]
    : undefined;
}

/** Options read once, safely (a getter that throws counts as not given). */
export function readLlmOptions(options: unknown): LlmObserveOptions {
  if (typeof options !== 'object' || options === null) return {};
  try {
    const o = options as LlmObserveOptions;
    const read: LlmObserveOptions = {};
    if (o.capture === false) read.capture = false;
    if (typeof o.prices === 'object' && o.prices !== null) read.prices = { ...o.prices };
    if (typeof o.costUsd === 'function') read.costUsd = o.costUsd;
    return read;
  } catch {
    return {};
  }
}
