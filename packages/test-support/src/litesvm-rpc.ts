import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { PublicKey, VersionedTransaction } from '@solana/web3.js';
import { FailedTransactionMetadata, LiteSVM } from 'litesvm';
import { base58 } from '@scure/base';

/*
 * A Solana JSON-RPC endpoint on a loopback port over LiteSVM, a real Solana runtime in this
 * process: the methods @solana/web3.js's Connection needs to send a transaction and read the
 * outcome. Transactions really execute (system program, fees, signatures checked); a failure is
 * answered as a validator answers a failed preflight (-32002 with the logs).
 */
export class LiteSvmRpc {
  readonly svm = new LiteSVM();
  /** Methods called, in order. */
  readonly calls: string[] = [];
  private readonly statuses = new Map<string, { slot: number; err: unknown }>();
  private readonly server: http.Server;
  private port = 0;

  constructor() {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as
          RpcRequest | RpcRequest[];
        const answer = Array.isArray(body) ? body.map((r) => this.answer(r)) : this.answer(body);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(answer));
      });
    });
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private answer(request: RpcRequest): unknown {
    this.calls.push(request.method);
    const reply = (result: unknown) => ({ jsonrpc: '2.0', id: request.id, result });
    const context = { slot: Number(this.svm.getClock().slot) };
    const params = request.params ?? [];
    switch (request.method) {
      case 'getLatestBlockhash':
        return reply({
          context,
          value: { blockhash: this.svm.latestBlockhash(), lastValidBlockHeight: 1_000 },
        });
      case 'getBalance': {
        const lamports = this.svm.getBalance(new PublicKey(params[0] as string));
        return reply({ context, value: Number(lamports ?? 0n) });
      }
      case 'getSlot':
        return reply(context.slot);
      case 'getSignatureStatuses':
        return reply({
          context,
          value: (params[0] as string[]).map((signature) => {
            const status = this.statuses.get(signature);
            return status === undefined
              ? null
              : {
                  slot: status.slot,
                  confirmations: null,
                  err: status.err,
                  confirmationStatus: 'confirmed',
                };
          }),
        });
      case 'sendTransaction': {
        const bytes = Buffer.from(params[0] as string, 'base64');
        const transaction = VersionedTransaction.deserialize(bytes);
        const signature = base58.encode(transaction.signatures[0] ?? new Uint8Array(64));
        const outcome = this.svm.sendTransaction(transaction);
        if (outcome instanceof FailedTransactionMetadata) {
          const err = outcome.err();
          return {
            jsonrpc: '2.0',
            id: request.id,
            error: {
              code: -32002,
              message: `Transaction simulation failed: ${describeError(err)}`,
              data: {
                err: describeError(err),
                logs: outcome.meta().logs(),
                accounts: null,
                unitsConsumed: Number(outcome.meta().computeUnitsConsumed()),
              },
            },
          };
        }
        this.statuses.set(signature, { slot: context.slot, err: null });
        return reply(signature);
      }
      default:
        return {
          jsonrpc: '2.0',
          id: request.id,
          error: { code: -32601, message: `Method not found: ${request.method}` },
        };
    }
  }
}

interface RpcRequest {
  jsonrpc: '2.0';
  id: number | string;
  method: string;
  params?: unknown[];
}

function describeError(err: unknown): string {
  if (typeof err === 'object' && err !== null && 'toString' in err) {
    const text = String(err);
    if (text !== '[object Object]') return text;
  }
  if (typeof err === 'number') return `TransactionError(${err})`;
  return JSON.stringify(err) ?? 'unknown error';
}
