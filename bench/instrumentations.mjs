// Instrumentation benchmark: what wrapping an SDK client costs a call, against the same call on
// the unwrapped client, in the same run.
//
//   http     the OpenAI SDK (`openai`) and the Anthropic SDK (`@anthropic-ai/sdk`) calling a fake
//            provider in a child process over loopback HTTP (it answers OpenAI's chat completions
//            and Anthropic's messages, JSON or SSE, by path): plain calls, and streamed ones
//            (12 text pieces, read to the end), unwrapped vs wrapped with observeOpenAI /
//            observeAnthropic. The fake provider runs in its own process so that its work is not
//            counted in the host's. Figure: the ratio of the medians, and the difference in µs.
//   sdk      the same OpenAI calls with the SDK's `fetch` option answering from memory (no
//            socket): the call is then the SDK's own work only (request building, parsing), so
//            the instrumentation's absolute cost per call shows with little network noise.
//   mcp      an MCP tool call (`@modelcontextprotocol/sdk`'s Client, callTool) to a real
//            McpServer in this process over the SDK's InMemoryTransport, unwrapped vs wrapped
//            with observeMcpClient: a wrapper that is not a model's.
//
// A third side in each scenario: the unwrapped client with the same event recorded by hand
// (session.llmCall / session.mcpCall after each call). Wrapped minus by-hand is the
// instrumentation's own work; by-hand minus unwrapped is what recording an event costs the client
// anyway (the payload copy, and at flush time serialisation, gzip and the garbage they leave).
//
// Before/after in one run: BENCH_BASELINE_CLIENT=<dir> adds a fourth side, the client wrapped by
// another build of @flightlog/client (a directory inside this repository holding that build's
// `dist/` and `package.json`, e.g. `git stash && npm run build && cp -r packages/client
// node_modules/.baseline-client && git stash pop && npm run build`), recording into a client of
// that build: the figures then say what a change gained, under the same load.
//
// Each scenario runs BENCH_CALLS (500) sequential calls per side and round, in 10 short batches,
// the sides in rotating order, over BENCH_ROUNDS (7) rounds after a warm-up; the figures are
// medians of the per-batch µs/call, wall-clock and CPU time of this process (user + system: what
// the host's threads spend, the flush's gzip on libuv's pool included; less disturbed than
// wall-clock by other processes on a busy machine). A side that records flushes its client at the
// end of each of its batches, inside the batch's time, so its events' serialisation and gzip are
// counted on that side (with a flush timer they land in whatever batch runs when it fires). The
// load average is recorded before and after. The recording sides record into real
// FlightlogClients whose transport answers 202 at once (their events are serialised, gzipped and
// handed over as in real use; nothing goes over the network).
// BENCH_SCENARIOS=openai,anthropic,mcp (default: all) picks families.
//
// Prints a table and writes bench/results/instrumentations-latest.json. Targets: a wrapped call
// costs < 5 % more than the unwrapped one, and < 20 µs more.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import Anthropic from '@anthropic-ai/sdk';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import OpenAI from 'openai';
import { z } from 'zod';
import {
  envNumber,
  machineInfo,
  median,
  seededRandom,
  textTable,
  writeJsonAtomic,
} from './support.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CALLS = envNumber('BENCH_CALLS', 500, 20, 100_000);
const ROUNDS = envNumber('BENCH_ROUNDS', 7, 1, 100);
/** Batches per round: each round is BENCH_CALLS calls per side, in this many alternating batches. */
const BATCHES = 10;
/** Calls per side of the per-call measure (timeEachCall), after a warm-up. */
const EACH_CALL_PAIRS = envNumber('BENCH_EACH_CALLS', 3000, 20, 1_000_000);

/*
 * A fixed piece of work (four JSON.stringify of a model call's payload), timed here in a hot loop
 * and, in the per-call measure, right after an unwrapped call: the ratio says how much slower the
 * same code runs once the call's result comes in (after a socket wait the caches are cold), so
 * that the instrumentation's added time can be read against it.
 */
const FIXED_WORK_PAYLOAD = {
  provider: 'openai',
  model: 'gpt-4o-mini',
  input: {
    messages: [
      { role: 'system', content: 'You are a trading agent. Answer in one line.' },
      { role: 'user', content: 'Quote 1 SOL in USDC on Jupiter and tell me the best route.' },
    ],
  },
  output: { content: 'Route: SOL → USDC via Orca, 148.21 USDC.', finishReason: 'stop' },
};
let fixedWorkSink = 0;
function fixedWork() {
  for (let k = 0; k < 4; k++) fixedWorkSink += JSON.stringify(FIXED_WORK_PAYLOAD).length;
}
/** µs of one fixedWork() in a hot loop: the median of 21 timings of 2,000. */
const FIXED_WORK_HOT_US = (() => {
  for (let i = 0; i < 20_000; i++) fixedWork();
  const times = [];
  for (let round = 0; round < 21; round++) {
    const t0 = performance.now();
    for (let i = 0; i < 2_000; i++) fixedWork();
    times.push(((performance.now() - t0) * 1000) / 2_000);
  }
  return /** @type {number} */ (median(times));
})();
const FAMILIES = (process.env.BENCH_SCENARIOS ?? 'openai,anthropic,mcp')
  .split(',')
  .map((f) => f.trim());

