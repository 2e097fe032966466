#!/usr/bin/env node
// A runnable example agent instrumented with @flightlog/client. It plays a Solana swap agent whose
// model, MCP server, paid price oracle and chain all run inside this process (no network besides
// Flightlog) and prints one JSON line per run on stdout: {"scenario", "traceId", "status",
// "encrypted", "payloads"}. `payloads` is what the client really does with event payloads:
// "encrypted", "plain", "withheld" (SERVICE_MASTER_KEY is set but not a usable key: payloads are
// replaced, never sent in plaintext) or "disabled"; `encrypted` is true only when they are
// encrypted.
//
//   FLIGHTLOG_INGEST_URL=http://localhost:8080 FLIGHTLOG_API_KEY=flk_… FLIGHTLOG_AGENT_ID=… \
//     node examples/swap-agent.mjs [swap] [failed-tx] [tool-loop]
//
// Optional: FLIGHTLOG_VERIFY_TOKEN (first run only), FLIGHTLOG_ENVIRONMENT (devnet|mainnet,
// default devnet), SERVICE_MASTER_KEY (32 random bytes, base64: payloads are encrypted; any other
// value withholds them, with a warning).
//
// Every call is recorded by an instrumentation, the way an agent's would be, each wrapper around
// a real SDK talking to a local stand-in:
//   model calls  observeOpenAI: the `openai` SDK, answered by a fake model through its `fetch`
//   MCP tools    observeMcpClient: `@modelcontextprotocol/sdk`'s Client, linked to an McpServer
//                of this process over its InMemoryTransport
//   x402         observeX402Fetch: `@x402/fetch` paying a price oracle behind `@x402/express`'s
//                paywall on a loopback port (a throwaway key signs; a local facilitator settles)
//   chain        observeSolanaConnection: `@solana/web3.js`'s Connection, sending to LiteSVM (a
//                Solana runtime in this process, `litesvm`) behind a small JSON-RPC endpoint
// These SDKs are development dependencies of this repository: each is loaded with a dynamic
// import, and where one is not installed its calls are recorded by hand (session.timed,
// session.mcpCall, session.x402Payment) after a one-line note on stderr. They load one after
// another once a run's first model call is recorded, so the agent's first flush is not held up.
import http from 'node:http';
import { createHash, randomBytes, randomInt } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { FlightlogClient } from '@flightlog/client';
import { observeMcpClient } from '@flightlog/client/mcp';
import { observeOpenAI } from '@flightlog/client/openai';
import { observeSolanaConnection } from '@flightlog/client/solana';
import { observeX402Fetch } from '@flightlog/client/x402';

const SCENARIOS = ['swap', 'failed-tx', 'tool-loop'];
const requested = process.argv.slice(2);
const scenarios = requested.length > 0 ? requested : SCENARIOS;
for (const name of scenarios)
  if (!SCENARIOS.includes(name)) {
    process.stderr.write(`unknown scenario "${name}"; choose from ${SCENARIOS.join(', ')}\n`);
    process.exit(2);
  }

/**
 * An optional SDK, loaded when first needed: what `load` gives, or undefined (with a one-line
 * note) when the package is not installed, and the agent records those calls by hand.
 */
function optional(what, load) {
  let loading;
  const get = () =>
    (loading ??= load().catch((error) => {
      process.stderr.write(
        `swap-agent: ${what} unavailable (${error?.code ?? error?.message ?? error}); recording those calls by hand\n`,
      );
      return undefined;
    }));
  get.started = () => loading;
  return get;
}

