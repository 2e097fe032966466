import type { EventType, LlmMessage } from '@flightlog/protocol';
import type { Attributes, PlainValue } from './span-attributes.js';

/**
 * What a span is, read from the attribute names that instrumentations actually emit:
 *
 * - the OpenTelemetry GenAI conventions (`gen_ai.operation.name`, `gen_ai.usage.*`,
 *   `gen_ai.request.model`, `gen_ai.provider.name` / `gen_ai.system`, `gen_ai.tool.*`,
 *   `gen_ai.input.messages` / `gen_ai.output.messages`), also what the Vercel AI SDK 7's
 *   `@ai-sdk/otel` integration and OpenLLMetry write;
 * - the MCP conventions (`mcp.method.name`, with `gen_ai.tool.name` for `tools/call`);
 * - the Vercel AI SDK's own attributes (`ai.*`, AI SDK 4 to 6 `experimental_telemetry`, and
 *   `LegacyOpenTelemetry` in 7): `ai.operationId`, `ai.model.*`, `ai.usage.*`, `ai.toolCall.*`,
 *   `ai.prompt*`, `ai.response.*`;
 * - OpenInference (`openinference.span.kind`, `llm.token_count.*`, `llm.model_name`,
 *   `llm.input_messages.N.message.*`, `tool.name`, `input.value` / `output.value`);
 * - OpenLLMetry's older names (`llm.request.type`, `gen_ai.usage.prompt_tokens`,
 *   `gen_ai.prompt.N.*`, `traceloop.span.kind`, `traceloop.entity.*`).
 *
 * Only spans of one model call become `llm_call` events: a span that wraps a whole generation
 * (`ai.generateText`, `invoke_agent`, an OpenInference AGENT or CHAIN) carries the sum of its
 * calls' usage too, and counting both would count the tokens twice. Those become `custom` events.
 */

/** What the mapping made of a span: the event's type, its payload, and what feeds the totals. */
export interface Classified {
  type: EventType;
  payload: Record<string, unknown>;
  /** `llm_call` usage.totalTokens (0 for other types). */
  tokens: number;
  /** `llm_call` costUsd (0 for other types). */
  costUsd: number;
  /** `tool_call` name (feeds `toolsCalled`). */
  toolName?: string;
}

export interface SpanFacts {
  name: string;
  /** `internal`, `server`, `client`, `producer`, `consumer` or `unspecified`. */
  kind: string;
  attributes: Attributes;
  /** The resource's `service.name`, if any. */
  service: string | undefined;
}

/** GenAI operations that are one model call. */
const LLM_OPERATIONS = new Set(['chat', 'text_completion', 'generate_content', 'embeddings']);
/** AI SDK operations that are one model call (the `do*` spans inside a generation). */
const AI_SDK_MODEL_CALLS = new Set([
  'ai.generateText.doGenerate',
  'ai.streamText.doStream',
  'ai.generateObject.doGenerate',
  'ai.streamObject.doStream',
  'ai.embed.doEmbed',
  'ai.embedMany.doEmbed',
]);
const OPENINFERENCE_MODEL_CALLS = new Set(['LLM', 'EMBEDDING']);
const OPENLLMETRY_MODEL_CALLS = new Set(['chat', 'completion', 'embedding', 'rerank']);

/** Attributes whose values the payload carries elsewhere (messages, arguments, results). */
const CONTENT_KEYS = new Set([
  'gen_ai.input.messages',
  'gen_ai.output.messages',
  'gen_ai.system_instructions',
  'gen_ai.tool.call.arguments',
  'gen_ai.tool.call.result',
  'ai.prompt',
  'ai.prompt.messages',
  'ai.response.text',
  'ai.toolCall.args',
  'ai.toolCall.result',
  'input.value',
  'output.value',
  'traceloop.entity.input',
  'traceloop.entity.output',
]);
const CONTENT_PREFIX = /^(?:gen_ai\.(?:prompt|completion)|llm\.(?:input|output)_messages)\./;

