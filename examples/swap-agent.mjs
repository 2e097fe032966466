#!/usr/bin/env node
// A runnable example agent instrumented with @flightlog/client. It simulates a Solana swap agent
// with fake LLM, tool and chain calls (no network besides Flightlog) and prints one JSON line per
// run on stdout: {"scenario", "traceId", "status", "encrypted", "payloads"}. `payloads` is what the
// client really does with event payloads: "encrypted", "plain", "withheld" (SERVICE_MASTER_KEY is
// set but not a usable key: payloads are replaced, never sent in plaintext) or "disabled";
// `encrypted` is true only when they are encrypted.
//
//   FLIGHTLOG_INGEST_URL=http://localhost:8080 FLIGHTLOG_API_KEY=flk_… FLIGHTLOG_AGENT_ID=… \
//     node examples/swap-agent.mjs [swap] [failed-tx] [tool-loop]
//
// Optional: FLIGHTLOG_VERIFY_TOKEN (first run only), FLIGHTLOG_ENVIRONMENT (devnet|mainnet,
// default devnet), SERVICE_MASTER_KEY (32 random bytes, base64: payloads are encrypted; any other
// value withholds them, with a warning).
//
// The model calls go through the real OpenAI SDK wrapped by observeOpenAI (the SDK answered by a
// fake model inside this process, through its `fetch` option: no network), so they are recorded
// the way an agent's would be: timing, usage and cost from the price table. Without the `openai`
// package installed they are recorded by hand instead, with session.timed. The tool, MCP, x402
// and chain calls are recorded by hand: their instrumentations (observeMcpClient,
// observeX402Fetch, observeSolanaConnection) need a real MCP server, paywall or Solana node.
import { randomBytes, randomInt } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { FlightlogClient } from '@flightlog/client';
import { observeOpenAI } from '@flightlog/client/openai';

const SCENARIOS = ['swap', 'failed-tx', 'tool-loop'];
const requested = process.argv.slice(2);
const scenarios = requested.length > 0 ? requested : SCENARIOS;
for (const name of scenarios)
  if (!SCENARIOS.includes(name)) {
    process.stderr.write(`unknown scenario "${name}"; choose from ${SCENARIOS.join(', ')}\n`);
    process.exit(2);
  }

const client = new FlightlogClient({
  apiKey: process.env.FLIGHTLOG_API_KEY ?? '',
  agentId: process.env.FLIGHTLOG_AGENT_ID,
  verifyToken: process.env.FLIGHTLOG_VERIFY_TOKEN,
  ingestUrl: process.env.FLIGHTLOG_INGEST_URL ?? 'http://localhost:8080',
  environment: process.env.FLIGHTLOG_ENVIRONMENT ?? 'devnet',
});

const BASE58 = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const fakeSignature = () => Array.from(randomBytes(88), (b) => BASE58[b % BASE58.length]).join('');
const JUPITER = 'JUP6LkbZbjS1jKKwapdHNy74zcZ3tLUZoi5QNyVTaV4';
const STAKE = 'Stake11111111111111111111111111111111111111';

const SYSTEM = 'You are a careful Solana trading agent.';

/**
 * A fake model behind the OpenAI SDK's `fetch` option: it waits like one and answers a chat
 * completion like one, with the usage OpenAI would report for it.
 */
