import {
  contentText,
  count,
  field,
  text,
  type LlmCallRecord,
  type RecordedMessage,
  type LlmToolCall,
  type LlmUsage,
} from './llm-payload.js';

/*
 * OpenAI's request and response shapes (chat completions, responses, embeddings) turned into the
 * fields of an `llm_call`. Read structurally, field by field: nothing here imports the SDK, and
 * an unexpected shape gives empty fields, never a throw.
 */

export type OpenAIOperation = 'chat.completions' | 'responses' | 'embeddings';

/** The fields of a request body read by name (each checked before use). */
interface RequestShape {
  model?: unknown;
  messages?: unknown;
  stream?: unknown;
}

/*
 * What runs on every call reads fields by name, each read still guarded by its type check: a
 * named read is cached per shape at its own place, where `field`'s one keyed read serves every
 * shape and so is slow. `field` stays for the rarer paths.
 */

/** The record of a call before its outcome is known. */
export function openAIRequestRecord(operation: OpenAIOperation, body: unknown): LlmCallRecord {
  const request: RequestShape = typeof body === 'object' && body !== null ? body : {};
  return {
    provider: 'openai',
    model: text(request.model, 'unknown'),
    operation,
    messages: requestMessages(operation, body),
    content: '',
    finishReason: '',
    toolCalls: [],
    usage: undefined,
    streamed: request.stream === true,
    request: body,
  };
}

function requestMessages(operation: OpenAIOperation, body: unknown): RecordedMessage[] {
  if (operation === 'chat.completions') {
    const messages =
      typeof body === 'object' && body !== null ? (body as RequestShape).messages : [];
    return Array.isArray(messages) ? messages.map(chatMessage) : [];
  }
  if (operation === 'embeddings') {
    const input = field(body, 'input');
    const items: unknown[] = Array.isArray(input) ? input : [input];
    // Token arrays are left as a count: they are not text.
    return items.map((item) => ({
      role: 'input',
      content:
        typeof item === 'string' ? item : `[${Array.isArray(item) ? item.length : 0} tokens]`,
    }));
  }
  const messages: RecordedMessage[] = [];
  const instructions = field(body, 'instructions');
  if (typeof instructions === 'string') messages.push({ role: 'system', content: instructions });
  const input = field(body, 'input');
  if (typeof input === 'string') messages.push({ role: 'user', content: input });
  else if (Array.isArray(input)) for (const item of input) messages.push(responsesInputItem(item));
  return messages;
}

/** A chat message, request or response (fields read by name). */
interface ChatMessageShape {
  role?: unknown;
  content?: unknown;
  refusal?: unknown;
  tool_calls?: unknown;
  tool_call_id?: unknown;
}

function chatMessage(message: unknown): RecordedMessage {
  if (typeof message !== 'object' || message === null) return { role: 'unknown', content: '' };
  const {
    role,
    content,
    tool_calls: toolCalls,
    tool_call_id: toolCallId,
  } = message as ChatMessageShape;
  const out: RecordedMessage = { role: text(role, 'unknown'), content: contentText(content) };
  if (Array.isArray(toolCalls) && toolCalls.length > 0) out.toolCalls = toolCalls.map(chatToolCall);
  if (typeof toolCallId === 'string') out.toolCallId = toolCallId;
  return out;
}

function chatToolCall(call: unknown): LlmToolCall {
  const fn = field(call, 'function');
  const out: LlmToolCall = { name: text(field(fn, 'name'), text(field(call, 'type'), 'tool')) };
  const id = field(call, 'id');
  if (typeof id === 'string') out.id = id;
  const args = field(fn, 'arguments');
  if (typeof args === 'string') out.arguments = args;
  return out;
}

function responsesInputItem(item: unknown): RecordedMessage {
  if (typeof item === 'string') return { role: 'user', content: item };
  const type = field(item, 'type');
  if (type === 'function_call_output')
    return {
      role: 'tool',
      content: contentText(field(item, 'output')),
      toolCallId: text(field(item, 'call_id')),
    };
  if (type === 'function_call')
    return {
      role: 'assistant',
      content: '',
      toolCalls: [
        {
          id: text(field(item, 'call_id')),
          name: text(field(item, 'name'), 'tool'),
          arguments: text(field(item, 'arguments')),
        },
      ],
    };
  return {
    role: text(field(item, 'role'), typeof type === 'string' ? type : 'unknown'),
    content: contentText(field(item, 'content')),
  };
}