/**
 * What the benchmark uses of a build of @flightlog/client. A baseline build is typed as this
 * checkout's: it is an older version of the same API.
 * @typedef {object} ClientBuild
 * @property {typeof import('@flightlog/client').FlightlogClient} FlightlogClient
 * @property {typeof import('@flightlog/client/openai').observeOpenAI} observeOpenAI
 * @property {typeof import('@flightlog/client/anthropic').observeAnthropic} observeAnthropic
 * @property {typeof import('@flightlog/client/mcp').observeMcpClient} observeMcpClient
 */
/** @typedef {import('@flightlog/client').FlightlogSession} Session */

/**
 * A build of the client: this checkout's, or the baseline's (BENCH_BASELINE_CLIENT).
 * @param {string} dir
 * @returns {Promise<ClientBuild>}
 */
async function loadBuild(dir) {
  const at = (/** @type {string} */ path) => import(pathToFileURL(join(dir, 'dist', path)).href);
  const [core, openai, anthropic, mcp] =
    /** @type {[typeof import('@flightlog/client'), typeof import('@flightlog/client/openai'),
     *   typeof import('@flightlog/client/anthropic'), typeof import('@flightlog/client/mcp')]} */ (
      await Promise.all([
        at('index.js'),
        at('instrumentations/openai.js'),
        at('instrumentations/anthropic.js'),
        at('instrumentations/mcp.js'),
      ])
    );
  return {
    FlightlogClient: core.FlightlogClient,
    observeOpenAI: openai.observeOpenAI,
    observeAnthropic: anthropic.observeAnthropic,
    observeMcpClient: mcp.observeMcpClient,
  };
}
const CURRENT = await loadBuild(join(ROOT, 'packages/client'));
const BASELINE_DIR = process.env.BENCH_BASELINE_CLIENT?.trim()
  ? resolve(process.env.BENCH_BASELINE_CLIENT)
  : undefined;
const BASELINE = BASELINE_DIR === undefined ? undefined : await loadBuild(BASELINE_DIR);

/**
 * A tuple, so that the system prompt and the user message each keep their role (Anthropic takes
 * the system prompt apart).
 * @type {[{ role: 'system', content: string }, { role: 'user', content: string }]}
 */
const MESSAGES = [
  { role: 'system', content: 'You are a trading agent. Answer in one line.' },
  { role: 'user', content: 'Quote 1 SOL in USDC on Jupiter and tell me the best route.' },
];
const COMPLETION = JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion',
  created: 1_764_000_000,
  model: 'gpt-4o-mini-2024-07-18',
  choices: [
    {
      index: 0,
      message: { role: 'assistant', content: 'Route: SOL → USDC via Orca, 148.21 USDC.' },
      finish_reason: 'stop',
      logprobs: null,
    },
  ],
  usage: { prompt_tokens: 41, completion_tokens: 14, total_tokens: 55 },
});
const PIECES = [
  'Route',
  ':',
  ' SOL',
  ' →',
  ' USDC',
  ' via',
  ' Orca',
  ',',
  ' 148',
  '.21',
  ' USDC',
  '.',
];
/** @typedef {import('openai/resources/completions').CompletionUsage} OpenAIUsage */
/**
 * One event of OpenAI's chat completion stream: a delta, or (with `usage`) the final usage.
 * @param {{ content?: string } | null} delta
 * @param {string | null} [finish]
 * @param {OpenAIUsage} [usage]
 */
const chunk = (delta, finish = null, usage) =>
  `data: ${JSON.stringify({
    id: 'chatcmpl-bench',
    object: 'chat.completion.chunk',
    created: 1_764_000_000,
    model: 'gpt-4o-mini-2024-07-18',
    choices: usage ? [] : [{ index: 0, delta, finish_reason: finish }],
    ...(usage ? { usage } : {}),
  })}\n\n`;
const STREAM =
  PIECES.map((content) => chunk({ content })).join('') +
  chunk({}, 'stop') +
  chunk(null, null, { prompt_tokens: 41, completion_tokens: 12, total_tokens: 53 }) +
  'data: [DONE]\n\n';

/** Anthropic's Messages API: the same answer, as one message and as its event stream. */
const ANTHROPIC_MODEL = 'claude-haiku-4-5-20251001';
const ANTHROPIC_MESSAGE = JSON.stringify({
  id: 'msg_bench',
  type: 'message',
  role: 'assistant',
  model: ANTHROPIC_MODEL,
  content: [{ type: 'text', text: PIECES.join('') }],
  stop_reason: 'end_turn',
  stop_sequence: null,
  usage: {
    input_tokens: 41,
    output_tokens: 14,
    cache_read_input_tokens: 0,
    cache_creation_input_tokens: 0,
  },
});
/**
 * One event of Anthropic's Messages stream.
 * @param {string} event
 * @param {Record<string, unknown>} data
 */
const sse = (event, data) =>
  `event: ${event}\ndata: ${JSON.stringify({ type: event, ...data })}\n\n`;
