import type { FlightlogSession } from '../session-types.js';
import {
  AnthropicStreamAccumulator,
  anthropicRequestRecord,
  applyAnthropicMessage,
} from './anthropic-records.js';
import { readLlmOptions, type LlmObserveOptions } from './llm-payload.js';
import { proxyTree, type ProxySpec } from './method-proxy.js';
import { recordStainlessCall, type StainlessCallReader } from './sdk-call.js';

export type { LlmCostQuery, LlmObserveOptions, LlmUsage, ObserveOptions } from './llm-payload.js';
export { MODEL_PRICES, findModelPrice, type ModelPrice, type PriceTable } from '../model-prices.js';

/** Options of {@link observeAnthropic}. */
export type ObserveAnthropicOptions = LlmObserveOptions;

const READER: StainlessCallReader = {
  request: anthropicRequestRecord,
  response(record, value) {
    applyAnthropicMessage(record, value);
    return undefined;
  },
  stream: (record) => new AnthropicStreamAccumulator(record),
};

/**
 * Records every `messages.create` call of an Anthropic client (`@anthropic-ai/sdk`) as an
 * `llm_call` in `session` — streamed ones (`stream: true`) and the helpers built on it
 * (`messages.stream()`, `messages.parse()`) included — and `beta.messages.create` likewise.
 * Returns a client that behaves exactly like `client` (same types, results, errors and `this`),
 * which is left unchanged. Never throws: an unusable argument gives back `client` itself.
 *
 * ```ts
 * const anthropic = observeAnthropic(new Anthropic(), session);
 * ```
 */
export function observeAnthropic<C extends object>(
  client: C,
  session: FlightlogSession,
  options?: ObserveAnthropicOptions,
): C {
  try {
    const read = readLlmOptions(options);
    // Resources keep their Proxy as `this`, so `messages.stream()` reaches the recorded create.
    const messages: ProxySpec = {
      bindToOriginal: false,
      rootKeys: ['_client'],
      methods: {
        create: (original, thisArg, args) =>
          recordStainlessCall(session, read, READER, original, thisArg, args),
      },
    };
    return proxyTree(client, {
      children: {
        messages,
        beta: { bindToOriginal: false, rootKeys: ['_client'], children: { messages } },
      },
    });
  } catch {
    return client;
  }
}
