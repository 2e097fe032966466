import type { FlightlogSession } from '../session-types.js';
import { readLlmOptions, type LlmObserveOptions } from './llm-payload.js';
import { proxyTree, type Instrumented, type ProxySpec } from './method-proxy.js';
import {
  OpenAIStreamAccumulator,
  applyOpenAIResponse,
  openAIRequestRecord,
  responsesFailure,
  type OpenAIOperation,
} from './openai-records.js';
import { recordStainlessCall, type StainlessCallReader } from './sdk-call.js';

export type { LlmCostQuery, LlmObserveOptions, LlmUsage, ObserveOptions } from './llm-payload.js';
export { MODEL_PRICES, findModelPrice, type ModelPrice, type PriceTable } from '../model-prices.js';

/** Options of {@link observeOpenAI}. */
export type ObserveOpenAIOptions = LlmObserveOptions;

function readerOf(operation: OpenAIOperation): StainlessCallReader {
  return {
    request: (body) => openAIRequestRecord(operation, body),
    response(record, value) {
      applyOpenAIResponse(record, operation, value);
      return operation === 'responses' ? responsesFailure(value) : undefined;
    },
    stream: (record) => new OpenAIStreamAccumulator(record, operation),
  };
}

/**
 * Records every `chat.completions.create`, `responses.create` and `embeddings.create` call of an
 * OpenAI client (the `openai` package) as an `llm_call` in `session`, streamed ones included, and
 * the SDK's helpers built on them (`chat.completions.parse`, `.stream`, `.runTools`,
 * `responses.parse`, `.stream`). Returns a client that behaves exactly like `client` — same
 * types, results, errors and `this` — which is left unchanged. Never throws: an unusable
 * argument gives back `client` itself.
 *
 * ```ts
 * const openai = observeOpenAI(new OpenAI(), session);
 * ```
 */
export function observeOpenAI<C extends object>(
  client: C,
  session: FlightlogSession,
  options?: ObserveOpenAIOptions,
): C {
  try {
    const read = readLlmOptions(options);
    const create =
      (operation: OpenAIOperation): Instrumented =>
      (original, thisArg, args) =>
        recordStainlessCall(session, read, readerOf(operation), original, thisArg, args);
    // Resources keep their Proxy as `this`, and their `_client` is the client's Proxy: the SDK's
    // helpers call `this._client.chat.completions.create`, which is then recorded, once.
    const resource = (methods: ProxySpec['methods'], children?: ProxySpec['children']) =>
      ({ bindToOriginal: false, rootKeys: ['_client'], methods, children }) satisfies ProxySpec;
    return proxyTree(client, {
      children: {
        chat: resource({}, { completions: resource({ create: create('chat.completions') }) }),
        responses: resource({ create: create('responses') }),
        embeddings: resource({ create: create('embeddings') }),
      },
    });
  } catch {
    return client;
  }
}
