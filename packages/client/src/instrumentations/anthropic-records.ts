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
 * Anthropic's Messages API shapes turned into the fields of an `llm_call`, read structurally
 * (nothing here imports the SDK; an unexpected shape gives empty fields, never a throw).
 */

/*
 * What runs on every call reads fields by name, each read still guarded by its type check: a
 * named read is cached per shape at its own place, where `field`'s one keyed read serves every
 * shape and so is slow. `field` stays for the rarer paths.
 */

/** A content block, a message or a request body, read by name. */
interface BlockShape {
  type?: unknown;
  content?: unknown;
  input?: unknown;
  id?: unknown;
  name?: unknown;
}
interface MessageShape {
  role?: unknown;
  content?: unknown;
}
interface RequestShape {
  model?: unknown;
  system?: unknown;
  messages?: unknown;
  stream?: unknown;
}
interface ResponseShape {
  id?: unknown;
  model?: unknown;
  content?: unknown;
  stop_reason?: unknown;
  usage?: unknown;
}

const NO_FIELDS = {};

/** `value` when it is an object (its fields then read by name), else an object without any. */
function fieldsOf<T extends object>(value: unknown): T {
  return (typeof value === 'object' && value !== null ? value : NO_FIELDS) as T;
}

/** The text of Anthropic content: a string, or blocks (text, tool use, tool results). */
function blocksText(content: unknown): string {
  if (!Array.isArray(content)) return contentText(content);
  let out = '';
  for (const block of content) {
    const { type, content: inner } = fieldsOf<BlockShape>(block);
    if (type === 'tool_result') out += blocksText(inner);
    else if (type !== 'tool_use' && type !== 'thinking' && type !== 'redacted_thinking')
      out += contentText(block);
  }
  return out;
}

function toolUses(content: unknown): LlmToolCall[] {
  if (!Array.isArray(content)) return [];
  const calls: LlmToolCall[] = [];
  for (const block of content) {
    const { type, input, id, name } = fieldsOf<BlockShape>(block);
    if (type !== 'tool_use') continue;
    let args: string;
    try {
      args = JSON.stringify(input ?? {});
    } catch {
      args = '';
    }
    calls.push({ id: text(id), name: text(name, 'tool'), arguments: args });
  }
  return calls;
}

function message(entry: unknown): RecordedMessage {
  const { role, content } = fieldsOf<MessageShape>(entry);
  const out: RecordedMessage = { role: text(role, 'unknown'), content: blocksText(content) };
  const calls = toolUses(content);
  if (calls.length > 0) out.toolCalls = calls;
  return out;
}

export function anthropicRequestRecord(body: unknown): LlmCallRecord {
  const { model, system, messages: entries, stream } = fieldsOf<RequestShape>(body);
  const messages: RecordedMessage[] = [];
  if (system !== undefined && system !== null)
    messages.push({ role: 'system', content: blocksText(system) });
  if (Array.isArray(entries)) for (const entry of entries) messages.push(message(entry));
  return {
    provider: 'anthropic',
    model: text(model, 'unknown'),
    operation: 'messages',
    messages,
    content: '',
    finishReason: '',
    toolCalls: [],
    usage: undefined,
    streamed: stream === true,
    request: body,
  };
}

/** Anthropic counts cache reads and writes apart from `input_tokens`; `inputTokens` is all three. */
function anthropicUsage(usage: unknown, outputOverride?: number): LlmUsage | undefined {
  if (typeof usage !== 'object' || usage === null) return undefined;
  const fields = usage as {
    input_tokens?: unknown;
    cache_read_input_tokens?: unknown;
    cache_creation_input_tokens?: unknown;
    output_tokens?: unknown;
  };
  const plain = count(fields.input_tokens);
  const read = count(fields.cache_read_input_tokens);
  const written = count(fields.cache_creation_input_tokens);
  const output = outputOverride ?? count(fields.output_tokens);
  const input = plain + read + written;
  const out: LlmUsage = { inputTokens: input, outputTokens: output, totalTokens: input + output };
  if (read > 0) out.cachedInputTokens = read;
  if (written > 0) out.cacheWriteInputTokens = written;
  return out;
}

