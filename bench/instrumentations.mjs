// Instrumentation benchmark: what wrapping an SDK client costs a call, against the same call on
// the unwrapped client, in the same run.
//
//   http     the OpenAI SDK (`openai`) calling a fake provider in a child process over loopback
//            HTTP: chat.completions.create plain, and streamed (12 chunks, read to the end),
//            unwrapped vs wrapped with observeOpenAI. The fake provider runs in its own process so
//            that its work is not counted in the host's. Figure: the ratio of the medians, and
//            the difference in µs per call.
//   sdk      the same calls with the SDK's `fetch` option answering from memory (no socket): the
//            call is then the SDK's own work only (request building, parsing), so the
//            instrumentation's absolute cost per call shows with little network noise.
//
// A third side in each scenario: the unwrapped client with the same event recorded by hand
// (session.llmCall after each call). Wrapped minus by-hand is the instrumentation's own work;
// by-hand minus unwrapped is what recording an event costs the client anyway (the payload copy,
// and at flush time serialisation, gzip and the garbage they leave).
//
// Each scenario runs BENCH_CALLS (500) sequential calls per side and round, in 10 short batches,
// the sides in rotating order, over BENCH_ROUNDS (7) rounds after a warm-up; the
// figures are medians of the per-batch µs/call, wall-clock and CPU time of this process (user +
// system: what the host's thread spends; less disturbed than wall-clock by other processes on a
// busy machine). The wrapped client records into a real FlightlogClient whose transport answers 202 at
// once (its buffer fills and is flushed as in real use; nothing goes over the network for it).
//
// Prints a table and writes bench/results/instrumentations-latest.json. Targets: a wrapped call
// costs < 5 % more than the unwrapped one, and < 20 µs more.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { FlightlogClient } from '@flightlog/client';
import { observeOpenAI } from '@flightlog/client/openai';
import OpenAI from 'openai';
import { envNumber, machineInfo, median, textTable, writeJsonAtomic } from './support.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CALLS = envNumber('BENCH_CALLS', 500, 20, 100_000);
const ROUNDS = envNumber('BENCH_ROUNDS', 7, 1, 100);
/** Batches per round: each round is BENCH_CALLS calls per side, in this many alternating batches. */
const BATCHES = 10;

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

/** The fake provider, in a child process: answers JSON or SSE by the request's `stream`. */
const PROVIDER = `
const http = require('node:http');
const completion = ${JSON.stringify(COMPLETION)};
const stream = ${JSON.stringify(STREAM)};
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const streamed = Buffer.concat(chunks).includes('"stream":true');
    res.writeHead(200, { 'content-type': streamed ? 'text/event-stream' : 'application/json' });
    res.end(streamed ? stream : completion);
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));
`;

async function startProvider() {
  const child = spawn(process.execPath, ['-e', PROVIDER], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = await once(child.stdout, 'data');
  return { url: `http://127.0.0.1:${String(line).trim()}/v1`, child };
}

/** A fetch answering from memory, as the provider would: the SDK's own work only. */
function memoryFetch() {
  return async (_url, init) => {
    const streamed = String(init?.body ?? '').includes('"stream":true');
    return new globalThis.Response(streamed ? STREAM : COMPLETION, {
      status: 200,
      headers: { 'content-type': streamed ? 'text/event-stream' : 'application/json' },
    });
  };
}

const OK = { kind: 'ok', status: 202, replayed: false, verify: null };
function recordingClient() {
  const client = new FlightlogClient(
    { apiKey: 'bench', flushOnExit: false, logger: { warn() {} } },
    { transport: { sendBatch: async () => OK, complete: async () => OK } },
  );
  return { client, session: client.startSession({ inputSummary: 'instrumentation benchmark' }) };
}

const CALL = {
  plain: (openai) => openai.chat.completions.create({ model: 'gpt-4o-mini', messages: MESSAGES }),
  stream: async (openai) => {
    const stream = await openai.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: MESSAGES,
      stream: true,
      stream_options: { include_usage: true },
    });
    for await (const chunk of stream) void chunk;
  },
};

/**
 * The same calls on the unwrapped client, each followed by the same event recorded by hand
 * (session.llmCall, as before the instrumentations): the difference to the wrapped client is
 * the instrumentation's own work; the rest is what recording an event costs the client anyway.
 */
const BY_HAND = {
  plain: async (openai, session) => {
    const startedAt = new Date();
    const r = await openai.chat.completions.create({ model: 'gpt-4o-mini', messages: MESSAGES });
    session.llmCall(
      {
        provider: 'openai',
        model: r.model,
        input: { messages: MESSAGES },
        output: { content: r.choices[0].message.content, finishReason: r.choices[0].finish_reason },
        usage: {
          inputTokens: r.usage.prompt_tokens,
          outputTokens: r.usage.completion_tokens,
          totalTokens: r.usage.total_tokens,
        },
        costUsd: 0.0000147,
        streamed: false,
      },
      { startedAt, endedAt: new Date() },
    );
  },
  stream: async (openai, session) => {
    const startedAt = new Date();
    const stream = await openai.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: MESSAGES,
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = '';
    let usage;
    let finishReason = '';
    for await (const chunk of stream) {
      content += chunk.choices[0]?.delta?.content ?? '';
      finishReason = chunk.choices[0]?.finish_reason ?? finishReason;
      usage = chunk.usage ?? usage;
    }
    session.llmCall(
      {
        provider: 'openai',
        model: 'gpt-4o-mini-2024-07-18',
        input: { messages: MESSAGES },
        output: { content, finishReason },
        usage: {
          inputTokens: usage.prompt_tokens,
          outputTokens: usage.completion_tokens,
          totalTokens: usage.total_tokens,
        },
        costUsd: 0.0000134,
        streamed: true,
      },
      { startedAt, endedAt: new Date() },
    );
  },
};