/** Longest attribute text parsed as JSON (a message list, tool arguments). */
const MAX_JSON_TEXT = 1024 * 1024;

const text = (value: PlainValue | undefined): string | undefined =>
  typeof value === 'string' && value !== '' ? value : undefined;

/** A non-negative count or amount: a number, or a numeric string. */
function amount(value: PlainValue | undefined): number | undefined {
  const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
  return typeof n === 'number' && Number.isFinite(n) && n >= 0 ? n : undefined;
}

function firstAmount(attributes: Attributes, keys: readonly string[]): number | undefined {
  for (const key of keys) {
    const n = amount(attributes[key]);
    if (n !== undefined) return n;
  }
  return undefined;
}

function firstText(attributes: Attributes, keys: readonly string[]): string | undefined {
  for (const key of keys) {
    const t = text(attributes[key]);
    if (t !== undefined) return t;
  }
  return undefined;
}

/** JSON text (a message list, tool arguments) as its value; anything else as it is. */
export function jsonOrValue(value: PlainValue | undefined): unknown {
  if (typeof value !== 'string' || value.length > MAX_JSON_TEXT) return value;
  const start = value.trimStart()[0];
  if (start !== '{' && start !== '[' && start !== '"') return value;
  try {
    return JSON.parse(value) as unknown;
  } catch {
    return value;
  }
}

const stringify = (value: unknown): string => {
  if (typeof value === 'string') return value;
  try {
    return JSON.stringify(value) ?? '';
  } catch {
    return '';
  }
};

/** The text of message content in the shapes instrumentations write. */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content))
    return content === undefined || content === null ? '' : stringify(content);
  return content
    .map((part: unknown) => {
      if (typeof part === 'string') return part;
      if (part === null || typeof part !== 'object') return '';
      const p = part as Record<string, unknown>;
      const type = typeof p.type === 'string' ? p.type : '';
      // GenAI parts say `content`, the AI SDK's `text`
      if (type === 'text' || type === 'reasoning' || type === '')
        return typeof p.content === 'string' ? p.content : typeof p.text === 'string' ? p.text : '';
      const name = p.name ?? p.toolName;
      const args = p.arguments ?? p.input ?? p.args;
      const result = p.response ?? p.output ?? p.result;
      if (type === 'tool_call' || type === 'tool-call')
        return `[${type} ${String(name ?? '')}] ${stringify(args)}`.trim();
      if (type === 'tool_call_response' || type === 'tool-result')
        return `[${type}${name ? ` ${String(name)}` : ''}] ${stringify(result)}`.trim();
      return `[${type}]`;
    })
    .filter((part) => part !== '')
    .join('\n');
}

/** A list of messages (GenAI `parts`, AI SDK `content`) as `{role, content}` pairs. */
function messageList(value: unknown): LlmMessage[] | undefined {
  if (!Array.isArray(value)) return undefined;
  return value
    .filter((m): m is Record<string, unknown> => m !== null && typeof m === 'object')
    .map((m) => ({
      role: typeof m.role === 'string' ? m.role : 'user',
      content: contentText(m.parts ?? m.content),
    }));
}

/** Messages written one attribute per field: `prefix.N.role` and `prefix.N.content`. */
function indexedMessages(
  attributes: Attributes,
  prefix: string,
  roleKey: string,
  contentKey: string,
): LlmMessage[] | undefined {
  const messages: LlmMessage[] = [];
  for (let i = 0; i < 10_000; i++) {
    const role = attributes[`${prefix}.${i}.${roleKey}`];
    const content = attributes[`${prefix}.${i}.${contentKey}`];
    if (role === undefined && content === undefined) break;
    messages.push({
      role: typeof role === 'string' ? role : 'user',
      content: typeof content === 'string' ? content : stringify(content ?? ''),
    });
  }
  return messages.length > 0 ? messages : undefined;
}

