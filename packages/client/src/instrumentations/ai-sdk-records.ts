import {
  contentText,
  count,
  field,
  text,
  type LlmCallRecord,
  type LlmToolCall,
  type LlmUsage,
  type RecordedMessage,
} from './llm-payload.js';
import type { StreamReader } from './sdk-call.js';

/*
 * The AI SDK's language model specification (`ai` 5's v2 and 6's v3: prompt, content, usage,
 * finish reason, stream parts) turned into the fields of an `llm_call`, read structurally.
 */

function promptMessage(message: unknown): RecordedMessage {
  const content = field(message, 'content');
  const out: RecordedMessage = { role: text(field(message, 'role'), 'unknown'), content: '' };
  if (!Array.isArray(content)) {
    out.content = contentText(content);
    return out;
  }
  const calls: LlmToolCall[] = [];
  let body = '';
  for (const part of content) {
    const type = field(part, 'type');
    if (type === 'tool-call') calls.push(toolCall(part));
    else if (type === 'tool-result') body += toolResultText(field(part, 'output'));
    else if (type === 'reasoning') continue;
    else body += contentText(part);
  }
  out.content = body;
  if (calls.length > 0) out.toolCalls = calls;
  return out;
}

function toolResultText(output: unknown): string {
  const value = field(output, 'value');
  if (typeof value === 'string') return value;
  try {
    return JSON.stringify(value ?? output) ?? '';
  } catch {
    return '';
  }
}

function toolCall(part: unknown): LlmToolCall {
  const input = field(part, 'input') ?? field(part, 'args');
  let args: string;
  try {
    args = typeof input === 'string' ? input : (JSON.stringify(input ?? {}) ?? '');
  } catch {
    args = '';
  }
  return {
    id: text(field(part, 'toolCallId')),
    name: text(field(part, 'toolName'), 'tool'),
    arguments: args,
  };
}

export function aiSdkRequestRecord(
  operation: 'generate' | 'stream',
  params: unknown,
  model: unknown,
): LlmCallRecord {
  const prompt = field(params, 'prompt');
  return {
    provider: text(field(model, 'provider'), 'unknown'),
    model: text(field(model, 'modelId'), 'unknown'),
    operation,
    messages: Array.isArray(prompt) ? prompt.map(promptMessage) : [],
    content: '',
    finishReason: '',
    toolCalls: [],
    usage: undefined,
    streamed: operation === 'stream',
    request: params,
  };
}

/** v3 usage (`{inputTokens: {total, cacheRead, cacheWrite}, outputTokens: {total}}`) or v2's numbers. */
function aiSdkUsage(usage: unknown): LlmUsage | undefined {
  if (typeof usage !== 'object' || usage === null) return undefined;
  const inputTokens = field(usage, 'inputTokens');
  const outputTokens = field(usage, 'outputTokens');
  let input: number;
  let output: number;
  let cached: number;
  let written = 0;
  if (typeof inputTokens === 'object' && inputTokens !== null) {
    input = count(field(inputTokens, 'total'));
    cached = count(field(inputTokens, 'cacheRead'));
    written = count(field(inputTokens, 'cacheWrite'));
  } else {
    input = count(inputTokens);
    cached = count(field(usage, 'cachedInputTokens'));
  }
  if (typeof outputTokens === 'object' && outputTokens !== null)
    output = count(field(outputTokens, 'total'));
  else output = count(outputTokens);
  if (
    input === 0 &&
    output === 0 &&
    field(inputTokens, 'total') === undefined &&
    typeof inputTokens !== 'number'
  )
    return undefined;
  const out: LlmUsage = { inputTokens: input, outputTokens: output, totalTokens: input + output };
  if (cached > 0) out.cachedInputTokens = cached;
  if (written > 0) out.cacheWriteInputTokens = written;
  return out;
}

/** v3's `{unified, raw}` or v2's string. */
function finishReason(reason: unknown): string {
  if (typeof reason === 'string') return reason;
  return text(field(reason, 'unified'), 'unknown');
}

function applyResponseMetadata(record: LlmCallRecord, response: unknown): void {
  const modelId = field(response, 'modelId');
  if (typeof modelId === 'string' && modelId !== '') record.model = modelId;
  const id = field(response, 'id');
  if (typeof id === 'string') record.extra = { responseId: id };
}

export function applyAiSdkGenerateResult(record: LlmCallRecord, result: unknown): void {
  const content = field(result, 'content');
  let body = '';
  const calls: LlmToolCall[] = [];
  if (Array.isArray(content))
    for (const part of content) {
      const type = field(part, 'type');
      if (type === 'text') body += text(field(part, 'text'));
      else if (type === 'tool-call') calls.push(toolCall(part));
    }
  record.content = body;
  record.toolCalls = calls;
  record.finishReason = finishReason(field(result, 'finishReason'));
  record.usage = aiSdkUsage(field(result, 'usage'));
  applyResponseMetadata(record, field(result, 'response'));
}

/** Builds the record of a streamed call from its parts (`text-delta` … `finish`). */
export class AiSdkStreamAccumulator implements StreamReader {
  private readonly calls: LlmToolCall[] = [];
  finished = false;
  failure: string | undefined;

  constructor(private readonly record: LlmCallRecord) {}

  add(part: unknown): void {
    const type = field(part, 'type');
    if (type === 'text-delta') {
      const delta = field(part, 'delta') ?? field(part, 'textDelta');
      this.record.content += text(delta);
    } else if (type === 'tool-call') this.calls.push(toolCall(part));
    else if (type === 'response-metadata') applyResponseMetadata(this.record, part);
    else if (type === 'finish') {
      this.record.finishReason = finishReason(field(part, 'finishReason'));
      this.record.usage = aiSdkUsage(field(part, 'usage'));
      this.finished = true;
    } else if (type === 'error') {
      const error = field(part, 'error');
      this.failure =
        typeof error === 'string' ? error : text(field(error, 'message'), 'the stream failed');
    }
  }

  result(): LlmCallRecord {
    this.record.toolCalls = this.calls;
    if (this.record.finishReason === '') this.record.finishReason = 'unknown';
    return this.record;
  }
}
