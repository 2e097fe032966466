import type { SseEvent, UpstreamReply } from './fake-llm-upstream.js';

/*
 * Bodies in the providers' wire formats, as their APIs send them (the fields the SDKs and the
 * instrumentations read, and a few more).
 */

export interface Usage {
  input: number;
  output: number;
  cached?: number;
}

export interface ToolCallSpec {
  id: string;
  name: string;
  arguments: string;
}

// ---- OpenAI chat completions ------------------------------------------------------------------

export function openAIChat(
  options: {
    content?: string | null;
    model?: string;
    usage?: Usage;
    toolCalls?: ToolCallSpec[];
    finishReason?: string;
  } = {},
): UpstreamReply {
  const usage = options.usage ?? { input: 12, output: 5 };
  return {
    json: {
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: 1_764_000_000,
      model: options.model ?? 'gpt-4o-mini-2024-07-18',
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: options.content === undefined ? 'Hello there' : options.content,
            refusal: null,
            ...(options.toolCalls === undefined
              ? {}
              : {
                  tool_calls: options.toolCalls.map((call) => ({
                    id: call.id,
                    type: 'function',
                    function: { name: call.name, arguments: call.arguments },
                  })),
                }),
          },
          logprobs: null,
          finish_reason: options.finishReason ?? (options.toolCalls ? 'tool_calls' : 'stop'),
        },
      ],
      usage: openAIUsage(usage),
    },
  };
}

function openAIUsage(usage: Usage) {
  return {
    prompt_tokens: usage.input,
    completion_tokens: usage.output,
    total_tokens: usage.input + usage.output,
    prompt_tokens_details: { cached_tokens: usage.cached ?? 0 },
  };
}

export function openAIChatStream(
  options: {
    pieces?: string[];
    model?: string;
    usage?: Usage | null;
    toolCalls?: ToolCallSpec[];
    gapMs?: number;
    hang?: boolean;
    /** Stop after this many events (a server that dies mid-stream, when with `hang`). */
    cut?: number;
  } = {},
): UpstreamReply {
  const model = options.model ?? 'gpt-4o-mini-2024-07-18';
  const chunk = (choices: unknown[], usage: unknown = null) => ({
    data: {
      id: 'chatcmpl-2',
      object: 'chat.completion.chunk',
      created: 1_764_000_000,
      model,
      choices,
      ...(options.usage === undefined || options.usage === null ? {} : { usage }),
    },
  });
  const events: SseEvent[] = [
    chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]),
  ];
  for (const piece of options.pieces ?? ['Hel', 'lo', ' there'])
    events.push(chunk([{ index: 0, delta: { content: piece }, finish_reason: null }]));
  for (const [index, call] of (options.toolCalls ?? []).entries()) {
    const half = Math.floor(call.arguments.length / 2);
    events.push(
      chunk([
        {
          index: 0,
          delta: {
            tool_calls: [
              {
                index,
                id: call.id,
                type: 'function',
                function: { name: call.name, arguments: call.arguments.slice(0, half) },
              },
            ],
          },
          finish_reason: null,
        },
      ]),
      chunk([
        {
          index: 0,
          delta: { tool_calls: [{ index, function: { arguments: call.arguments.slice(half) } }] },
          finish_reason: null,
        },
      ]),
    );
  }
  events.push(
    chunk([{ index: 0, delta: {}, finish_reason: options.toolCalls ? 'tool_calls' : 'stop' }]),
  );
  if (options.usage !== undefined && options.usage !== null)
    events.push(chunk([], openAIUsage(options.usage)));
  events.push({ data: '[DONE]' });
  return {
    sse: options.cut === undefined ? events : events.slice(0, options.cut),
    ...(options.gapMs === undefined ? {} : { gapMs: options.gapMs }),
    ...(options.hang === undefined ? {} : { hang: options.hang }),
  };
}

// ---- OpenAI responses -------------------------------------------------------------------------

function responseObject(options: {
  text: string;
  model: string;
  usage: Usage;
  toolCalls?: ToolCallSpec[];
  status?: string;
}) {
  return {
    id: 'resp_1',
    object: 'response',
    created_at: 1_764_000_000,
    status: options.status ?? 'completed',
    model: options.model,
    output: [
      {
        type: 'message',
        id: 'msg_1',
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text: options.text, annotations: [] }],
      },
      ...(options.toolCalls ?? []).map((call) => ({
        type: 'function_call',
        id: `fc_${call.id}`,
        call_id: call.id,
        name: call.name,
        arguments: call.arguments,
        status: 'completed',
      })),
    ],
    usage: {
      input_tokens: options.usage.input,
      input_tokens_details: { cached_tokens: options.usage.cached ?? 0 },
      output_tokens: options.usage.output,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: options.usage.input + options.usage.output,
    },
    error: null,
    incomplete_details: null,
  };
}

export function openAIResponse(
  options: { text?: string; model?: string; usage?: Usage; toolCalls?: ToolCallSpec[] } = {},
): UpstreamReply {
  return {
    json: responseObject({
      text: options.text ?? 'Hi from responses',
      model: options.model ?? 'gpt-4.1-2025-04-14',
      usage: options.usage ?? { input: 20, output: 8 },
      ...(options.toolCalls === undefined ? {} : { toolCalls: options.toolCalls }),
    }),
  };
}

