import type { LlmCallPayload } from '@flightlog/protocol';

/** A realistic llm_call payload (the spec's shape). */
export function llmPayload(overrides: Partial<LlmCallPayload> = {}): LlmCallPayload {
  return {
    provider: 'openai',
    model: 'gpt-4o-mini',
    input: { messages: [{ role: 'user', content: 'Best route for 1 SOL → USDC?' }] },
    output: { content: 'Orca, ~148.2 USDC', finishReason: 'stop' },
    usage: { inputTokens: 120, outputTokens: 60, totalTokens: 180 },
    costUsd: 0.00042,
    streamed: false,
    ...overrides,
  };
}
