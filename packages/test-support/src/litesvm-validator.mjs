// @ts-check
import http from 'node:http';
import {
  address,
  getBase58Decoder,
  getBase64Encoder,
  getCompiledTransactionMessageDecoder,
  getTransactionDecoder,
  lamports,
} from '@solana/kit';
import { FailedTransactionMetadata, LiteSVM } from 'litesvm';

/*
 * A Solana validator of its own for the tests: LiteSVM (a real Solana runtime, with the SPL
 * programs, the Memo program among them) behind a JSON-RPC endpoint on a loopback port, in a
 * process of its own, as `solana-test-validator` would be. It must not share a process with the
 * code under test: a native runtime that fails takes only the validator down, and with LiteSVM
 * 0.8 running an on-chain (SBF) program corrupted the V8 heap of its process (a later garbage
 * collection aborted with std::bad_alloc; 1.5 does not).
 *
 * It answers the methods @solana/web3.js's Connection and @solana/kit's RPC need to send a
 * transaction, follow it and read it back. Transactions really execute (programs run, fees,
 * signatures checked); a failure is answered as a validator answers a failed preflight (-32002
 * with the logs). Each landed transaction moves the chain on a slot and lands finalized.
 *
 * The test drives it with methods of its own (`test_*`, see LiteSvmRpc). Started with
 * `node litesvm-validator.mjs`, it prints `{"url": …}` once it listens, and exits when its
 * standard input closes (its test process went away).
 */

/** How many blocks a blockhash stays valid, as on a real cluster. */
const BLOCKHASH_LIFETIME = 150;
/** The chain starts past its genesis, as a real cluster's slot is. */
const FIRST_SLOT = 1_000n;

const svm = new LiteSVM();
svm.warpToSlot(FIRST_SLOT);
/** @type {string[]} */
const calls = [];
/** @type {{ signature: string, slot: number, wire: string, programs: string[] }[]} */
const landed = [];
/** @type {Map<string, { slot: number, err: unknown }>} */
const statuses = new Map();
/** @type {Map<string, number>} */
const failures = new Map();
let lostSends = 0;
let holdAfterLanding = false;
/** The oldest slot this node still answers about (a node keeping no history moves it on). */
let minimumLedgerSlot = 0;

/**
 * @param {unknown} err
 * @returns {string}
 */
function describeError(err) {
  if (typeof err === 'object' && err !== null && 'toString' in err) {
    const text = String(err);
    if (text !== '[object Object]') return text;
  }
  if (typeof err === 'number') return `TransactionError(${err})`;
  return JSON.stringify(err) ?? 'unknown error';
}

/**
 * @param {{ id: number | string, method: string, params?: unknown[] }} request
 * @returns {{ answer: unknown, hold?: boolean }}
 */