/** Fills in a whole (not streamed) response. */
export function applyOpenAIResponse(
  record: LlmCallRecord,
  operation: OpenAIOperation,
  response: unknown,
): void {
  if (operation === 'chat.completions') {
    applyChatCompletion(record, response);
    return;
  }
  const model = field(response, 'model');
  if (typeof model === 'string' && model !== '') record.model = model;
  if (operation === 'responses') {
    applyResponsesObject(record, response);
  } else {
    const data = field(response, 'data');
    const vectors = Array.isArray(data) ? data : [];
    const first = field(vectors[0], 'embedding');
    record.finishReason = 'stop';
    record.usage = chatUsage(field(response, 'usage'));
    record.extra = {
      embeddings: vectors.length,
      dimensions: Array.isArray(first) ? first.length : typeof first === 'string' ? -1 : 0,
    };
  }
}

/** A chat completion, read by name (every field checked before use). */
interface ChatCompletionShape {
  id?: unknown;
  model?: unknown;
  choices?: unknown;
  usage?: unknown;
}
interface ChatCompletionChoice {
  message?: unknown;
  finish_reason?: unknown;
}

function applyChatCompletion(record: LlmCallRecord, response: unknown): void {
  if (typeof response !== 'object' || response === null) {
    record.finishReason = 'unknown';
    record.extra = { responseId: '' };
    return;
  }
  const { id, model, choices, usage } = response as ChatCompletionShape;
  if (typeof model === 'string' && model !== '') record.model = model;
  const choice: unknown = Array.isArray(choices) ? choices[0] : undefined;
  const { message, finish_reason: finish } =
    typeof choice === 'object' && choice !== null ? (choice as ChatCompletionChoice) : {};
  if (typeof message === 'object' && message !== null) {
    const { content, refusal, tool_calls: toolCalls } = message as ChatMessageShape;
    record.content = contentText(content ?? refusal);
    if (Array.isArray(toolCalls)) record.toolCalls = toolCalls.map(chatToolCall);
  } else record.content = '';
  record.finishReason = text(finish, 'unknown');
  record.usage = chatUsage(usage);
  record.extra = { responseId: text(id) };
}

/** Chat completions' and embeddings' usage (`prompt_tokens`, `completion_tokens`). */
function chatUsage(usage: unknown): LlmUsage | undefined {
  if (typeof usage !== 'object' || usage === null) return undefined;
  const {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: total,
    prompt_tokens_details: details,
  } = usage as {
    prompt_tokens?: unknown;
    completion_tokens?: unknown;
    total_tokens?: unknown;
    prompt_tokens_details?: unknown;
  };
  const input = count(prompt);
  const output = count(completion);
  const out: LlmUsage = {
    inputTokens: input,
    outputTokens: output,
    totalTokens: count(total) || input + output,
  };
  const cached = count(field(details, 'cached_tokens'));
  if (cached > 0) out.cachedInputTokens = cached;
  return out;
}

/** The responses API's usage (`input_tokens`, `output_tokens`). */
function responsesUsage(usage: unknown): LlmUsage | undefined {
  if (typeof usage !== 'object' || usage === null) return undefined;
  const input = count(field(usage, 'input_tokens'));
  const output = count(field(usage, 'output_tokens'));
  const out: LlmUsage = {
    inputTokens: input,
    outputTokens: output,
    totalTokens: count(field(usage, 'total_tokens')) || input + output,
  };
  const cached = count(field(field(usage, 'input_tokens_details'), 'cached_tokens'));
  if (cached > 0) out.cachedInputTokens = cached;
  return out;
}

function applyResponsesObject(record: LlmCallRecord, response: unknown): void {
  const model = field(response, 'model');
  if (typeof model === 'string' && model !== '') record.model = model;
  const output = field(response, 'output');
  let content = '';
  const toolCalls: LlmToolCall[] = [];
  if (Array.isArray(output))
    for (const item of output) {
      const type = field(item, 'type');
      if (type === 'message') content += contentText(field(item, 'content'));
      else if (type === 'function_call')
        toolCalls.push({
          id: text(field(item, 'call_id')),
          name: text(field(item, 'name'), 'tool'),
          arguments: text(field(item, 'arguments')),
        });
    }
  record.content = content;
  record.toolCalls = toolCalls;
  const status = text(field(response, 'status'), 'unknown');
  record.finishReason =
    status === 'incomplete'
      ? text(field(field(response, 'incomplete_details'), 'reason'), 'incomplete')
      : status === 'completed'
        ? toolCalls.length > 0
          ? 'tool_calls'
          : 'stop'
        : status;
  record.usage = responsesUsage(field(response, 'usage'));
  record.extra = { responseId: text(field(response, 'id')) };
}

