import {
  Connection,
  Keypair,
  LAMPORTS_PER_SOL,
  PublicKey,
  SendTransactionError,
  SystemProgram,
  Transaction,
  TransactionMessage,
  VersionedTransaction,
} from '@solana/web3.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { observeSolanaConnection } from '../../src/instrumentations/solana.js';
import { base58, parseWireTransaction } from '../../src/instrumentations/solana-wire.js';
import { LiteSvmRpc } from '@flightlog/test-support';
import { failingSessions } from '../harness/failing-sessions.js';
import { lastTrace, recordedSession } from '../harness/recorded-session.js';

let rpc: LiteSvmRpc;
beforeAll(async () => {
  rpc = await new LiteSvmRpc().start();
});
afterAll(() => rpc.close());

const connect = () => new Connection(rpc.url, 'confirmed');
const funded = async (sol = 10) => {
  const payer = Keypair.generate();
  await rpc.airdrop(payer.publicKey.toBase58(), BigInt(sol * LAMPORTS_PER_SOL));
  return payer;
};
const transfer = (from: Keypair, to: PublicKey, lamports: number) =>
  new Transaction().add(
    SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: to, lamports }),
  );
const versioned = async (from: Keypair, moves: [PublicKey, number][]) => {
  const { blockhash } = await connect().getLatestBlockhash();
  const message = new TransactionMessage({
    payerKey: from.publicKey,
    recentBlockhash: blockhash,
    instructions: moves.map(([to, lamports]) =>
      SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: to, lamports }),
    ),
  }).compileToV0Message();
  const tx = new VersionedTransaction(message);
  tx.sign([from]);
  return tx;
};