function answer(request) {
  calls.push(request.method);
  /** @param {unknown} result */
  const reply = (result) => ({ answer: { jsonrpc: '2.0', id: request.id, result } });
  /** @param {number} code @param {string} message @param {unknown} [data] */
  const error = (code, message, data) => ({
    answer: { jsonrpc: '2.0', id: request.id, error: { code, message, data } },
  });
  const slot = Number(svm.getClock().slot);
  const context = { slot };
  const params = request.params ?? [];
  const failing = failures.get(request.method) ?? 0;
  if (failing > 0) {
    failures.set(request.method, failing - 1);
    return error(-32603, 'Internal error (injected by the test)');
  }
  switch (request.method) {
    case 'getLatestBlockhash':
      return reply({
        context,
        value: {
          blockhash: svm.latestBlockhash(),
          lastValidBlockHeight: slot + BLOCKHASH_LIFETIME,
        },
      });
    // a block every slot: the height is the slot
    case 'getBlockHeight':
    case 'getSlot':
      return reply(slot);
    case 'minimumLedgerSlot':
      return reply(minimumLedgerSlot);
    case 'getBalance': {
      const balance = svm.getBalance(address(String(params[0])));
      return reply({ context, value: Number(balance ?? 0n) });
    }
    case 'getSignatureStatuses':
      return reply({
        context,
        value: /** @type {string[]} */ (params[0]).map((signature) => {
          const status = statuses.get(signature);
          return status === undefined
            ? null
            : {
                slot: status.slot,
                confirmations: null,
                err: status.err,
                confirmationStatus: 'finalized',
              };
        }),
      });
    case 'getTransaction': {
      const found = landed.find((t) => t.signature === params[0]);
      if (found === undefined) return reply(null);
      return reply({
        slot: found.slot,
        blockTime: null,
        version: 0,
        transaction: [found.wire, 'base64'],
        meta: {
          err: null,
          status: { Ok: null },
          fee: 5000,
          preBalances: [],
          postBalances: [],
          innerInstructions: [],
          logMessages: [],
          preTokenBalances: [],
          postTokenBalances: [],
          rewards: [],
          loadedAddresses: { writable: [], readonly: [] },
          computeUnitsConsumed: 0,
        },
      });
    }
    case 'sendTransaction': {
      const wire = String(params[0]);
      const transaction = getTransactionDecoder().decode(getBase64Encoder().encode(wire));
      const message = getCompiledTransactionMessageDecoder().decode(transaction.messageBytes);
      const payer = message.staticAccounts[0];
      const first = payer === undefined ? null : transaction.signatures[payer];
      const signature = first ? getBase58Decoder().decode(first) : '';
      if (lostSends > 0) {
        lostSends--;
        return reply(signature);
      }
      // sent again once it landed: a validator answers the signature and lands nothing
      if (statuses.has(signature) || landed.some((t) => t.signature === signature))
        return reply(signature);
      const outcome = svm.sendTransaction(transaction);
      if (outcome instanceof FailedTransactionMetadata) {
        const err = describeError(outcome.err());
        return error(-32002, `Transaction simulation failed: ${err}`, {
          err,
          logs: outcome.meta().logs(),
          accounts: null,
          unitsConsumed: Number(outcome.meta().computeUnitsConsumed()),
        });
      }
      statuses.set(signature, { slot, err: null });
      const instructions = 'instructions' in message ? message.instructions : [];
      landed.push({
        signature,
        slot,
        wire,
        programs: instructions.map((ix) => message.staticAccounts[ix.programAddressIndex] ?? ''),
      });
      svm.warpToSlot(BigInt(slot + 1));
      return { ...reply(signature), hold: holdAfterLanding };
    }
    // the test's own methods
    case 'test_airdrop': {
      const result = svm.airdrop(address(String(params[0])), lamports(BigInt(String(params[1]))));
      return result instanceof FailedTransactionMetadata
        ? error(-32000, `airdrop failed: ${describeError(result.err())}`)
        : reply(null);
    }
    case 'test_failNext':
      failures.set(String(params[0]), (failures.get(String(params[0])) ?? 0) + Number(params[1]));
      return reply(null);
    case 'test_loseSends':
      lostSends = Number(params[0]);
      return reply(null);
    case 'test_holdAfterLanding':
      holdAfterLanding = params[0] === true;
      return reply(null);
    case 'test_advance':
      svm.warpToSlot(svm.getClock().slot + BigInt(Number(params[0])));
      svm.expireBlockhash();
      return reply(null);
    // forgets every status, as a node without transaction history does after a while
    case 'test_loseHistory':
      statuses.clear();
      minimumLedgerSlot = slot + 1;
      return reply(null);
    case 'test_landed':
      return reply(landed);
    case 'test_calls':
      return reply(calls);
    default:
      return error(-32601, `Method not found: ${request.method}`);
  }
}

const server = http.createServer((req, res) => {
  /** @type {Buffer[]} */
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      res.writeHead(400).end();
      return;
    }
    const answers = (Array.isArray(body) ? body : [body]).map(answer);
    // a transaction landed, and its sender is never told (the test kills it meanwhile)
    if (answers.some((a) => a.hold)) return;
    const result = Array.isArray(body) ? answers.map((a) => a.answer) : answers[0]?.answer;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(result));
  });
});
// no subscriptions (WebSocket): clients fall back to asking
server.on('upgrade', (_req, socket) => socket.destroy());
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}` })}\n`);
});
process.stdin.resume();
process.stdin.on('close', () => process.exit(0));