function inputMessages(attributes: Attributes): LlmMessage[] | undefined {
  const system = jsonOrValue(attributes['gen_ai.system_instructions']);
  const genAi = messageList(jsonOrValue(attributes['gen_ai.input.messages']));
  if (genAi) {
    const instructions = system === undefined ? '' : contentText(system);
    return instructions ? [{ role: 'system', content: instructions }, ...genAi] : genAi;
  }
  return (
    messageList(jsonOrValue(attributes['ai.prompt.messages'])) ??
    indexedMessages(attributes, 'gen_ai.prompt', 'role', 'content') ??
    indexedMessages(attributes, 'llm.input_messages', 'message.role', 'message.content')
  );
}

/** `output`: the gen_ai.output.messages attribute, parsed (jsonOrValue). */
function outputMessages(attributes: Attributes, output: unknown): LlmMessage[] | undefined {
  return (
    messageList(output) ??
    indexedMessages(attributes, 'gen_ai.completion', 'role', 'content') ??
    indexedMessages(attributes, 'llm.output_messages', 'message.role', 'message.content')
  );
}

/** `messages`: the gen_ai.output.messages attribute, parsed (jsonOrValue). */
function finishReason(attributes: Attributes, messages: unknown): string {
  const reasons = attributes['gen_ai.response.finish_reasons'];
  if (Array.isArray(reasons) && typeof reasons[0] === 'string') return reasons[0];
  const parsed = jsonOrValue(reasons);
  if (Array.isArray(parsed) && typeof parsed[0] === 'string') return parsed[0];
  if (Array.isArray(messages)) {
    const last = messages[messages.length - 1] as Record<string, unknown> | undefined;
    if (typeof last?.finish_reason === 'string') return last.finish_reason;
  }
  return (
    firstText(attributes, [
      'ai.response.finishReason',
      'gen_ai.completion.0.finish_reason',
      'llm.output_messages.0.message.finish_reason',
    ]) ?? (typeof reasons === 'string' ? reasons : '')
  );
}

/** Attributes the payload does not already carry as messages, arguments or results. */
function otherAttributes(attributes: Attributes): Attributes {
  const rest: [string, PlainValue][] = [];
  for (const [key, value] of Object.entries(attributes))
    if (!CONTENT_KEYS.has(key) && !CONTENT_PREFIX.test(key)) rest.push([key, value]);
  // (fromEntries: a `__proto__` key stays an ordinary field)
  return Object.fromEntries(rest);
}

function llmCall(span: SpanFacts): Classified {
  const a = span.attributes;
  const inputTokens =
    firstAmount(a, [
      'gen_ai.usage.input_tokens',
      'gen_ai.usage.prompt_tokens',
      'ai.usage.inputTokens',
      'ai.usage.promptTokens',
      // the AI SDK's embedding calls
      'ai.usage.tokens',
      'llm.token_count.prompt',
      'llm.usage.prompt_tokens',
    ]) ?? 0;
  const outputTokens =
    firstAmount(a, [
      'gen_ai.usage.output_tokens',
      'gen_ai.usage.completion_tokens',
      'ai.usage.outputTokens',
      'ai.usage.completionTokens',
      'llm.token_count.completion',
      'llm.usage.completion_tokens',
    ]) ?? 0;
  const totalTokens =
    firstAmount(a, [
      'gen_ai.usage.total_tokens',
      'ai.usage.totalTokens',
      'llm.token_count.total',
      'llm.usage.total_tokens',
    ]) ?? inputTokens + outputTokens;
  // a cost only where the span states one: Flightlog keeps no price list of its own
  const costUsd =
    firstAmount(a, ['gen_ai.usage.cost', 'llm.cost.total', 'gen_ai.usage.cost_usd']) ?? 0;
  // parsed once: the messages and the finish reason are read from it
  const outputJson = jsonOrValue(a['gen_ai.output.messages']);
  const output = outputMessages(a, outputJson);
  const outputText =
    output?.map((m) => m.content).join('\n') ??
    firstText(a, ['ai.response.text']) ??
    (a['ai.response.object'] !== undefined ? stringify(a['ai.response.object']) : undefined) ??
    (a['openinference.span.kind'] === 'LLM' ? firstText(a, ['output.value']) : undefined) ??
    '';
  const operation = text(a['ai.operationId']) ?? '';
  const payload: Record<string, unknown> = {
    provider:
      firstText(a, [
        'gen_ai.provider.name',
        'gen_ai.system',
        'ai.model.provider',
        'llm.provider',
        'llm.system',
      ]) ?? 'unknown',
    model:
      firstText(a, [
        'gen_ai.response.model',
        'gen_ai.request.model',
        'ai.response.model',
        'ai.model.id',
        'llm.model_name',
      ]) ?? 'unknown',
    input: { messages: inputMessages(a) ?? [] },
    output: { content: outputText, finishReason: finishReason(a, outputJson) },
    usage: { inputTokens, outputTokens, totalTokens },
    costUsd,
    streamed:
      operation.endsWith('.doStream') ||
      a['gen_ai.request.stream'] === true ||
      a['llm.is_streaming'] === true ||
      a['llm.is_streaming'] === 'true',
    operation: text(a['gen_ai.operation.name']) ?? (operation || span.name),
    attributes: otherAttributes(a),
  };
  return { type: 'llm_call', payload, tokens: totalTokens, costUsd };
}