const ANTHROPIC_STREAM =
  sse('message_start', {
    message: {
      id: 'msg_bench',
      type: 'message',
      role: 'assistant',
      model: ANTHROPIC_MODEL,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: {
        input_tokens: 41,
        output_tokens: 1,
        cache_read_input_tokens: 0,
        cache_creation_input_tokens: 0,
      },
    },
  }) +
  sse('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }) +
  PIECES.map((text) =>
    sse('content_block_delta', { index: 0, delta: { type: 'text_delta', text } }),
  ).join('') +
  sse('content_block_stop', { index: 0 }) +
  sse('message_delta', {
    delta: { stop_reason: 'end_turn', stop_sequence: null },
    usage: { output_tokens: 12 },
  }) +
  sse('message_stop', {});

/**
 * What the fake provider answers: by API (the path) and by the request's `stream`.
 * @param {string} path
 * @param {boolean} streamed
 * @returns {{ body: string, type: string }}
 */
function answer(path, streamed) {
  const anthropic = path.endsWith('/messages');
  const body = anthropic
    ? streamed
      ? ANTHROPIC_STREAM
      : ANTHROPIC_MESSAGE
    : streamed
      ? STREAM
      : COMPLETION;
  return { body, type: streamed ? 'text/event-stream' : 'application/json' };
}

/** The fake provider, in a child process (the same `answer`). */
const PROVIDER = `
const http = require('node:http');
const COMPLETION = ${JSON.stringify(COMPLETION)};
const STREAM = ${JSON.stringify(STREAM)};
const ANTHROPIC_MESSAGE = ${JSON.stringify(ANTHROPIC_MESSAGE)};
const ANTHROPIC_STREAM = ${JSON.stringify(ANTHROPIC_STREAM)};
const answer = ${answer.toString()};
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const { body, type } = answer(req.url, Buffer.concat(chunks).includes('"stream":true'));
    res.writeHead(200, { 'content-type': type });
    res.end(body);
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));
`;

async function startProvider() {
  const child = spawn(process.execPath, ['-e', PROVIDER], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = await once(child.stdout, 'data');
  return { url: `http://127.0.0.1:${String(line).trim()}`, child };
}

/**
 * A fetch answering from memory, as the provider would: the SDK's own work only.
 * @returns {typeof globalThis.fetch}
 */
function memoryFetch() {
  return async (url, init) => {
    const { body, type } = answer(
      new URL(String(url)).pathname,
      String(init?.body ?? '').includes('"stream":true'),
    );
    return new globalThis.Response(body, { status: 200, headers: { 'content-type': type } });
  };
}

/** @type {import('@flightlog/client').TransportOutcome} */
const OK = { kind: 'ok', status: 202, replayed: false, verify: null };

/**
 * A client that records (its transport answers at once) and the session it records into.
 * @typedef {{ client: import('@flightlog/client').FlightlogClient, session: Session }} Recording
 */

/**
 * @param {ClientBuild} [build]
 * @param {'batch' | 'timer'} [flushes] `batch`: flushed at the end of each batch of its side (see
 *   timeCalls), not by the timer; `timer`: by the client's own timer, as in real use (see
 *   timeEachCall)
 * @returns {Recording}
 */
function recordingClient(build = CURRENT, flushes = 'batch') {
  const client = new build.FlightlogClient(
    {
      apiKey: 'bench',
      flushOnExit: false,
      ...(flushes === 'batch' ? { flushIntervalMs: 3_600_000 } : {}),
      logger: { warn() {} },
    },
    { transport: { sendBatch: async () => OK, complete: async () => OK } },
  );
  return { client, session: client.startSession({ inputSummary: 'instrumentation benchmark' }) };
}

/**
 * The payload of a model call recorded by hand, as an agent did before the instrumentations.
 * @param {string} provider
 * @param {string} model
 * @param {string} content
 * @param {string} finishReason
 * @param {{ input: number, output: number }} usage
 * @param {boolean} streamed
 * @returns {import('@flightlog/client').LlmCallPayload}
 */
function llmByHand(provider, model, content, finishReason, usage, streamed) {
  return {
    provider,
    model,
    input: { messages: MESSAGES },
    output: { content, finishReason },
    usage: {
      inputTokens: usage.input,
      outputTokens: usage.output,
      totalTokens: usage.input + usage.output,
    },
    costUsd: 0.0000147,
    streamed,
  };
}

/**
 * One family of calls: how to make the SDK client, wrap it with a build of the instrumentation,
 * call it, and make the same call with the event recorded by hand (the by-hand side: the
 * difference to the wrapped client is the instrumentation's own work; the rest is what recording
 * an event costs the client anyway).
 *
 * Methods rather than function properties: their parameters are then checked bivariantly, so a
 * Kit<OpenAI> is also a Kit<unknown>, which is all `scenario` needs (it only hands back to a
 * kit the clients that kit made).
 * @template C the SDK client
 * @typedef {{
 *   make(): C | Promise<C>,
 *   wrap(build: ClientBuild, sdk: C, session: Session): C,
 *   call(sdk: C): Promise<unknown>,
 *   byHand(sdk: C, session: Session): Promise<void>,
 * }} Kit
 */

/** @typedef {'plain' | 'stream'} CallKind */
/**
 * Where an SDK client sends: the fake provider, or memory (`fetch`).
 * @typedef {{ baseURL: string, fetch?: typeof globalThis.fetch }} SdkOptions
 */
/** @typedef {import('openai/resources/chat/completions').ChatCompletion.Choice} OpenAIChoice */

/**
 * @param {SdkOptions} options
 * @param {CallKind} kind
 * @returns {Kit<OpenAI>}
 */
const OPENAI = (options, kind) => ({
  make: () => new OpenAI({ apiKey: 'sk-bench', maxRetries: 0, ...options }),
  wrap: (build, sdk, session) => build.observeOpenAI(sdk, session),
  call:
    kind === 'plain'
      ? (openai) => openai.chat.completions.create({ model: 'gpt-4o-mini', messages: MESSAGES })
      : async (openai) => {
          const stream = await openai.chat.completions.create({
            model: 'gpt-4o-mini',
            messages: MESSAGES,
            stream: true,
            stream_options: { include_usage: true },
          });
          for await (const chunk of stream) void chunk;
        },
  byHand:
    kind === 'plain'
      ? async (openai, session) => {
          const startedAt = new Date();
          const r = await openai.chat.completions.create({
            model: 'gpt-4o-mini',
            messages: MESSAGES,
          });
          // The fake provider answers one choice, with content, and the usage.
          session.llmCall(
            llmByHand(
              'openai',
              r.model,
              /** @type {string} */ (/** @type {OpenAIChoice} */ (r.choices[0]).message.content),
              /** @type {OpenAIChoice} */ (r.choices[0]).finish_reason,
              {
                input: /** @type {OpenAIUsage} */ (r.usage).prompt_tokens,
                output: /** @type {OpenAIUsage} */ (r.usage).completion_tokens,
              },
              false,
            ),
            { startedAt, endedAt: new Date() },
          );
        }
      : async (openai, session) => {
          const startedAt = new Date();
          const stream = await openai.chat.completions.create({
            model: 'gpt-4o-mini',
            messages: MESSAGES,
            stream: true,
            stream_options: { include_usage: true },
          });
          let content = '';
          /** @type {OpenAIUsage | undefined} */
          let usage;
          let finishReason = '';
          for await (const chunk of stream) {
            content += chunk.choices[0]?.delta?.content ?? '';
            finishReason = chunk.choices[0]?.finish_reason ?? finishReason;
            usage = chunk.usage ?? usage;
          }
          session.llmCall(
            llmByHand(
              'openai',
              'gpt-4o-mini-2024-07-18',
              content,
              finishReason,
              // include_usage: the stream's last chunk has it
              {
                input: /** @type {OpenAIUsage} */ (usage).prompt_tokens,
                output: /** @type {OpenAIUsage} */ (usage).completion_tokens,
              },
              true,
            ),
            { startedAt, endedAt: new Date() },
          );
        },
});

/** @typedef {import('@anthropic-ai/sdk/resources/messages').TextBlock} TextBlock */

/** @type {import('@anthropic-ai/sdk/resources/messages').MessageCreateParamsNonStreaming} */
const ANTHROPIC_REQUEST = {
  model: 'claude-haiku-4-5',
  max_tokens: 256,
  system: MESSAGES[0].content,
  messages: [MESSAGES[1]],
};
/**
 * @param {SdkOptions} options
 * @param {CallKind} kind
 * @returns {Kit<Anthropic>}
 */
const ANTHROPIC = (options, kind) => ({
  make: () => new Anthropic({ apiKey: 'sk-ant-bench', maxRetries: 0, ...options }),
  wrap: (build, sdk, session) => build.observeAnthropic(sdk, session),
  call:
    kind === 'plain'
      ? (anthropic) => anthropic.messages.create(ANTHROPIC_REQUEST)
      : async (anthropic) => {
          const stream = await anthropic.messages.create({ ...ANTHROPIC_REQUEST, stream: true });
          for await (const event of stream) void event;
        },
  byHand:
    kind === 'plain'
      ? async (anthropic, session) => {
          const startedAt = new Date();
          const m = await anthropic.messages.create(ANTHROPIC_REQUEST);
          session.llmCall(
            llmByHand(
              'anthropic',
              m.model,
              // the fake provider answers one text block, and why it stopped
              /** @type {TextBlock} */ (m.content[0]).text,
              /** @type {string} */ (m.stop_reason),
              { input: m.usage.input_tokens, output: m.usage.output_tokens },
              false,
            ),
            { startedAt, endedAt: new Date() },
          );
        }
      : async (anthropic, session) => {
          const startedAt = new Date();
          const stream = await anthropic.messages.create({ ...ANTHROPIC_REQUEST, stream: true });
          let content = '';
          let model = '';
          let input = 0;
          let output = 0;
          let stop = '';
          for await (const event of stream) {
            if (event.type === 'message_start') {
              model = event.message.model;
              input = event.message.usage.input_tokens;
            } else if (event.type === 'content_block_delta' && event.delta.type === 'text_delta')
              content += event.delta.text;
            else if (event.type === 'message_delta') {
              stop = event.delta.stop_reason ?? stop;
              output = event.usage.output_tokens;
            }
          }
          session.llmCall(llmByHand('anthropic', model, content, stop, { input, output }, true), {
            startedAt,
            endedAt: new Date(),
          });
        },
});

/** @typedef {{ client: McpClient, server: McpServer | undefined }} McpPair */

/**
 * A real MCP server in this process, and a client linked to it over the in-memory transport.
 * @returns {Promise<McpPair>}
 */
async function mcpPair() {
  const server = new McpServer({ name: 'solana-mcp', version: '1.0.0' });
  server.registerTool(
    'get_balance',
    { description: 'Balance of a wallet', inputSchema: { wallet: z.string() } },
    async ({ wallet }) => ({ content: [{ type: 'text', text: `${wallet}: 2.5 SOL` }] }),
  );
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new McpClient({ name: 'bench-agent', version: '1.0.0' });
  await client.connect(clientSide);
  return { client, server };
}
/** The same MCP server in a child process, over stdio: how MCP servers are usually run. */
const MCP_STDIO_SERVER = `
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';
const server = new McpServer({ name: 'solana-mcp', version: '1.0.0' });
server.registerTool(
  'get_balance',
  { description: 'Balance of a wallet', inputSchema: { wallet: z.string() } },
  async ({ wallet }) => ({ content: [{ type: 'text', text: wallet + ': 2.5 SOL' }] }),
);
await server.connect(new StdioServerTransport());
`;

/**
 * A client linked to the MCP server in a child process over stdio.
 * @returns {Promise<McpClient>}
 */
async function mcpStdioClient() {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ['--input-type=module', '-e', MCP_STDIO_SERVER],
    cwd: ROOT,
    stderr: 'inherit',
  });
  const client = new McpClient({ name: 'bench-agent', version: '1.0.0' });
  await client.connect(transport);
  return client;
}
const TOOL_CALL = {
  name: 'get_balance',
  arguments: { wallet: 'Agent1111111111111111111111111111111111111' },
};
/**
 * @param {McpPair[]} pairs where the pairs made go, to be closed at the end
 * @param {'memory' | 'stdio'} link the in-memory transport to a server of this process, or stdio
 *   to one in a child process
 * @returns {Kit<McpClient>}
 */
