import { MEMO_PROGRAM_ADDRESS } from '@solana-program/memo';
import {
  createSolanaRpc,
  getBase58Decoder,
  getBase64Encoder,
  getCompiledTransactionMessageDecoder,
  getTransactionDecoder,
  getPublicKeyFromAddress,
  getUtf8Decoder,
  signature as toSignature,
  verifySignature,
} from '@solana/kit';

/*
 * Reads an anchoring transaction back from a Solana RPC, for `flightlog verify`: where it landed,
 * who signed it, and the memos it carries, decoded from the transaction's own bytes (not from
 * the RPC's parsed view of them).
 */

/** An anchoring transaction as the chain holds it. */
export interface AnchorTransaction {
  slot: bigint;
  /** The transaction's first signature (its id), as its bytes carry it. */
  signature: string;
  /** The fee payer: the anchoring keypair's address. */
  signer: string;
  /** Whether the fee payer's signature in its bytes verifies against its message. */
  signatureValid: boolean;
  /** The transaction's error on chain, null when it succeeded. */
  err: unknown;
  /** The data of each of its Memo-program instructions, as text. */
  memos: string[];
}

/** Reads transactions by signature. */
export interface AnchorReader {
  transaction(signature: string): Promise<AnchorTransaction | undefined>;
}

const RPC_TIMEOUT_MS = 15_000;
/** Transactions one reader keeps: the runs of an export share a few trees, each asked once. */
const KEPT_TRANSACTIONS = 1_000;

export class SolanaAnchorReader implements AnchorReader {
  private readonly rpc: ReturnType<typeof createSolanaRpc>;

  constructor(rpcUrl: string) {
    this.rpc = createSolanaRpc(rpcUrl);
  }

  private readonly kept = new Map<string, Promise<AnchorTransaction | undefined>>();

  transaction(signature: string): Promise<AnchorTransaction | undefined> {
    const known = this.kept.get(signature);
    if (known) return known;
    const asked = this.fetch(signature);
    // a failure is not kept: the next run of the same tree asks again
    asked.catch(() => this.kept.delete(signature));
    if (this.kept.size >= KEPT_TRANSACTIONS) this.kept.delete(this.kept.keys().next().value ?? '');
    this.kept.set(signature, asked);
    return asked;
  }

  private async fetch(signature: string): Promise<AnchorTransaction | undefined> {
    const found = await this.rpc
      .getTransaction(toSignature(signature), {
        encoding: 'base64',
        commitment: 'finalized',
        maxSupportedTransactionVersion: 0,
      })
      .send({ abortSignal: AbortSignal.timeout(RPC_TIMEOUT_MS) });
    if (found === null) return undefined;
    const bytes = getBase64Encoder().encode(found.transaction[0]);
    const transaction = getTransactionDecoder().decode(bytes);
    const message = getCompiledTransactionMessageDecoder().decode(transaction.messageBytes);
    const signer = message.staticAccounts[0];
    const first = signer === undefined ? null : transaction.signatures[signer];
    // the RPC is not trusted for who signed: the signature is checked against the message
    const signatureValid =
      signer !== undefined && first
        ? await verifySignature(
            await getPublicKeyFromAddress(signer),
            first,
            transaction.messageBytes,
          ).catch(() => false)
        : false;
    const utf8 = getUtf8Decoder();
    // legacy and v0 messages list their instructions; anchors are v0
    const instructions = 'instructions' in message ? message.instructions : [];
    const memos = instructions
      .filter((ix) => message.staticAccounts[ix.programAddressIndex] === MEMO_PROGRAM_ADDRESS)
      .map((ix) => utf8.decode(ix.data ?? new Uint8Array()));
    return {
      slot: found.slot,
      signature: first ? getBase58Decoder().decode(first) : '',
      signer: signer ?? '',
      signatureValid,
      // an answer without its outcome is not taken for a success
      err: found.meta ? found.meta.err : 'the RPC gave no outcome (meta) for it',
      memos,
    };
  }
}