function toolCall(span: SpanFacts): Classified {
  const a = span.attributes;
  const name =
    firstText(a, ['gen_ai.tool.name', 'ai.toolCall.name', 'tool.name', 'traceloop.entity.name']) ??
    span.name;
  const input = a['gen_ai.tool.call.arguments'] ?? a['ai.toolCall.args'] ?? a['tool.parameters'];
  const output = a['gen_ai.tool.call.result'] ?? a['ai.toolCall.result'];
  const isOpenInference = a['openinference.span.kind'] === 'TOOL';
  const isTraceloop = a['traceloop.span.kind'] === 'tool';
  const payload: Record<string, unknown> = {
    name,
    ...(input !== undefined
      ? { input: jsonOrValue(input) }
      : isOpenInference && a['input.value'] !== undefined
        ? { input: jsonOrValue(a['input.value']) }
        : isTraceloop && a['traceloop.entity.input'] !== undefined
          ? { input: jsonOrValue(a['traceloop.entity.input']) }
          : {}),
    ...(output !== undefined
      ? { output: jsonOrValue(output) }
      : isOpenInference && a['output.value'] !== undefined
        ? { output: jsonOrValue(a['output.value']) }
        : isTraceloop && a['traceloop.entity.output'] !== undefined
          ? { output: jsonOrValue(a['traceloop.entity.output']) }
          : {}),
  };
  const callId = firstText(a, ['gen_ai.tool.call.id', 'ai.toolCall.id', 'tool_call.id']);
  if (callId) payload.callId = callId;
  payload.attributes = otherAttributes(a);
  return { type: 'tool_call', payload, tokens: 0, costUsd: 0, toolName: name };
}

function mcpCall(span: SpanFacts): Classified {
  const a = span.attributes;
  const address = text(a['server.address']);
  const port = amount(a['server.port']);
  const server =
    firstText(a, ['mcp.server.name']) ??
    (address ? (port === undefined ? address : `${address}:${port}`) : undefined) ??
    // on the server's own side of the call, the server is the service that reports it
    (span.kind === 'server' ? span.service : undefined) ??
    'unknown';
  const tool = firstText(a, ['gen_ai.tool.name', 'gen_ai.prompt.name']);
  const input = a['gen_ai.tool.call.arguments'];
  const output = a['gen_ai.tool.call.result'];
  const payload: Record<string, unknown> = {
    server,
    method: text(a['mcp.method.name']) ?? span.name,
    ...(tool ? { tool } : {}),
    ...(input !== undefined ? { input: jsonOrValue(input) } : {}),
    ...(output !== undefined ? { output: jsonOrValue(output) } : {}),
    attributes: otherAttributes(a),
  };
  return { type: 'mcp_call', payload, tokens: 0, costUsd: 0 };
}