const MCP = (pairs, link) => ({
  make: async () => {
    const pair =
      link === 'memory'
        ? await mcpPair()
        : {
            client: await mcpStdioClient(),
            server: /** @type {McpServer | undefined} */ (undefined),
          };
    pairs.push(pair);
    return pair.client;
  },
  wrap: (build, sdk, session) => build.observeMcpClient(sdk, session),
  call: (client) => client.callTool(TOOL_CALL),
  byHand: async (client, session) => {
    const startedAt = new Date();
    const result = await client.callTool(TOOL_CALL);
    session.mcpCall(
      {
        server: 'solana-mcp',
        method: 'tools/call',
        tool: TOOL_CALL.name,
        input: TOOL_CALL.arguments,
        output: result,
      },
      { startedAt, endedAt: new Date() },
    );
  },
});

/** One call of a side. @typedef {() => Promise<unknown>} Call */
/** µs per call of one batch. @typedef {{ wall: number, cpu: number }} Timing */

/**
 * Wall-clock and CPU (this process: user + system) µs per call of `calls` sequential calls, then
 * the flush of what they recorded (`recording`, its client's buffer sent, gzip on libuv's pool
 * included): each side pays for its own events in its own batches, instead of in whichever
 * batch a flush timer happened to fire.
 * @param {Call} call
 * @param {number} calls
 * @param {Recording | undefined} recording
 * @returns {Promise<Timing>}
 */
