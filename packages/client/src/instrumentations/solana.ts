import type { ChainTxPayload, SolanaNetwork } from '@flightlog/protocol';
import type { FlightlogSession } from '../session-types.js';
import { field, type ObserveOptions } from './llm-payload.js';
import { proxyTree, type Instrumented } from './method-proxy.js';
import { beginStep, instrumentCall, isNativePromise, watchPromise } from './observed-step.js';
import {
  summarize,
  transactionFacts,
  type TransactionFacts,
  type TransactionSummary,
} from './solana-wire.js';

export type { ObserveOptions } from './llm-payload.js';

/** Options of {@link observeSolanaConnection}. */
export interface ObserveSolanaOptions extends ObserveOptions {
  /** The cluster, for the events' `network`. Default: read from the RPC URL (`devnet`, `mainnet`). */
  network?: SolanaNetwork;
}

const MAX_LOG_LINES = 50;

/**
 * Records every transaction sent through a `@solana/web3.js` `Connection` —
 * `sendTransaction`, `sendRawTransaction`, `sendEncodedTransaction` — as a `chain_tx` in
 * `session`: its signature, the lamports it moves through the system program (transfers,
 * account creation) as `lamports` (which feeds the trace's `totalLamports`), its main program
 * and instruction, the network. A transaction the RPC node refuses (a failed preflight, a
 * blockhash not found) is an error event with `lamports: "0"`, what it asked to move as
 * `requestedLamports`, and the node's logs. Returns a connection that behaves exactly like
 * `connection` (same types, results, errors, `this`), which is left unchanged. Never throws.
 *
 * ```ts
 * const connection = observeSolanaConnection(new Connection(url), session);
 * ```
 */
export function observeSolanaConnection<C extends object>(
  connection: C,
  session: FlightlogSession,
  options?: ObserveSolanaOptions,
): C {
  try {
    const capture = field(options, 'capture') !== false;
    const network = networkOf(field(options, 'network'), field(connection, 'rpcEndpoint'));
    const send =
      (encoding: 'object' | 'bytes' | 'base64'): Instrumented =>
      (original, thisArg, args) =>
        recordSend(session, capture, network, encoding, original, thisArg, args);
    // sendTransaction calls this.sendRawTransaction on the connection itself: recorded once.
    return proxyTree(connection, {
      methods: {
        sendTransaction: send('object'),
        sendRawTransaction: send('bytes'),
        sendEncodedTransaction: send('base64'),
      },
    });
  } catch {
    return connection;
  }
}

function networkOf(option: unknown, endpoint: unknown): SolanaNetwork | undefined {
  if (option === 'devnet' || option === 'mainnet') return option;
  if (typeof endpoint !== 'string') return undefined;
  if (endpoint.includes('devnet')) return 'devnet';
  if (endpoint.includes('mainnet')) return 'mainnet';
  return undefined;
}

function factsOf(transaction: unknown, encoding: string): TransactionFacts | undefined {
  try {
    if (encoding === 'base64' && typeof transaction === 'string')
      return transactionFacts(Buffer.from(transaction, 'base64'));
    if (encoding === 'bytes' && Array.isArray(transaction))
      return transactionFacts(Uint8Array.from(transaction as number[]));
    return transactionFacts(transaction);
  } catch {
    return undefined;
  }
}

function recordSend(
  session: FlightlogSession,
  capture: boolean,
  network: SolanaNetwork | undefined,
  encoding: 'object' | 'bytes' | 'base64',
  original: CallableFunction,
  thisArg: unknown,
  args: unknown[],
): unknown {
  const transaction = args[0];
  let summary: TransactionSummary | undefined;
  const build = (ok: boolean, signature: unknown, error?: unknown) => (): ChainTxPayload => {
    // A legacy Transaction is signed during sendTransaction: its signature is read afterwards.
    const chosen =
      typeof signature === 'string'
        ? signature
        : (factsOf(transaction, encoding)?.signature ?? null);
    const lamports = summary?.lamports ?? '0';
    const payload: ChainTxPayload = { signature: chosen, lamports: ok ? lamports : '0' };
    if (!ok) payload.requestedLamports = lamports;
    if (network !== undefined) payload.network = network;
    if (summary?.programId !== undefined) payload.programId = summary.programId;
    if (summary?.instruction !== undefined) payload.instruction = summary.instruction;
    if (summary === undefined) payload.decoded = false;
    if (capture) {
      if (summary !== undefined) payload.programIds = summary.programIds;
      const logs = field(error, 'logs');
      if (Array.isArray(logs)) payload.logs = logs.slice(0, MAX_LOG_LINES).map(String);
    } else payload.captured = false;
    return payload;
  };
  return instrumentCall(
    () => {
      const facts = factsOf(transaction, encoding);
      if (facts !== undefined) summary = summarize(facts);
      return beginStep(session, 'chain_tx');
    },
    () => Reflect.apply(original, thisArg, args),
    (step, result) => {
      if (!isNativePromise(result)) {
        step.ok(build(true, result));
        return;
      }
      watchPromise(
        result,
        (signature) => step.ok(build(true, signature)),
        (error) => step.fail(build(false, undefined, error), error),
      );
    },
    (step, error) => step.fail(build(false, undefined, error), error),
  );
}