function custom(span: SpanFacts): Classified {
  return {
    type: 'custom',
    payload: { name: span.name, data: span.attributes },
    tokens: 0,
    costUsd: 0,
  };
}

/** The event type and payload of a span (see the module comment for the precedence). */
export function classifySpan(span: SpanFacts): Classified {
  const a = span.attributes;
  // an MCP tools/call also says execute_tool and names the tool: it is the MCP call
  if (text(a['mcp.method.name'])) return mcpCall(span);
  const operation = text(a['gen_ai.operation.name']);
  if (operation !== undefined) {
    if (LLM_OPERATIONS.has(operation)) return llmCall(span);
    if (operation === 'execute_tool') return toolCall(span);
  }
  const aiOperation = text(a['ai.operationId']);
  if (aiOperation !== undefined) {
    if (AI_SDK_MODEL_CALLS.has(aiOperation)) return llmCall(span);
    if (aiOperation === 'ai.toolCall') return toolCall(span);
  }
  const openInference = text(a['openinference.span.kind']);
  if (openInference !== undefined) {
    if (OPENINFERENCE_MODEL_CALLS.has(openInference)) return llmCall(span);
    if (openInference === 'TOOL') return toolCall(span);
  }
  const requestType = text(a['llm.request.type']);
  if (requestType !== undefined && OPENLLMETRY_MODEL_CALLS.has(requestType) && !operation)
    return llmCall(span);
  if (a['traceloop.span.kind'] === 'tool') return toolCall(span);
  // a tool named without an operation (older GenAI instrumentations)
  if (operation === undefined && aiOperation === undefined && text(a['gen_ai.tool.name']))
    return toolCall(span);
  return custom(span);
}

function lastOfRole(messages: LlmMessage[] | undefined, role: string): string | undefined {
  if (!messages) return undefined;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as LlmMessage;
    if (m.role === role && m.content !== '') return m.content;
  }
  return undefined;
}

/**
 * What a run was asked, from its root span: `flightlog.input_summary` when the agent sets it,
 * else the last user message or prompt of the GenAI, AI SDK, OpenInference or OpenLLMetry
 * attributes; undefined when none is there (the caller falls back to the span name).
 */
export function inputSummaryOf(attributes: Attributes): string | undefined {
  const a = attributes;
  const explicit = firstText(a, ['flightlog.input_summary']);
  if (explicit) return explicit;
  const genAi = lastOfRole(messageList(jsonOrValue(a['gen_ai.input.messages'])), 'user');
  if (genAi) return genAi;
  const prompt = jsonOrValue(a['ai.prompt']);
  if (prompt !== null && typeof prompt === 'object' && !Array.isArray(prompt)) {
    const p = prompt as Record<string, unknown>;
    if (typeof p.prompt === 'string' && p.prompt !== '') return p.prompt;
    const fromMessages = lastOfRole(messageList(p.messages), 'user');
    if (fromMessages) return fromMessages;
  } else if (typeof prompt === 'string' && prompt !== '') return prompt;
  return (
    firstText(a, ['input.value', 'traceloop.entity.input']) ?? lastOfRole(inputMessages(a), 'user')
  );
}

/** What a run produced, from its root span's attributes; undefined when they do not say. */
export function outputSummaryOf(attributes: Attributes): string | undefined {
  const a = attributes;
  const explicit = firstText(a, ['flightlog.output_summary']);
  if (explicit) return explicit;
  const output = outputMessages(a, jsonOrValue(a['gen_ai.output.messages']));
  const last = output?.[output.length - 1]?.content;
  if (last) return last;
  return firstText(a, ['ai.response.text', 'output.value', 'traceloop.entity.output']);
}