async function timeCalls(call, calls, recording) {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < calls; i++) await call();
  if (recording !== undefined) await recording.client.flush();
  const wall = ((performance.now() - t0) * 1000) / calls;
  const { user, system } = process.cpuUsage(cpu0);
  return { wall, cpu: (user + system) / calls };
}

/**
 * The caller's view, one call at a time: every side's call once per round, in an order shuffled
 * anew each round (seeded), `pairs` rounds, each call timed alone from the call to its result
 * read whole (a stream to its end), wall-clock and this process's CPU. The shuffle matters: in a
 * fixed rotation each side always follows the same one and pays for what that one left behind
 * (its garbage, its promise chains' tails), which made two identical sides differ by 12–19 µs
 * over loopback HTTP. Each side's recording client flushes on its own timer, as in real use, so a
 * flush (serialisation, gzip, the garbage they leave) lands inside whichever call is under way
 * when it fires, on any side. The figure is the median of the per-call differences between sides
 * of the same round: what one call waits for the instrumentation, typically; a call a flush or a
 * collection fell into is an outlier of the distribution, on every side alike (its cost per event
 * is the batch figures').
 * @param {Partial<Record<Side, Call>>} sides
 * @param {number} pairs
 * @returns {Promise<Record<Side, Timing[]>>}
 */
async function timeEachCall(sides, pairs) {
  const names = /** @type {Side[]} */ (Object.keys(sides));
  const runs = /** @type {Record<Side, Timing[]>} */ (
    Object.fromEntries(names.map((side) => [side, /** @type {Timing[]} */ ([])]))
  );
  const random = seededRandom(0x9e3779b9);
  const order = [...names];
  for (let i = 0; i < pairs; i++) {
    for (let k = order.length - 1; k > 0; k--) {
      const r = Math.floor(random() * (k + 1));
      [order[k], order[r]] = [/** @type {Side} */ (order[r]), /** @type {Side} */ (order[k])];
    }
    for (const side of order) {
      const call = /** @type {Call} */ (sides[side]);
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      await call();
      const wall = (performance.now() - t0) * 1000;
      const { user, system } = process.cpuUsage(cpu0);
      runs[side].push({ wall, cpu: user + system });
    }
  }
  return runs;
}

/**
 * The median of the differences of two sides' k-th measurements (batches or calls run back to
 * back), which cancels the drift of the machine between them; the difference of two medians
 * keeps it (a call over loopback swings by tens of µs from one second to the next).
 * @param {Record<Side, Timing[]>} runs
 * @param {Side} side
 * @param {Side} base
 * @param {keyof Timing} of
 */
function pairedDifference(runs, side, base, of) {
  return /** @type {number} */ (
    median(runs[side].map((r, k) => r[of] - /** @type {Timing} */ (runs[base][k])[of]))
  );
}

/**
 * The sides compared; `baseline` only with BENCH_BASELINE_CLIENT.
 * Per call only: `plainAgain`, a second unwrapped client, whose difference to `plain` is the
 * measure's own noise; `plainThenWork`, an unwrapped call followed by fixedWork().
 * @typedef {'plain' | 'plainAgain' | 'plainThenWork' | 'byHand' | 'wrapped' | 'baseline'} Side
 */