const openAIModule = optional('openai', () => import('openai'));
const mcpServer = optional('@modelcontextprotocol/sdk', startMcpServer);
const oracle = optional('@x402/express with @x402/fetch', startPaidOracle);
const chain = optional('@solana/web3.js with litesvm', startChain);
// The model SDK now (the first call needs it); the others once a run's first model call has been
// recorded, one after another, so that the agent's first flush is not held up by them, and
// before the steps that use them, so that their loading is not timed as part of a step.
void openAIModule();
async function load(...sdks) {
  for (const sdk of sdks) await sdk();
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
const LAMPORTS_PER_SOL = 1_000_000_000;
/** What the agent's wallet holds when it starts, in lamports. */
const WALLET_LAMPORTS = 2_500_000_000;

const SYSTEM = 'You are a careful Solana trading agent.';

// --- the model: the OpenAI SDK, answered by a fake model in this process -----------------------

/** What the fake model answers to each prompt (a real one would not need telling). */
const SCRIPT = new Map();

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

/** One wrapped client per run: every call through it is recorded in that run's session. */
const openAIClients = new WeakMap();

/** A model call: through the wrapped SDK when there is one, else recorded by hand. */
async function llm(session, prompt, answer, finishReason = 'stop') {
  const OpenAI = (await openAIModule())?.default;
  if (OpenAI !== undefined) {
    SCRIPT.set(prompt, { answer, finishReason });
    let openai = openAIClients.get(session);
    if (openai === undefined) {
      openai = observeOpenAI(
        new OpenAI({
          apiKey: 'example',
          baseURL: 'http://fake-model.invalid/v1',
          fetch: fakeModel,
        }),
        session,
      );
      openAIClients.set(session, openai);
    }
    const completion = await openai.chat.completions.create({
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

/** A tool of the agent's own, timed by hand (calls made inside it nest under it). */
function tool(session, name, input, run) {
  return session.timed(
    'tool_call',
    async () => {
      await sleep(randomInt(20, 80));
      return run();
    },
    (outcome) => ({ name, input, output: outcome.ok ? outcome.value : undefined }),
  );
}

// --- MCP: a server of this process, over the SDK's in-memory transport --------------------------

async function startMcpServer() {
  const [{ Client }, { McpServer }, { InMemoryTransport }, { z }] = await Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'),
    import('@modelcontextprotocol/sdk/server/mcp.js'),
    import('@modelcontextprotocol/sdk/inMemory.js'),
    import('zod'),
  ]);
  const server = new McpServer({ name: 'solana-mcp', version: '1.0.0' });
  server.registerTool(
    'getBalance',
    { description: 'Lamports held by an account', inputSchema: { account: z.string() } },
    async ({ account }) => {
      const lamports = (await chain.started())?.balance(account) ?? WALLET_LAMPORTS;
      return { content: [{ type: 'text', text: `${lamports} lamports` }] };
    },
  );
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const mcp = new Client({ name: 'swap-agent', version: '1.0.0' });
  await mcp.connect(clientSide);
  return {
    client: mcp,
    close: async () => {
      await mcp.close();
      await server.close();
    },
  };
}

/** The wallet's balance from the MCP server: through the wrapped client, else recorded by hand. */
async function balanceOverMcp(session, account) {
  const mcp = await mcpServer();
  if (mcp !== undefined) {
    const result = await observeMcpClient(mcp.client, session).callTool({
      name: 'getBalance',
      arguments: { account },
    });
    return Number.parseInt(result.content[0].text, 10);
  }
  session.mcpCall(
    {
      server: 'solana-mcp',
      method: 'tools/call',
      tool: 'getBalance',
      input: { account },
      output: { content: [{ type: 'text', text: `${WALLET_LAMPORTS} lamports` }] },
    },
    { durationMs: 35 },
  );
  return WALLET_LAMPORTS;
}

// --- x402: a price oracle behind @x402/express's paywall, on a loopback port --------------------

const X402_NETWORK = 'eip155:84532'; // Base Sepolia
const ORACLE_PAY_TO = '0x209693Bc6afc0C5328bA36FaF03C514EF312287C';

async function startPaidOracle() {
  const [
    { default: express },
    { paymentMiddleware, x402ResourceServer },
    { ExactEvmScheme: PaywallScheme },
    { ExactEvmScheme: PayerScheme },
    { wrapFetchWithPayment, x402Client },
    { generatePrivateKey, privateKeyToAccount },
  ] = await Promise.all([
    import('express'),
    import('@x402/express'),
    import('@x402/evm/exact/server'),
    import('@x402/evm/exact/client'),
    import('@x402/fetch'),
    import('viem/accounts'),
  ]);
  // The facilitator, a remote service in production that checks the signed authorization and
  // submits it on chain, is a local one: it accepts every well-formed payment and settles it
  // with a transaction hash derived from its signature.
  const facilitator = {
    verify: async (payload) => ({ isValid: true, payer: payload.payload.authorization?.from }),
    settle: async (payload, requirements) => ({
      success: true,
      transaction: `0x${createHash('sha256').update(payload.payload.signature).digest('hex')}`,
      network: requirements.network,
      payer: payload.payload.authorization?.from,
    }),
    getSupported: async () => ({
      kinds: [{ x402Version: 2, scheme: 'exact', network: X402_NETWORK }],
      extensions: [],
      signers: {},
    }),
  };
  const app = express();
  app.use(
    paymentMiddleware(
      {
        'GET /v1/price/SOL-USDC': {
          accepts: {
            scheme: 'exact',
            price: '$0.001',
            network: X402_NETWORK,
            payTo: ORACLE_PAY_TO,
          },
          description: 'SOL/USDC spot price',
        },
      },
      new x402ResourceServer(facilitator).register(X402_NETWORK, new PaywallScheme()),
    ),
  );
  app.get('/v1/price/SOL-USDC', (_req, res) => {
    res.json({ pair: 'SOL/USDC', price: '148.21', at: new Date().toISOString() });
  });
  const server = await new Promise((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  // A throwaway key for this run: it signs the payment authorizations locally.
  const payer = new x402Client().register(
    'eip155:*',
    new PayerScheme(privateKeyToAccount(generatePrivateKey())),
  );
  return {
    url: `http://127.0.0.1:${server.address().port}/v1/price/SOL-USDC`,
    fetchWithPayment: (session) =>
      wrapFetchWithPayment(observeX402Fetch(globalThis.fetch, session), payer),
    close: () => closeServer(server),
  };
}

/** The SOL/USDC price, paid for with x402: through the wrapped fetch, else recorded by hand. */
async function paidPrice(session) {
  const paid = await oracle();
  if (paid !== undefined) {
    const response = await paid.fetchWithPayment(session)(paid.url);
    return (await response.json()).price;
  }
  session.x402Payment({
    resource: 'https://api.example-oracle.dev/v1/price/SOL-USDC',
    amount: '1000', // $0.001 in USDC's 6 decimals
    asset: 'USDC',
    network: X402_NETWORK,
    payTo: ORACLE_PAY_TO,
    txSignature: `0x${randomBytes(32).toString('hex')}`,
    settled: true,
  });
  return '148.21';
}

// --- the chain: LiteSVM, a Solana runtime in this process, behind a JSON-RPC endpoint -----------

async function startChain() {
  const [web3, { LiteSVM, FailedTransactionMetadata }] = await Promise.all([
    import('@solana/web3.js'),
    import('litesvm'),
  ]);
  const svm = new LiteSVM();
  const wallet = web3.Keypair.generate();
  svm.airdrop(wallet.publicKey, BigInt(WALLET_LAMPORTS));
  // The methods web3.js's Connection needs to send a transaction; a failure is answered as a
  // validator answers a failed preflight (-32002, with the program logs).
  const answer = ({ id, method, params = [] }) => {
    const reply = (result) => ({ jsonrpc: '2.0', id, result });
    const context = { slot: Number(svm.getClock().slot) };
    switch (method) {
      case 'getLatestBlockhash':
        return reply({
          context,
          value: { blockhash: svm.latestBlockhash(), lastValidBlockHeight: 1_000 },
        });
      case 'getBalance':
        return reply({
          context,
          value: Number(svm.getBalance(new web3.PublicKey(params[0])) ?? 0n),
        });
      case 'sendTransaction': {
        const transaction = web3.VersionedTransaction.deserialize(Buffer.from(params[0], 'base64'));
        const signature = base58(transaction.signatures[0]);
        const outcome = svm.sendTransaction(transaction);
        if (outcome instanceof FailedTransactionMetadata)
          return {
            jsonrpc: '2.0',
            id,
            error: {
              code: -32002,
              message: `Transaction simulation failed: ${failureText(outcome.err())}`,
              data: { logs: outcome.meta().logs(), accounts: null, unitsConsumed: 0 },
            },
          };
        return reply(signature);
      }
      default:
        return {
          jsonrpc: '2.0',
          id,
          error: { code: -32601, message: `Method not found: ${method}` },
        };
    }
  };
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(Array.isArray(body) ? body.map(answer) : answer(body)));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}`;
  return {
    web3,
    wallet,
    /** A funded account of its own (the staking wallet). */
    funded(lamports) {
      const account = web3.Keypair.generate();
      svm.airdrop(account.publicKey, BigInt(lamports));
      return account;
    },
    balance: (account) =>
      Number(
        svm.getBalance(account === 'me' ? wallet.publicKey : new web3.PublicKey(account)) ?? 0n,
      ),
    connection: (session) =>
      observeSolanaConnection(new web3.Connection(url, 'confirmed'), session, {
        network: 'devnet',
      }),
    close: () => closeServer(server),
  };
}

/** A runtime error as a validator words it (`Error processing Instruction 0: custom program error: 0x1`). */
function failureText(error) {
  if (typeof error?.index !== 'number' || typeof error.err !== 'function') return String(error);
  const inner = error.err();
  const what =
    typeof inner?.code === 'number'
      ? `custom program error: 0x${inner.code.toString(16)}`
      : String(inner);
  return `Error processing Instruction ${error.index}: ${what}`;
}

/** Base58, as Solana writes signatures. */
function base58(bytes) {
  const digits = [];
  for (const byte of bytes) {
    let carry = byte;
    for (let j = 0; j < digits.length; j++) {
      carry += digits[j] << 8;
      digits[j] = carry % 58;
      carry = (carry / 58) | 0;
    }
    for (; carry > 0; carry = (carry / 58) | 0) digits.push(carry % 58);
  }
  let zeros = 0;
  while (zeros < bytes.length && bytes[zeros] === 0) zeros += 1;
  return (
    '1'.repeat(zeros) +
    digits
      .reverse()
      .map((d) => BASE58[d])
      .join('')
  );
}

function closeServer(server) {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

// --- the runs ------------------------------------------------------------------------------------

async function swap(session) {
  await llm(
    session,
    'Swap 1 SOL for USDC at the best route; keep slippage under 0.5 %.',
    'Get a Jupiter quote, check the balance, then swap.',
    'tool_calls',
  );
  await load(mcpServer, oracle, chain);
  // The quote tool checks the balance over MCP and pays the price oracle with x402: both calls
  // are recorded inside it, as its children.
  const quote = await tool(
    session,
    'jupiter.quote',
    { inputMint: 'SOL', outputMint: 'USDC', amount: '1000000000', slippageBps: 50 },
    async () => {
      const lamports = await balanceOverMcp(session, 'me');
      if (lamports < LAMPORTS_PER_SOL) throw new Error(`the wallet holds ${lamports} lamports`);
      const price = await paidPrice(session);
      const outAmount = String(Math.round(Number(price) * 1_000_000));
      return { outAmount, priceImpactPct: '0.02', route: ['Orca', 'Whirlpool'] };
    },
  );
  const solana = await chain();
  if (solana !== undefined) {
    // The swap's SOL leg: 1 SOL from the wallet to the route's vault, sent to the runtime.
    const { web3, wallet } = solana;
    const vault = web3.Keypair.generate().publicKey;
    const transaction = new web3.Transaction().add(
      web3.SystemProgram.transfer({
        fromPubkey: wallet.publicKey,
        toPubkey: vault,
        lamports: LAMPORTS_PER_SOL,
      }),
    );
    await solana.connection(session).sendTransaction(transaction, [wallet]);
  } else
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
  await load(chain);
  const validator = await tool(session, 'validators.top', { limit: 3 }, () => ({
    voteAccount: 'Vote111111111111111111111111111111111111111',
    apy: '7.1',
  }));
  const solana = await chain();
  try {
    if (solana !== undefined) {
      // A staking wallet holding 1 SOL creates a stake account of 2 SOL: the runtime refuses it.
      const { web3 } = solana;
      const staker = solana.funded(LAMPORTS_PER_SOL);
      const stakeAccount = web3.Keypair.generate();
      const transaction = web3.StakeProgram.createAccount({
        fromPubkey: staker.publicKey,
        stakePubkey: stakeAccount.publicKey,
        authorized: new web3.Authorized(staker.publicKey, staker.publicKey),
        lamports: 2 * LAMPORTS_PER_SOL,
      });
      try {
        await solana.connection(session).sendTransaction(transaction, [staker, stakeAccount]);
      } catch (error) {
        // The node's logs say why; the run's error says it in one line.
        const short = error?.transactionLogs
          ?.map((line) => /insufficient lamports (\d+), need (\d+)/.exec(line))
          .find(Boolean);
        throw short
          ? new Error(
              `Transaction simulation failed: insufficient funds (the wallet holds ${short[1]} lamports, the stake needs ${short[2]})`,
            )
          : error;
      }
    } else
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
    session.fail(error, { outputSummary: 'Could not stake: the wallet cannot pay for the stake' });
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
await Promise.all([mcpServer, oracle, chain].map(async (sdk) => (await sdk.started())?.close()));
const stats = client.stats();
process.stdout.write(
  `${JSON.stringify({ delivered: stats.deliveredEvents, dropped: stats.droppedEvents, timedOut })}\n`,
);