/** The number fields of a usage object, in a fresh one (undefined for anything else). */
function usageNumbers(usage: unknown): Record<string, number> | undefined {
  if (typeof usage !== 'object' || usage === null) return undefined;
  const numbers: Record<string, number> = {};
  // Keys, not entries: read twice per stream, where a pair array per field showed in profiles.
  const fields = usage as Record<string, unknown>;
  for (const key of Object.keys(fields)) {
    const value = fields[key];
    if (typeof value === 'number') numbers[key] = value;
  }
  return numbers;
}

export function applyAnthropicMessage(record: LlmCallRecord, response: unknown): void {
  const { id, model, content, stop_reason: stop, usage } = fieldsOf<ResponseShape>(response);
  if (typeof model === 'string' && model !== '') record.model = model;
  record.content = blocksText(content);
  record.toolCalls = toolUses(content);
  record.finishReason = text(stop, 'unknown');
  record.usage = anthropicUsage(usage);
  record.extra = { responseId: text(id) };
}

/** A streamed event as read (every field checked before use). */
interface StreamEvent {
  type?: unknown;
  index?: unknown;
  delta?: unknown;
  message?: unknown;
  content_block?: unknown;
  usage?: unknown;
  error?: unknown;
}
interface StartedMessage {
  id?: unknown;
  model?: unknown;
  usage?: unknown;
}
interface MessageDelta {
  stop_reason?: unknown;
}
interface BlockDelta {
  type?: unknown;
  text?: unknown;
  partial_json?: unknown;
}

/** Builds the record of a streamed call from its events (`message_start` … `message_stop`). */
export class AnthropicStreamAccumulator implements StreamReader {
  private readonly blocks = new Map<number, LlmToolCall>();
  private startUsage: Record<string, number> | undefined;
  private outputTokens: number | undefined;
  private deltaUsage: Record<string, number> | undefined;
  finished = false;
  failure: string | undefined;

  constructor(private readonly record: LlmCallRecord) {}

  // Read once per streamed event: the fields are read by name at each place (not through
  // `field`, whose one keyed read serves every shape and so is slow), each checked before use.
  add(item: unknown): void {
    if (typeof item !== 'object' || item === null) return;
    const event = item as StreamEvent;
    const type = event.type;
    if (type === 'content_block_delta') {
      const delta = event.delta;
      if (typeof delta !== 'object' || delta === null) return;
      const { type: deltaType, text: piece, partial_json: json } = delta as BlockDelta;
      if (deltaType === 'text_delta') this.record.content += typeof piece === 'string' ? piece : '';
      else if (deltaType === 'input_json_delta') {
        const call = this.blocks.get(count(event.index));
        if (call !== undefined) call.arguments += typeof json === 'string' ? json : '';
      }
    } else if (type === 'message_start') {
      const { id, model, usage } = fieldsOf<StartedMessage>(event.message);
      if (typeof model === 'string' && model !== '') this.record.model = model;
      // Copied now: the event is the caller's, and the call is recorded a turn later.
      this.startUsage = usageNumbers(usage);
      if (typeof id === 'string') this.record.extra = { responseId: id };
    } else if (type === 'content_block_start') {
      const { type: blockType, id, name } = fieldsOf<BlockShape>(event.content_block);
      if (blockType === 'tool_use')
        this.blocks.set(count(event.index), {
          id: text(id),
          name: text(name, 'tool'),
          arguments: '',
        });
    } else if (type === 'message_delta') {
      const stop = fieldsOf<MessageDelta>(event.delta).stop_reason;
      if (typeof stop === 'string') this.record.finishReason = stop;
      const usage = usageNumbers(event.usage);
      this.deltaUsage = usage;
      // The usage of message_delta is cumulative.
      const output = usage?.['output_tokens'];
      if (typeof output === 'number') this.outputTokens = count(output);
    } else if (type === 'message_stop') {
      this.finished = true;
    } else if (type === 'error') {
      this.failure = text(field(event.error, 'message'), 'the stream reported an error');
    }
  }

  result(): LlmCallRecord {
    // Later counts win: message_delta may repeat the input counts, updated.
    const merged =
      this.startUsage === undefined ? undefined : { ...this.startUsage, ...this.deltaUsage };
    this.record.usage = anthropicUsage(merged, this.outputTokens);
    this.record.toolCalls = [...this.blocks.values()];
    if (this.record.finishReason === '') this.record.finishReason = 'unknown';
    return this.record;
  }
}