/** @typedef {'http' | 'stdio' | 'memory'} Transport */

/**
 * One scenario's figures: medians of the batches, in µs per call; the baseline's only with
 * BENCH_BASELINE_CLIENT.
 * @typedef {object} ScenarioResult
 * @property {string} name
 * @property {Transport} transport
 * @property {number} callsPerRound
 * @property {number} rounds
 * @property {number} plainUsPerCall
 * @property {number} byHandUsPerCall
 * @property {number} wrappedUsPerCall
 * @property {number} overheadUsPerCall
 * @property {number} ratio
 * @property {number} plainCpuUsPerCall
 * @property {number} byHandCpuUsPerCall
 * @property {number} wrappedCpuUsPerCall
 * @property {number} overheadCpuUsPerCall
 * @property {number} instrumentationCpuUsPerCall
 * @property {number} cpuRatio
 * @property {number} recordedEvents
 * @property {number} [baselineUsPerCall]
 * @property {number} [baselineCpuUsPerCall]
 * @property {number} [baselineOverheadCpuUsPerCall]
 * @property {number} [baselineInstrumentationCpuUsPerCall]
 * @property {number} [baselineOverheadUsPerCall]
 * @property {number} eachCallPairs
 * @property {number} callPlainUs
 * @property {number} callWrappedUs
 * @property {number} callByHandUs
 * @property {number} callOverheadUs
 * @property {number} callRatio
 * @property {number} callByHandOverheadUs
 * @property {number} callOverheadCpuUs
 * @property {number} callNoiseUs
 * @property {number} fixedWorkHotUs
 * @property {number} fixedWorkAfterCallUs
 * @property {number} [callBaselineOverheadUs]
 */

/**
 * The caller's view (timeEachCall): medians of single calls and of per-call paired differences.
 * @typedef {object} EachCallFigures
 * @property {number} eachCallPairs calls per side
 * @property {number} callPlainUs median unwrapped call
 * @property {number} callWrappedUs median wrapped call
 * @property {number} callByHandUs median call recorded by hand
 * @property {number} callOverheadUs median of (wrapped − unwrapped) per pair of calls
 * @property {number} callRatio 1 + callOverheadUs / callPlainUs
 * @property {number} callByHandOverheadUs median of (by hand − unwrapped)
 * @property {number} callOverheadCpuUs the same as callOverheadUs, in this process's CPU
 * @property {number} callNoiseUs median of (unwrapped − unwrapped) for two clients alike: the
 *   measure's own error
 * @property {number} fixedWorkHotUs fixedWork() in a hot loop
 * @property {number} fixedWorkAfterCallUs fixedWork() right after the call's result: median of
 *   (unwrapped then fixedWork − unwrapped)
 * @property {number} [callBaselineOverheadUs] callOverheadUs of the baseline build (with
 *   BENCH_BASELINE_CLIENT: a sixth side)
 */

/**
 * The per-call figures of a scenario (timeEachCall), on clients of their own whose recording
 * clients flush by their timer.
 * @param {Kit<unknown>} kit
 * @param {string} name
 * @returns {Promise<EachCallFigures>}
 */
async function eachCallFigures(kit, name) {
  const wrapped = recordingClient(CURRENT, 'timer');
  const byHand = recordingClient(CURRENT, 'timer');
  const plainClient = await kit.make();
  const plainAgain = await kit.make();
  const workedClient = await kit.make();
  const handClient = await kit.make();
  const wrappedClient = kit.wrap(CURRENT, await kit.make(), wrapped.session);
  const baseline = BASELINE === undefined ? undefined : recordingClient(BASELINE, 'timer');
  const baselineClient =
    baseline === undefined
      ? undefined
      : kit.wrap(/** @type {ClientBuild} */ (BASELINE), await kit.make(), baseline.session);
  /** @type {Partial<Record<Side, Call>>} */
  const sides = {
    plain: () => kit.call(plainClient),
    plainAgain: () => kit.call(plainAgain),
    plainThenWork: async () => {
      await kit.call(workedClient);
      fixedWork();
    },
    byHand: () => kit.byHand(handClient, byHand.session),
    wrapped: () => kit.call(wrappedClient),
  };
  if (baselineClient !== undefined) sides.baseline = () => kit.call(baselineClient);
  await timeEachCall(sides, Math.min(EACH_CALL_PAIRS, 300));
  const runs = await timeEachCall(sides, EACH_CALL_PAIRS);
  for (const r of [wrapped, byHand, baseline]) {
    if (r === undefined) continue;
    r.session.end();
    await r.client.close();
  }
  const recorded = wrapped.client.stats().recordedEvents;
  // Every wrapped call (warm-up included) and the session's own trace: one event each, no more.
  if (recorded !== Math.min(EACH_CALL_PAIRS, 300) + EACH_CALL_PAIRS)
    process.stderr.write(`  ${name}: the wrapped client recorded ${recorded} events\n`);
  const plainWall = /** @type {number} */ (median(runs.plain.map((r) => r.wall)));
  const callOverheadUs = pairedDifference(runs, 'wrapped', 'plain', 'wall');
  return {
    eachCallPairs: EACH_CALL_PAIRS,
    callPlainUs: plainWall,
    callWrappedUs: /** @type {number} */ (median(runs.wrapped.map((r) => r.wall))),
    callByHandUs: /** @type {number} */ (median(runs.byHand.map((r) => r.wall))),
    callOverheadUs,
    callRatio: 1 + callOverheadUs / plainWall,
    callByHandOverheadUs: pairedDifference(runs, 'byHand', 'plain', 'wall'),
    callOverheadCpuUs: pairedDifference(runs, 'wrapped', 'plain', 'cpu'),
    callNoiseUs: pairedDifference(runs, 'plainAgain', 'plain', 'wall'),
    fixedWorkHotUs: FIXED_WORK_HOT_US,
    fixedWorkAfterCallUs: pairedDifference(runs, 'plainThenWork', 'plain', 'wall'),
    ...(baselineClient === undefined
      ? {}
      : { callBaselineOverheadUs: pairedDifference(runs, 'baseline', 'plain', 'wall') }),
  };
}