/** The error a finished responses object carries (`status: failed`), if any. */
export function responsesFailure(response: unknown): string | undefined {
  if (field(response, 'status') !== 'failed') return undefined;
  return text(field(field(response, 'error'), 'message'), 'the response failed');
}

/** A chat completion chunk as read (every field checked before use). */
interface ChatChunk {
  id?: unknown;
  model?: unknown;
  usage?: unknown;
  choices?: unknown;
}
interface ChatChoice {
  delta?: unknown;
  finish_reason?: unknown;
}
interface ChatDelta {
  content?: unknown;
  tool_calls?: unknown;
}

/** Builds the record of a streamed call from its items as they are read. */
export class OpenAIStreamAccumulator {
  private readonly toolCalls: LlmToolCall[] = [];
  /** True once the stream said how it finished (its last meaningful item was read). */
  finished = false;
  /** An error the stream reported in-band (`response.failed`, an `error` event). */
  failure: string | undefined;

  constructor(
    private readonly record: LlmCallRecord,
    private readonly operation: OpenAIOperation,
  ) {}

  add(item: unknown): void {
    if (this.operation === 'responses') this.addResponsesEvent(item);
    else this.addChatChunk(item);
  }

  // Read once per streamed chunk: the fields are read by name at each place (not through
  // `field`, whose one keyed read serves every shape and so is slow), each read still guarded by
  // its type check.
  private addChatChunk(item: unknown): void {
    if (typeof item !== 'object' || item === null) return;
    const chunk = item as ChatChunk;
    const record = this.record;
    const model = chunk.model;
    if (typeof model === 'string' && model !== '') record.model = model;
    const reported = chunk.usage;
    if (typeof reported === 'object' && reported !== null) {
      const usage = chatUsage(reported);
      if (usage !== undefined) record.usage = usage;
    }
    const choices = chunk.choices;
    if (!Array.isArray(choices)) return;
    const choice: unknown = choices[0];
    if (typeof choice !== 'object' || choice === null) return;
    const { delta, finish_reason: finish } = choice as ChatChoice;
    if (typeof delta === 'object' && delta !== null) {
      const { content, tool_calls: calls } = delta as ChatDelta;
      if (typeof content === 'string') record.content += content;
      if (Array.isArray(calls)) this.addToolCallDeltas(calls);
    }
    if (typeof finish === 'string') {
      record.finishReason = finish;
      this.finished = true;
    }
    // The id of a chunk with a choice (Azure's first chunk, of content filters, has an empty one).
    if (record.extra === undefined) {
      const id = chunk.id;
      if (typeof id === 'string') record.extra = { responseId: id };
    }
  }

  private addToolCallDeltas(calls: unknown[]): void {
    for (const call of calls) {
      const index = count(field(call, 'index'));
      const slot = (this.toolCalls[index] ??= { name: '', arguments: '' });
      const id = field(call, 'id');
      if (typeof id === 'string') slot.id = id;
      const fn = field(call, 'function');
      const name = field(fn, 'name');
      if (typeof name === 'string') slot.name += name;
      const args = field(fn, 'arguments');
      if (typeof args === 'string') slot.arguments += args;
    }
  }

  private addResponsesEvent(event: unknown): void {
    const type = field(event, 'type');
    if (type === 'response.output_text.delta') {
      const delta = field(event, 'delta');
      if (typeof delta === 'string') this.record.content += delta;
    } else if (
      type === 'response.completed' ||
      type === 'response.incomplete' ||
      type === 'response.failed'
    ) {
      // Read now: the event is the caller's, and the call is recorded a turn later.
      const response = field(event, 'response');
      applyResponsesObject(this.record, response);
      this.finished = true;
      this.failure = responsesFailure(response);
    } else if (type === 'response.created') {
      const model = field(field(event, 'response'), 'model');
      if (typeof model === 'string' && model !== '') this.record.model = model;
    } else if (type === 'error') {
      this.failure = text(field(event, 'message'), 'the stream reported an error');
    }
  }

  /** The record as far as it was read. */
  result(): LlmCallRecord {
    if (this.toolCalls.length > 0) this.record.toolCalls = this.toolCalls.filter(Boolean);
    if (this.record.finishReason === '') this.record.finishReason = 'unknown';
    return this.record;
  }
}