async function fakeModel(_url, init) {
  const request = JSON.parse(String(init?.body ?? '{}'));
  const prompt = request.messages?.at(-1)?.content ?? '';
  const { answer, finishReason } = SCRIPT.get(prompt) ?? { answer: 'OK.', finishReason: 'stop' };
  await sleep(randomInt(40, 120));
  const inputTokens = 40 + prompt.length;
  const outputTokens = 20 + answer.length;
  const body = {
    id: `chatcmpl-${randomBytes(6).toString('hex')}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: 'gpt-4o-mini-2024-07-18',
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: answer, refusal: null },
        finish_reason: finishReason,
        logprobs: null,
      },
    ],
    usage: {
      prompt_tokens: inputTokens,
      completion_tokens: outputTokens,
      total_tokens: inputTokens + outputTokens,
    },
  };
  return new globalThis.Response(JSON.stringify(body), {
    headers: { 'content-type': 'application/json' },
  });
}

/** The OpenAI SDK, when installed (it is a development dependency of this repository). */
const OpenAI = await import('openai').then(
  (module) => module.default,
  () => undefined,
);

/** What the fake model answers to each prompt (a real one would not need telling). */
const SCRIPT = new Map();

/** One wrapped client per run: every call through it is recorded in that run's session. */
const clients = new WeakMap();
function openAIFor(session) {
  let openai = clients.get(session);
  if (openai === undefined) {
    openai = observeOpenAI(
      new OpenAI({ apiKey: 'example', baseURL: 'http://fake-model.invalid/v1', fetch: fakeModel }),
      session,
    );
    clients.set(session, openai);
  }
  return openai;
}

/** A model call: through the wrapped SDK when there is one, else recorded by hand. */
async function llm(session, prompt, answer, finishReason = 'stop') {
  if (OpenAI !== undefined) {
    SCRIPT.set(prompt, { answer, finishReason });
    const completion = await openAIFor(session).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: prompt },
      ],
    });
    return completion.choices[0].message.content;
  }
  const inputTokens = 40 + prompt.length;
  const outputTokens = 20 + answer.length;
  return session.timed(
    'llm_call',
    async () => {
      await sleep(randomInt(40, 120));
      return answer;
    },
    (outcome) => ({
      provider: 'openai',
      model: 'gpt-4o-mini',
      input: {
        messages: [
          { role: 'system', content: SYSTEM },
          { role: 'user', content: prompt },
        ],
      },
      output: { content: outcome.ok ? outcome.value : '', finishReason },
      usage: { inputTokens, outputTokens, totalTokens: inputTokens + outputTokens },
      // gpt-4o-mini list prices: $0.15 / 1M input, $0.60 / 1M output tokens
      costUsd: (inputTokens * 0.15 + outputTokens * 0.6) / 1_000_000,
      streamed: false,
    }),
  );
}

/** A fake tool call. */
function tool(session, name, input, run, parentEventId) {
  return session.timed(
    'tool_call',
    async () => {
      await sleep(randomInt(20, 80));
      return run();
    },
    (outcome) => ({ name, input, output: outcome.ok ? outcome.value : undefined }),
    { parentEventId },
  );
}

async function swap(session) {
  await llm(
    session,
    'Swap 1 SOL for USDC at the best route; keep slippage under 0.5 %.',
    'Get a Jupiter quote, check the balance, then swap.',
    'tool_calls',
  );
  const balance = session.mcpCall(
    {
      server: 'solana-mcp',
      method: 'tools/call',
      tool: 'getBalance',
      input: { account: 'me' },
      output: { lamports: '2500000000' },
    },
    { durationMs: 35 },
  );
  const quote = await tool(
    session,
    'jupiter.quote',
    { inputMint: 'SOL', outputMint: 'USDC', amount: '1000000000', slippageBps: 50 },
    () => ({ outAmount: '148213000', priceImpactPct: '0.02', route: ['Orca', 'Whirlpool'] }),
    balance,
  );
  session.x402Payment({
    resource: 'https://api.example-oracle.dev/v1/price/SOL-USDC',
    amount: '0.001',
    asset: 'USDC',
    network: 'solana-devnet',
    payTo: 'Orac1eXPay111111111111111111111111111111111',
    txSignature: fakeSignature(),
    settled: true,
  });
  await session.timed(
    'chain_tx',
    async () => sleep(randomInt(150, 400)),
    () => ({
      signature: fakeSignature(),
      lamports: '1000000000',
      network: 'devnet',
      programId: JUPITER,
      instruction: 'route',
      feeLamports: '5000',
      slot: String(312_000_000 + randomInt(0, 1_000_000)),
      confirmation: 'finalized',
    }),
  );
  await llm(
    session,
    `Summarise: swapped for ${quote.outAmount} micro-USDC.`,
    'Swapped 1 SOL for 148.21 USDC via Orca.',
  );
  session.end({ outputSummary: 'Swapped 1 SOL for 148.21 USDC via Orca (fee 5000 lamports)' });
}

async function failedTx(session) {
  await llm(
    session,
    'Stake 2 SOL with the best-performing validator.',
    'Look up validators, then stake.',
    'tool_calls',
  );
  const validator = await tool(session, 'validators.top', { limit: 3 }, () => ({
    voteAccount: 'Vote111111111111111111111111111111111111111',
    apy: '7.1',
  }));
  try {
    await session.timed(
      'chain_tx',
      async () => {
        await sleep(randomInt(100, 250));
        throw new Error(
          'Transaction simulation failed: insufficient funds for rent (need 2002282880 lamports)',
        );
      },
      () => ({
        signature: null,
        lamports: '2000000000',
        network: 'devnet',
        programId: STAKE,
        instruction: 'delegateStake',
        confirmation: 'failed',
        validator: validator.voteAccount,
      }),
    );
    session.end({ outputSummary: 'Staked 2 SOL' });
  } catch (error) {
    session.fail(error, { outputSummary: 'Could not stake: the wallet cannot pay the rent' });
  }
}

async function toolLoop(session) {
  await llm(
    session,
    'Find the cheapest route for 50 USDC → BONK.',
    'Checking prices.',
    'tool_calls',
  );
  for (let i = 1; i <= 6; i++) {
    await tool(session, 'dex.getPrice', { pair: 'USDC/BONK' }, () => ({
      price: '0.0000214',
      stale: true,
    }));
    await llm(session, 'The price looks stale. What next?', 'Check the price again.', 'tool_calls');
  }
  session.custom({
    name: 'guardrail',
    data: { rule: 'max-repeated-tool-calls', limit: 6, tool: 'dex.getPrice' },
  });
  session.fail(new Error('Tool loop: dex.getPrice called 6 times with the same arguments'));
}

const RUNS = {
  swap: ['Swap 1 SOL for USDC', ['swap', 'jupiter'], swap],
  'failed-tx': ['Stake 2 SOL with the best validator', ['stake'], failedTx],
  'tool-loop': ['Find the cheapest USDC → BONK route', ['routing'], toolLoop],
};

for (const name of scenarios) {
  const [inputSummary, tags, run] = RUNS[name];
  const session = client.startSession({ inputSummary, tags: [...tags, 'example'] });
  try {
    await run(session);
  } catch (error) {
    session.fail(error); // the agent's own bug: the run is recorded as errored
  }
  process.stdout.write(
    `${JSON.stringify({
      scenario: name,
      traceId: session.traceId,
      status: session.status,
      // What the client does, not what the environment asked for: an unusable key withholds.
      encrypted: client.payloadMode === 'encrypted',
      payloads: client.payloadMode,
    })}\n`,
  );
}

const { timedOut } = await client.close();
const stats = client.stats();
process.stdout.write(
  `${JSON.stringify({ delivered: stats.deliveredEvents, dropped: stats.droppedEvents, timedOut })}\n`,
);
