import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { getBase58Decoder } from '@solana/kit';

/*
 * A Solana JSON-RPC endpoint over LiteSVM, a real Solana runtime, for the tests: the validator
 * runs in a process of its own (litesvm-validator.mjs says why), and this is the test's handle on
 * it — its URL for the SDKs under test, and the test's controls: fund an account, make the
 * cluster fail or lose what it is sent, move the chain on, read back what landed.
 */

const VALIDATOR = fileURLToPath(new URL('./litesvm-validator.mjs', import.meta.url));

/** A transaction that landed: its signature, slot, wire bytes (base64), programs it calls. */
export interface LandedTransaction {
  signature: string;
  slot: number;
  wire: string;
  programs: string[];
}

export class LiteSvmRpc {
  private child: ChildProcess | undefined;
  private endpoint = '';
  private id = 0;

  get url(): string {
    return this.endpoint;
  }

  async start(): Promise<this> {
    const child = spawn(process.execPath, [VALIDATOR], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child = child;
    let output = '';
    this.endpoint = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`validator did not start: ${output}`)),
        30_000,
      );
      const onData = (data: Buffer) => {
        output += data.toString();
        const found = /\{"url":"([^"]+)"\}/.exec(output);
        if (found?.[1]) {
          clearTimeout(timer);
          resolve(found[1]);
        }
      };
      child.stdout?.on('data', onData);
      child.stderr?.on('data', onData);
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`validator exited with ${code}: ${output}`));
      });
    });
    return this;
  }

  async close(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
  }

  private async control<T>(method: string, params: unknown[] = []): Promise<T> {
    const response = await fetch(this.endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: ++this.id, method, params }),
    });
    const body = (await response.json()) as { result?: T; error?: { message: string } };
    if (body.error) throw new Error(`${method}: ${body.error.message}`);
    return body.result as T;
  }

  /** Credits `lamports` to the account at `address` (base58). */
  airdrop(address: string, lamports: bigint): Promise<void> {
    return this.control('test_airdrop', [address, lamports.toString()]);
  }

  /** The next `count` calls of `method` answer an internal error (a cluster having trouble). */
  failNext(method: string, count = 1): Promise<void> {
    return this.control('test_failNext', [method, count]);
  }

  /** From now, the next `count` transactions sent are answered as sent but never land. */
  loseSends(count: number): Promise<void> {
    return this.control('test_loseSends', [count]);
  }

  /** While on, a transaction that lands is never answered to its sender. */
  holdAfterLanding(on: boolean): Promise<void> {
    return this.control('test_holdAfterLanding', [on]);
  }

  /** Forgets every transaction status, as a node that keeps no transaction history does. */
  loseHistory(): Promise<void> {
    return this.control('test_loseHistory');
  }

  /** Moves the chain `slots` on, and expires the current blockhash. */
  advance(slots: number): Promise<void> {
    return this.control('test_advance', [slots]);
  }

  /** Every transaction that landed, in order. */
  landed(): Promise<LandedTransaction[]> {
    return this.control('test_landed');
  }

  /** The RPC methods called, in order (the test's own included). */
  calls(): Promise<string[]> {
    return this.control('test_calls');
  }
}

/** A new Ed25519 keypair as Solana tools write one: 64 bytes (secret, then public) and its address. */
export function solanaKeypair(): { secretKey: Uint8Array; address: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const secret = Buffer.from(privateKey.export({ format: 'jwk' }).d ?? '', 'base64url');
  const pub = Buffer.from(publicKey.export({ format: 'jwk' }).x ?? '', 'base64url');
  const secretKey = new Uint8Array(64);
  secretKey.set(secret, 0);
  secretKey.set(pub, 32);
  return { secretKey, address: getBase58Decoder().decode(pub) };
}
