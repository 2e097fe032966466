import { getAddMemoInstruction } from '@solana-program/memo';
import {
  appendTransactionMessageInstruction,
  createKeyPairSignerFromBytes,
  createSolanaRpc,
  createTransactionMessage,
  getBase64EncodedWireTransaction,
  getSignatureFromTransaction,
  pipe,
  setTransactionMessageFeePayerSigner,
  setTransactionMessageLifetimeUsingBlockhash,
  signTransactionMessageWithSigners,
  signature as toSignature,
  type Base64EncodedWireTransaction,
  type KeyPairSigner,
} from '@solana/kit';
import type { AnchorLanding, AnchorSink, SinkOutcome } from './anchor-sink.js';
import type { SignedAnchor } from '../store/anchor-store.js';

/*
 * The Solana sink: a tree's root goes on chain in one transaction holding one Memo-program
 * instruction, paid and signed by the anchoring keypair. Built on @solana/kit and the memo
 * program's client. A transaction counts as landed at `finalized` commitment: a root recorded on
 * a fork that is later dropped would leave proofs pointing at nothing.
 */

/** The RPC's answer did not come in time: a retryable failure. */
const RPC_TIMEOUT_MS = 15_000;

export interface SolanaMemoSinkOptions {
  cluster: string;
  rpcUrl: string;
  /** The anchoring keypair: 64 bytes, secret then public key, as `solana-keygen` writes it. */
  keypair: Uint8Array;
}

export class SolanaMemoSink implements AnchorSink {
  readonly cluster: string;
  private readonly rpc: ReturnType<typeof createSolanaRpc>;
  private signer: Promise<KeyPairSigner> | undefined;

  constructor(private readonly options: SolanaMemoSinkOptions) {
    this.cluster = options.cluster;
    this.rpc = createSolanaRpc(options.rpcUrl);
  }

  /** The anchoring keypair's address (base58). */
  async address(): Promise<string> {
    return (await this.keypairSigner()).address;
  }

  private keypairSigner(): Promise<KeyPairSigner> {
    // extractable: false — the secret key stays inside Web Crypto
    this.signer ??= createKeyPairSignerFromBytes(this.options.keypair, false);
    return this.signer;
  }

  async sign(memo: string): Promise<SinkOutcome<SignedAnchor>> {
    return attempt(async () => {
      const signer = await this.keypairSigner();
      const { context, value: latest } = await this.rpc
        .getLatestBlockhash({ commitment: 'finalized' })
        .send({ abortSignal: AbortSignal.timeout(RPC_TIMEOUT_MS) });
      const message = pipe(
        createTransactionMessage({ version: 0 }),
        (m) => setTransactionMessageFeePayerSigner(signer, m),
        (m) => setTransactionMessageLifetimeUsingBlockhash(latest, m),
        (m) => appendTransactionMessageInstruction(getAddMemoInstruction({ memo }), m),
      );
      const transaction = await signTransactionMessageWithSigners(message);
      return {
        signature: getSignatureFromTransaction(transaction),
        wire: getBase64EncodedWireTransaction(transaction),
        lastValidBlockHeight: latest.lastValidBlockHeight,
        signedSlot: context.slot,
      };
    });
  }

  async send(anchor: SignedAnchor): Promise<SinkOutcome<void>> {
    return attempt(async () => {
      await this.rpc
        .sendTransaction(anchor.wire as Base64EncodedWireTransaction, {
          encoding: 'base64',
          preflightCommitment: 'confirmed',
        })
        .send({ abortSignal: AbortSignal.timeout(RPC_TIMEOUT_MS) });
    });
  }

  async landing(anchor: SignedAnchor): Promise<SinkOutcome<AnchorLanding>> {
    return attempt(async (): Promise<AnchorLanding> => {
      const abortSignal = AbortSignal.timeout(RPC_TIMEOUT_MS);
      // the height first: a status read after it that finds nothing was not there at that height
      const height = await this.rpc
        .getBlockHeight({ commitment: 'finalized' })
        .send({ abortSignal });
      const { value } = await this.rpc
        .getSignatureStatuses([toSignature(anchor.signature)], { searchTransactionHistory: true })
        .send({ abortSignal });
      const status = value[0];
      if (status) {
        // only a finalized outcome is final: an error seen on a fork may not be the chain's
        if (status.confirmationStatus !== 'finalized') return { kind: 'pending' };
        if (status.err !== null)
          return {
            kind: 'failed',
            reason: `the transaction failed: ${JSON.stringify(status.err)}`,
          };
        return { kind: 'landed', slot: status.slot };
      }
      // Not seen: it can still land until the chain passes its last valid block height.
      if (height <= anchor.lastValidBlockHeight) return { kind: 'pending' };
      // Past it, "not seen" means "never landed" only if the RPC's history reaches back to it.
      const oldest = await this.rpc.minimumLedgerSlot().send({ abortSignal });
      if (oldest > anchor.signedSlot)
        return {
          kind: 'unknown',
          reason:
            `the RPC's history starts at slot ${oldest}, after the transaction was signed (slot ` +
            `${anchor.signedSlot}): point ANCHOR_RPC_URL at an RPC that keeps transaction history`,
        };
      return { kind: 'expired' };
    });
  }
}

/**
 * `work`'s value, or its failure as a value, said as the RPC said it: unreachable, slow, or a
 * refusal (no funds). A refusal at preflight lands nothing, and the anchorer signs anew only once
 * the old transaction expired, so trying again is always safe.
 */
async function attempt<T>(work: () => Promise<T>): Promise<SinkOutcome<T>> {
  try {
    return { ok: true, value: await work() };
  } catch (error) {
    return { ok: false, reason: describeRpcError(error) };
  }
}

function describeRpcError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
  return `${error.message}${cause}`.slice(0, 500);
}