/**
 * @param {string} name
 * @param {Transport} transport
 * @param {Kit<unknown>} kit
 * @returns {Promise<ScenarioResult>}
 */
async function scenario(name, transport, kit) {
  const recording = recordingClient();
  const byHand = recordingClient();
  const baseline = BASELINE === undefined ? undefined : recordingClient(BASELINE);
  const plainClient = await kit.make();
  const handClient = await kit.make();
  const wrappedClient = kit.wrap(CURRENT, await kit.make(), recording.session);
  /** @type {Partial<Record<Side, Call>>} */
  const sides = {
    plain: () => kit.call(plainClient),
    byHand: () => kit.byHand(handClient, byHand.session),
    wrapped: () => kit.call(wrappedClient),
  };
  /** @type {Partial<Record<Side, Recording>>} */
  const recordings = { byHand, wrapped: recording };
  if (baseline !== undefined) {
    // `baseline` is BASELINE's recording client
    const baselineClient = kit.wrap(
      /** @type {ClientBuild} */ (BASELINE),
      await kit.make(),
      baseline.session,
    );
    sides.baseline = () => kit.call(baselineClient);
    recordings.baseline = baseline;
  }
  const names = /** @type {Side[]} */ (Object.keys(sides));
  for (const side of names)
    await timeCalls(/** @type {Call} */ (sides[side]), Math.min(CALLS, 100), recordings[side]);
  // Short batches, the sides in turn (the order rotating), so a change in the machine's load
  // between batches hits all of them alike.
  const batch = Math.max(10, Math.floor(CALLS / BATCHES));
  // every side of `names` has its list (and only those are read)
  const runs = /** @type {Record<Side, Timing[]>} */ (
    Object.fromEntries(names.map((side) => [side, /** @type {Timing[]} */ ([])]))
  );
  for (let round = 0; round < ROUNDS; round++)
    for (let b = 0; b < BATCHES; b++)
      for (let i = 0; i < names.length; i++) {
        const side = /** @type {Side} */ (names[(round + b + i) % names.length]);
        runs[side].push(
          await timeCalls(/** @type {Call} */ (sides[side]), batch, recordings[side]),
        );
      }
  for (const r of [recording, byHand, baseline]) {
    if (r === undefined) continue;
    r.session.end();
    await r.client.close();
  }
  // Every side ran ROUNDS × BATCHES batches: the medians are numbers.
  const wall = (/** @type {Side} */ side) =>
    /** @type {number} */ (median(runs[side].map((r) => r.wall)));
  const cpu = (/** @type {Side} */ side) =>
    /** @type {number} */ (median(runs[side].map((r) => r.cpu)));
  /**
   * @param {Side} side
   * @param {Side} base
   * @param {keyof Timing} of
   */
  const paired = (side, base, of) => pairedDifference(runs, side, base, of);
  const each = await eachCallFigures(kit, name);
  /** @type {ScenarioResult} */
  const result = {
    name,
    transport,
    callsPerRound: batch * BATCHES,
    rounds: ROUNDS,
    plainUsPerCall: wall('plain'),
    byHandUsPerCall: wall('byHand'),
    wrappedUsPerCall: wall('wrapped'),
    overheadUsPerCall: paired('wrapped', 'plain', 'wall'),
    ratio: 1 + paired('wrapped', 'plain', 'wall') / wall('plain'),
    plainCpuUsPerCall: cpu('plain'),
    byHandCpuUsPerCall: cpu('byHand'),
    wrappedCpuUsPerCall: cpu('wrapped'),
    overheadCpuUsPerCall: paired('wrapped', 'plain', 'cpu'),
    instrumentationCpuUsPerCall: paired('wrapped', 'byHand', 'cpu'),
    cpuRatio: 1 + paired('wrapped', 'plain', 'cpu') / cpu('plain'),
    recordedEvents: recording.client.stats().recordedEvents,
    ...each,
  };
  if (baseline !== undefined)
    Object.assign(result, {
      baselineUsPerCall: wall('baseline'),
      baselineCpuUsPerCall: cpu('baseline'),
      baselineOverheadCpuUsPerCall: paired('baseline', 'plain', 'cpu'),
      baselineInstrumentationCpuUsPerCall: paired('baseline', 'byHand', 'cpu'),
      baselineOverheadUsPerCall: paired('baseline', 'plain', 'wall'),
    });
  return result;
}

const loads = () => loadavg().map((l) => Number(l.toFixed(2)));

/**
 * bench/results/instrumentations-latest.json; `baseline` is BENCH_BASELINE_CLIENT's directory.
 * @typedef {object} InstrumentationsResult
 * @property {'instrumentations'} benchmark
 * @property {import('./support.mjs').MachineInfo} machine
 * @property {{ before: number[], after: number[] }} loadAverage
 * @property {string} [baseline]
 * @property {ScenarioResult[]} scenarios
 * @property {string} [date]
 */