/** Wall-clock and CPU (this process: user + system) µs per call of `calls` sequential calls. */
async function timeCalls(call, calls) {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < calls; i++) await call();
  const wall = ((performance.now() - t0) * 1000) / calls;
  const { user, system } = process.cpuUsage(cpu0);
  return { wall, cpu: (user + system) / calls };
}

async function scenario(name, transport, kind, options) {
  const recording = recordingClient();
  const byHand = recordingClient();
  const sdk = () => new OpenAI({ apiKey: 'sk-bench', maxRetries: 0, ...options });
  const plainClient = sdk();
  const handClient = sdk();
  const wrappedClient = observeOpenAI(sdk(), recording.session);
  const sides = {
    plain: () => CALL[kind](plainClient),
    byHand: () => BY_HAND[kind](handClient, byHand.session),
    wrapped: () => CALL[kind](wrappedClient),
  };
  const names = Object.keys(sides);
  for (const side of names) await timeCalls(sides[side], Math.min(CALLS, 100));
  // Short batches, the three sides in turn (the order rotating), so a change in the machine's
  // load between batches hits all of them alike.
  const batch = Math.max(10, Math.floor(CALLS / BATCHES));
  const runs = Object.fromEntries(names.map((side) => [side, []]));
  for (let round = 0; round < ROUNDS; round++)
    for (let b = 0; b < BATCHES; b++)
      for (let i = 0; i < names.length; i++) {
        const side = names[(round + b + i) % names.length];
        runs[side].push(await timeCalls(sides[side], batch));
      }
  for (const { client, session } of [recording, byHand]) {
    session.end();
    await client.close();
  }
  const wall = (side) => median(runs[side].map((r) => r.wall));
  const cpu = (side) => median(runs[side].map((r) => r.cpu));
  return {
    name,
    transport,
    kind,
    callsPerRound: batch * BATCHES,
    rounds: ROUNDS,
    plainUsPerCall: wall('plain'),
    byHandUsPerCall: wall('byHand'),
    wrappedUsPerCall: wall('wrapped'),
    overheadUsPerCall: wall('wrapped') - wall('plain'),
    ratio: wall('wrapped') / wall('plain'),
    plainCpuUsPerCall: cpu('plain'),
    byHandCpuUsPerCall: cpu('byHand'),
    wrappedCpuUsPerCall: cpu('wrapped'),
    overheadCpuUsPerCall: cpu('wrapped') - cpu('plain'),
    instrumentationCpuUsPerCall: cpu('wrapped') - cpu('byHand'),
    cpuRatio: cpu('wrapped') / cpu('plain'),
    recordedEvents: recording.client.stats().recordedEvents,
  };
}

async function main() {
  const provider = await startProvider();
  const scenarios = [];
  try {
    scenarios.push(await scenario('OpenAI chat, HTTP', 'http', 'plain', { baseURL: provider.url }));
    scenarios.push(
      await scenario('OpenAI chat stream, HTTP', 'http', 'stream', { baseURL: provider.url }),
    );
    const sdk = { baseURL: 'http://memory.invalid/v1', fetch: memoryFetch() };
    scenarios.push(await scenario('OpenAI chat, in-memory fetch', 'sdk', 'plain', sdk));
    scenarios.push(await scenario('OpenAI chat stream, in-memory fetch', 'sdk', 'stream', sdk));
  } finally {
    provider.child.kill();
  }
  const rows = [
    [
      'scenario',
      'unwrapped µs',
      'wrapped µs',
      'overhead µs',
      'ratio',
      'CPU unwrapped µs',
      'CPU wrapped µs',
      'CPU overhead µs',
      'of which instrumentation µs',
    ],
  ];
  for (const s of scenarios)
    rows.push([
      s.name,
      s.plainUsPerCall.toFixed(1),
      s.wrappedUsPerCall.toFixed(1),
      s.overheadUsPerCall.toFixed(1),
      s.ratio.toFixed(3),
      s.plainCpuUsPerCall.toFixed(1),
      s.wrappedCpuUsPerCall.toFixed(1),
      s.overheadCpuUsPerCall.toFixed(1),
      s.instrumentationCpuUsPerCall.toFixed(1),
    ]);
  console.log(
    `\nInstrumentation overhead (${CALLS} calls per side × ${ROUNDS} rounds, medians of batches)\n`,
  );
  console.log(textTable(rows, (c) => c === 0));
  const result = { benchmark: 'instrumentations', machine: machineInfo(ROOT), scenarios };
  result.date = result.machine.date;
  writeJsonAtomic(join(ROOT, 'bench/results/instrumentations-latest.json'), result);
  console.log('\nwrote bench/results/instrumentations-latest.json');
}

await main();