export function openAIResponseStream(
  options: { pieces?: string[]; model?: string; usage?: Usage } = {},
): UpstreamReply {
  const pieces = options.pieces ?? ['Hi ', 'from ', 'responses'];
  const model = options.model ?? 'gpt-4.1-2025-04-14';
  const final = responseObject({
    text: pieces.join(''),
    model,
    usage: options.usage ?? { input: 20, output: 8 },
  });
  const events: SseEvent[] = [
    {
      event: 'response.created',
      data: {
        type: 'response.created',
        sequence_number: 0,
        response: { ...final, status: 'in_progress', output: [], usage: null },
      },
    },
  ];
  pieces.forEach((delta, i) =>
    events.push({
      event: 'response.output_text.delta',
      data: {
        type: 'response.output_text.delta',
        sequence_number: i + 1,
        item_id: 'msg_1',
        output_index: 0,
        content_index: 0,
        delta,
      },
    }),
  );
  events.push({
    event: 'response.completed',
    data: { type: 'response.completed', sequence_number: pieces.length + 1, response: final },
  });
  return { sse: events };
}

// ---- OpenAI embeddings ------------------------------------------------------------------------

export function openAIEmbeddings(
  count: number,
  dimensions = 4,
  tokens = 6,
  encoding?: string,
): UpstreamReply {
  const vector = (index: number) =>
    Array.from({ length: dimensions }, (_, d) => (index + 1) / (d + 2));
  return {
    json: {
      object: 'list',
      model: 'text-embedding-3-small',
      data: Array.from({ length: count }, (_, index) => ({
        object: 'embedding',
        index,
        embedding:
          encoding === 'base64'
            ? Buffer.from(new Float32Array(vector(index)).buffer).toString('base64')
            : vector(index),
      })),
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    },
  };
}

export function openAIError(status: number, message: string): UpstreamReply {
  return {
    status,
    json: { error: { message, type: 'invalid_request_error', param: null, code: null } },
  };
}

// ---- Anthropic messages -----------------------------------------------------------------------

export interface AnthropicUsage {
  input: number;
  output: number;
  cacheRead?: number;
  cacheWrite?: number;
}

export function anthropicMessage(
  options: {
    text?: string;
    model?: string;
    usage?: AnthropicUsage;
    toolUse?: { id: string; name: string; input: unknown }[];
  } = {},
): UpstreamReply {
  const usage = options.usage ?? { input: 15, output: 7 };
  return {
    json: {
      id: 'msg_01',
      type: 'message',
      role: 'assistant',
      model: options.model ?? 'claude-sonnet-4-5-20250929',
      content: [
        { type: 'text', text: options.text ?? 'Bonjour' },
        ...(options.toolUse ?? []).map((use) => ({ type: 'tool_use', ...use })),
      ],
      stop_reason: options.toolUse ? 'tool_use' : 'end_turn',
      stop_sequence: null,
      usage: {
        input_tokens: usage.input,
        output_tokens: usage.output,
        cache_read_input_tokens: usage.cacheRead ?? 0,
        cache_creation_input_tokens: usage.cacheWrite ?? 0,
      },
    },
  };
}

export function anthropicStream(
  options: {
    pieces?: string[];
    model?: string;
    usage?: AnthropicUsage;
    toolUse?: { id: string; name: string; json: string };
    gapMs?: number;
    hang?: boolean;
    cut?: number;
  } = {},
): UpstreamReply {
  const usage = options.usage ?? { input: 15, output: 7 };
  const pieces = options.pieces ?? ['Bon', 'jour'];
  const events: SseEvent[] = [
    {
      event: 'message_start',
      data: {
        type: 'message_start',
        message: {
          id: 'msg_02',
          type: 'message',
          role: 'assistant',
          model: options.model ?? 'claude-sonnet-4-5-20250929',
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: {
            input_tokens: usage.input,
            output_tokens: 1,
            cache_read_input_tokens: usage.cacheRead ?? 0,
            cache_creation_input_tokens: usage.cacheWrite ?? 0,
          },
        },
      },
    },
    {
      event: 'content_block_start',
      data: { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
    },
    ...pieces.map((text) => ({
      event: 'content_block_delta',
      data: { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } },
    })),
    { event: 'content_block_stop', data: { type: 'content_block_stop', index: 0 } },
  ];
  if (options.toolUse !== undefined) {
    const { id, name, json } = options.toolUse;
    const half = Math.floor(json.length / 2);
    events.push(
      {
        event: 'content_block_start',
        data: {
          type: 'content_block_start',
          index: 1,
          content_block: { type: 'tool_use', id, name, input: {} },
        },
      },
      {
        event: 'content_block_delta',
        data: {
          type: 'content_block_delta',
          index: 1,
          delta: { type: 'input_json_delta', partial_json: json.slice(0, half) },
        },
      },
      {
        event: 'content_block_delta',
        data: {
          type: 'content_block_delta',
          index: 1,
          delta: { type: 'input_json_delta', partial_json: json.slice(half) },
        },
      },
      { event: 'content_block_stop', data: { type: 'content_block_stop', index: 1 } },
    );
  }
  events.push(
    {
      event: 'message_delta',
      data: {
        type: 'message_delta',
        delta: { stop_reason: options.toolUse ? 'tool_use' : 'end_turn', stop_sequence: null },
        usage: { output_tokens: usage.output },
      },
    },
    { event: 'message_stop', data: { type: 'message_stop' } },
  );
  return {
    sse: options.cut === undefined ? events : events.slice(0, options.cut),
    ...(options.gapMs === undefined ? {} : { gapMs: options.gapMs }),
    ...(options.hang === undefined ? {} : { hang: options.hang }),
  };
}

export function anthropicError(status: number, message: string): UpstreamReply {
  return {
    status,
    json: { type: 'error', error: { type: 'invalid_request_error', message } },
  };
}