describe('observeSolanaConnection against a Solana runtime (LiteSVM behind JSON-RPC)', () => {
  it('records sendTransaction as chain_tx: signature, lamports moved, program, instruction', async () => {
    const recorded = recordedSession();
    const payer = await funded();
    const recipient = Keypair.generate().publicKey;
    const connection = observeSolanaConnection(connect(), recorded.session, { network: 'devnet' });
    const signature = await connection.sendTransaction(transfer(payer, recipient, 1_500_000), [
      payer,
    ]);
    expect(recorded.client.stats().recordedEvents).toBe(1);
    expect(await connection.getBalance(recipient)).toBe(1_500_000);
    const events = await recorded.events();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'chain_tx', status: 'ok', errorMessage: null });
    expect(events[0]?.payload).toEqual({
      signature,
      lamports: '1500000',
      network: 'devnet',
      programId: '11111111111111111111111111111111',
      instruction: 'transfer',
      programIds: ['11111111111111111111111111111111'],
    });
    expect(lastTrace(recorded)).toMatchObject({ totalLamports: '1500000', chainTxCount: 1 });
  });

  it('records sendRawTransaction of a v0 transaction once, summing its transfers', async () => {
    const recorded = recordedSession();
    const payer = await funded();
    const [a, b] = [Keypair.generate().publicKey, Keypair.generate().publicKey];
    const tx = await versioned(payer, [
      [a, 2_000_000],
      [b, 3_000_000],
    ]);
    const connection = observeSolanaConnection(connect(), recorded.session);
    const signature = await connection.sendRawTransaction(tx.serialize());
    expect(signature).toBe(base58(tx.signatures[0] as Uint8Array));
    const [event] = await recorded.events();
    expect(event?.payload).toMatchObject({
      signature,
      lamports: '5000000',
      instruction: 'transfer',
    });
    expect(event?.payload).not.toHaveProperty('network'); // a loopback URL names no cluster
  });

  it('throws what the unwrapped connection throws for a refused transaction, and records it', async () => {
    const recorded = recordedSession();
    // the same refusal twice: two payers of 1 SOL (a failed transaction still pays its fee)
    const refused = async (connection: Connection) => {
      const payer = await funded(1);
      return connection
        .sendTransaction(transfer(payer, Keypair.generate().publicKey, 5 * LAMPORTS_PER_SOL), [
          payer,
        ])
        .catch((e: unknown) => e);
    };
    const plain = await refused(connect());
    const wrapped = await refused(observeSolanaConnection(connect(), recorded.session));
    expect(wrapped).toBeInstanceOf(SendTransactionError);
    expect((wrapped as Error).message).toBe((plain as Error).message);
    const [event] = await recorded.events();
    expect(event).toMatchObject({
      type: 'chain_tx',
      status: 'error',
      errorMessage: (wrapped as Error).message,
    });
    expect(event?.payload).toMatchObject({
      lamports: '0',
      requestedLamports: String(5 * LAMPORTS_PER_SOL),
      instruction: 'transfer',
    });
    expect((event?.payload as { signature: string }).signature).toMatch(
      /^[1-9A-HJ-NP-Za-km-z]{64,88}$/,
    );
    expect((event?.payload as { logs: string[] }).logs.join('\n')).toContain('insufficient');
    expect(lastTrace(recorded)).toMatchObject({ totalLamports: '0', chainTxCount: 1 });
  });

  it('records a refused send as it was, though the caller re-signs the transaction and edits the error at once', async () => {
    const recorded = recordedSession();
    const payer = await funded(1);
    const tx = transfer(payer, Keypair.generate().publicKey, 5 * LAMPORTS_PER_SOL);
    const connection = observeSolanaConnection(connect(), recorded.session);
    const error = (await connection.sendTransaction(tx, [payer]).catch((e: unknown) => e)) as {
      message: string;
      logs: string[];
    };
    const refusedSignature = base58(tx.signature as Uint8Array);
    const logs = [...error.logs];
    // What a retrying agent does in the same turn: a new blockhash, signed anew, and the
    // error's logs trimmed for its own report.
    tx.recentBlockhash = Keypair.generate().publicKey.toBase58();
    tx.sign(payer);
    error.logs.length = 0;
    error.message = 'edited afterwards';
    expect(base58(tx.signature as Uint8Array)).not.toBe(refusedSignature);
    recorded.session.end();
    const [event] = await recorded.events();
    expect(event?.errorMessage).not.toBe('edited afterwards');
    expect(event?.errorMessage).toContain('insufficient');
    expect(event?.payload).toMatchObject({ signature: refusedSignature, logs });
  });

  it('records concurrent sends once each, with exact totals', async () => {
    const recorded = recordedSession();
    const connection = observeSolanaConnection(connect(), recorded.session);
    const sends = Array.from({ length: 8 }, async (_, i) => {
      const payer = await funded();
      return connection.sendTransaction(
        transfer(payer, Keypair.generate().publicKey, (i + 1) * 1_000_000),
        [payer],
      );
    });
    const signatures = await Promise.all(sends);
    const events = await recorded.events();
    expect(events.map((e) => (e.payload as { signature: string }).signature).sort()).toEqual(
      [...signatures].sort(),
    );
    expect(lastTrace(recorded)).toMatchObject({ totalLamports: '36000000', chainTxCount: 8 });
  });

  it('keeps the connection as it was, and capture: false leaves out programs and logs', async () => {
    const recorded = recordedSession();
    const original = connect();
    const connection = observeSolanaConnection(original, recorded.session, { capture: false });
    expect(connection).toBeInstanceOf(Connection);
    expect(connection.rpcEndpoint).toBe(original.rpcEndpoint);
    expect(connection.commitment).toBe('confirmed');
    const payer = await funded();
    await original.sendTransaction(transfer(payer, Keypair.generate().publicKey, 1_000_000), [
      payer,
    ]);
    const signature = await connection.sendTransaction(
      transfer(payer, Keypair.generate().publicKey, 2_000_000),
      [payer],
    );
    const statuses = await connection.getSignatureStatuses([signature]);
    expect(statuses.value[0]?.err).toBeNull();
    const events = await recorded.events();
    expect(events).toHaveLength(1);
    expect(events[0]?.payload).toEqual({
      signature,
      lamports: '2000000',
      programId: '11111111111111111111111111111111',
      instruction: 'transfer',
      captured: false,
    });
  });

  it('reads the wire format: signatures, legacy and v0 messages', async () => {
    const payer = await funded();
    const legacy = transfer(payer, Keypair.generate().publicKey, 42);
    legacy.recentBlockhash = (await connect().getLatestBlockhash()).blockhash;
    legacy.feePayer = payer.publicKey;
    legacy.sign(payer);
    const parsed = parseWireTransaction(legacy.serialize());
    expect(parsed.signature).toBe(base58(legacy.signature as Uint8Array));
    expect(parsed.instructions).toHaveLength(1);
    expect(base58(parsed.instructions[0]!.programId)).toBe(SystemProgram.programId.toBase58());
    expect(base58(new Uint8Array(32))).toBe('11111111111111111111111111111111');
    expect(base58(Uint8Array.from([0, 0, 1]))).toBe('112');
  });
});

describe('observeSolanaConnection: failures of its own', () => {
  it('never throws into the host: when its own recording fails, sends give what they give unwrapped', async () => {
    const refused = async (connection: Connection) => {
      const payer = await funded(1);
      return connection
        .sendTransaction(transfer(payer, Keypair.generate().publicKey, 5 * LAMPORTS_PER_SOL), [
          payer,
        ])
        .catch((e: unknown) => e);
    };
    const plainRefusal = (await refused(connect())) as Error;
    for (const { name, session, failedAsExpected } of failingSessions()) {
      const connection = observeSolanaConnection(connect(), session, { network: 'devnet' });
      const payer = await funded();
      const recipient = Keypair.generate().publicKey;
      const tx = transfer(payer, recipient, 1_500_000);
      const signature = await connection.sendTransaction(tx, [payer]);
      // what sendTransaction returns unwrapped: the signature of the transaction it signed
      expect(signature, name).toBe(base58(tx.signature as Uint8Array));
      expect(await connect().getBalance(recipient), name).toBe(1_500_000);
      const v0 = await versioned(await funded(), [[recipient, 500_000]]);
      expect(await connection.sendRawTransaction(v0.serialize()), name).toBe(
        base58(v0.signatures[0] as Uint8Array),
      );
      const refusal = await refused(connection);
      expect(refusal, name).toBeInstanceOf(SendTransactionError);
      expect((refusal as Error).message, name).toBe(plainRefusal.message);
      failedAsExpected();
    }
  });
});