async function main() {
  const loadBefore = loads();
  const provider = await startProvider();
  /** @type {McpPair[]} */
  const pairs = [];
  /** @type {ScenarioResult[]} */
  const scenarios = [];
  const http = { baseURL: provider.url };
  const memory = { baseURL: 'http://memory.invalid', fetch: memoryFetch() };
  const openAIAt = (/** @type {SdkOptions} */ options) => ({
    ...options,
    baseURL: `${options.baseURL}/v1`,
  });
  /** @type {[family: string, name: string, transport: Transport, kit: () => Kit<unknown>][]} */
  const planned = [
    ['openai', 'OpenAI chat, HTTP', 'http', () => OPENAI(openAIAt(http), 'plain')],
    ['openai', 'OpenAI chat stream, HTTP', 'http', () => OPENAI(openAIAt(http), 'stream')],
    ['openai', 'OpenAI chat, in-memory fetch', 'memory', () => OPENAI(openAIAt(memory), 'plain')],
    [
      'openai',
      'OpenAI chat stream, in-memory fetch',
      'memory',
      () => OPENAI(openAIAt(memory), 'stream'),
    ],
    ['anthropic', 'Anthropic messages, HTTP', 'http', () => ANTHROPIC(http, 'plain')],
    ['anthropic', 'Anthropic messages stream, HTTP', 'http', () => ANTHROPIC(http, 'stream')],
    [
      'anthropic',
      'Anthropic messages, in-memory fetch',
      'memory',
      () => ANTHROPIC(memory, 'plain'),
    ],
    [
      'anthropic',
      'Anthropic messages stream, in-memory fetch',
      'memory',
      () => ANTHROPIC(memory, 'stream'),
    ],
    ['mcp', 'MCP callTool, stdio', 'stdio', () => MCP(pairs, 'stdio')],
    ['mcp', 'MCP callTool, in-memory transport', 'memory', () => MCP(pairs, 'memory')],
  ];
  try {
    for (const [family, name, transport, kit] of planned)
      if (FAMILIES.includes(family)) {
        scenarios.push(await scenario(name, transport, kit()));
        process.stderr.write(`  ${name}: done\n`);
      }
  } finally {
    provider.child.kill();
    for (const { client, server } of pairs) {
      await client.close();
      await server?.close();
    }
  }
  // (reading the sink keeps the fixed work from being optimised away, and shows that it ran)
  if (fixedWorkSink === 0) throw new Error('the fixed work of the per-call measure never ran');
  const loadAfter = loads();
  const rows = [
    [
      'scenario',
      'call: unwrapped µs',
      'call: added µs',
      'call: ratio',
      'call: A/A noise µs',
      'fixed work after call / hot',
      'batches: unwrapped µs',
      'batches: wrapped µs',
      'batches: overhead µs',
      'batches: ratio',
      'CPU unwrapped µs',
      'CPU wrapped µs',
      'CPU overhead µs',
      'of which instrumentation µs',
      ...(BASELINE
        ? [
            'baseline: call added µs',
            'baseline: overhead µs',
            'baseline: CPU overhead µs',
            'baseline: instrumentation µs',
          ]
        : []),
    ],
  ];
  for (const s of scenarios)
    rows.push([
      s.name,
      s.callPlainUs.toFixed(1),
      s.callOverheadUs.toFixed(1),
      s.callRatio.toFixed(3),
      s.callNoiseUs.toFixed(1),
      `${s.fixedWorkAfterCallUs.toFixed(1)} / ${s.fixedWorkHotUs.toFixed(1)}`,
      s.plainUsPerCall.toFixed(1),
      s.wrappedUsPerCall.toFixed(1),
      s.overheadUsPerCall.toFixed(1),
      s.ratio.toFixed(3),
      s.plainCpuUsPerCall.toFixed(1),
      s.wrappedCpuUsPerCall.toFixed(1),
      s.overheadCpuUsPerCall.toFixed(1),
      s.instrumentationCpuUsPerCall.toFixed(1),
      // with a baseline, every scenario has its figures
      ...(BASELINE
        ? [
            /** @type {number} */ (s.callBaselineOverheadUs).toFixed(1),
            /** @type {number} */ (s.baselineOverheadUsPerCall).toFixed(1),
            /** @type {number} */ (s.baselineOverheadCpuUsPerCall).toFixed(1),
            /** @type {number} */ (s.baselineInstrumentationCpuUsPerCall).toFixed(1),
          ]
        : []),
    ]);
  console.log(
    `\nInstrumentation overhead (${CALLS} calls per side × ${ROUNDS} rounds, medians of batches; load average ${loadBefore.join(' / ')} before, ${loadAfter.join(' / ')} after)\n`,
  );
  console.log(textTable(rows, (c) => c === 0));
  /** @type {InstrumentationsResult} */
  const result = {
    benchmark: 'instrumentations',
    machine: machineInfo(ROOT),
    loadAverage: { before: loadBefore, after: loadAfter },
    ...(BASELINE_DIR ? { baseline: BASELINE_DIR } : {}),
    scenarios,
  };
  result.date = result.machine.date;
  writeJsonAtomic(join(ROOT, 'bench/results/instrumentations-latest.json'), result);
  console.log('\nwrote bench/results/instrumentations-latest.json');
}

await main();
