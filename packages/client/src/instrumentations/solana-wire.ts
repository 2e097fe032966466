/*
 * Just enough of Solana's transaction format to say what a transaction moves, without
 * @solana/web3.js: the wire format (signatures, legacy and v0 messages), the instructions of
 * web3.js's Transaction and VersionedTransaction objects read structurally, the system program's
 * lamport-moving instructions, and base58.
 */

/** One instruction: its program's 32-byte id and its data. */
export interface RawInstruction {
  programId: Uint8Array;
  data: Uint8Array;
}

/** What a transaction says before it is sent. */
export interface TransactionFacts {
  /** Its first signature, base58; null while unsigned (all zeros) or unknown. */
  signature: string | null;
  instructions: RawInstruction[];
}

const ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';

/** Base58 (Bitcoin alphabet), as Solana writes keys and signatures. */
export function base58(bytes: Uint8Array): string {
  let zeros = 0;
  while (zeros < bytes.length && bytes[zeros] === 0) zeros += 1;
  const digits: number[] = [];
  for (let i = zeros; i < bytes.length; i++) {
    let carry = bytes[i] as number;
    for (let j = 0; j < digits.length; j++) {
      carry += (digits[j] as number) << 8;
      digits[j] = carry % 58;
      carry = (carry / 58) | 0;
    }
    while (carry > 0) {
      digits.push(carry % 58);
      carry = (carry / 58) | 0;
    }
  }
  let out = '1'.repeat(zeros);
  for (let i = digits.length - 1; i >= 0; i--) out += ALPHABET[digits[i] as number];
  return out;
}

/** A compact-u16 ("shortvec") length, and the offset after it. */
function shortVec(bytes: Uint8Array, offset: number): [number, number] {
  let value = 0;
  for (let shift = 0, i = offset; i < offset + 3; i++, shift += 7) {
    const byte = bytes[i];
    if (byte === undefined) throw new RangeError('truncated transaction');
    value |= (byte & 0x7f) << shift;
    if ((byte & 0x80) === 0) return [value, i + 1];
  }
  throw new RangeError('bad shortvec');
}

function signatureOf(bytes: Uint8Array | undefined): string | null {
  if (bytes === undefined || bytes.length !== 64 || bytes.every((b) => b === 0)) return null;
  return base58(bytes);
}

/** Parses a serialized transaction (legacy or v0). Throws on bytes that are not one. */
export function parseWireTransaction(bytes: Uint8Array): TransactionFacts {
  let [count, at] = shortVec(bytes, 0);
  const first = count > 0 ? bytes.subarray(at, at + 64) : undefined;
  at += 64 * count;
  // v0 (and later) messages start with 0x80 | version; legacy ones with the header.
  if (((bytes[at] as number) & 0x80) !== 0) at += 1;
  at += 3; // header: required signatures, readonly signed, readonly unsigned
  [count, at] = shortVec(bytes, at);
  const keys: Uint8Array[] = [];
  for (let i = 0; i < count; i++, at += 32) keys.push(bytes.subarray(at, at + 32));
  at += 32; // recent blockhash
  [count, at] = shortVec(bytes, at);
  const instructions: RawInstruction[] = [];
  for (let i = 0; i < count; i++) {
    const programIndex = bytes[at] as number;
    at += 1;
    let accounts: number;
    [accounts, at] = shortVec(bytes, at);
    at += accounts;
    let length: number;
    [length, at] = shortVec(bytes, at);
    const data = bytes.subarray(at, at + length);
    at += length;
    if (at > bytes.length) throw new RangeError('truncated transaction');
    // A program id from an address lookup table is not in the static keys: unknown here.
    const programId = keys[programIndex] ?? new Uint8Array(32).fill(255);
    instructions.push({ programId, data });
  }
  return { signature: signatureOf(first), instructions };
}

function bytesOf(value: unknown): Uint8Array | undefined {
  if (value instanceof Uint8Array) return value;
  if (typeof value !== 'object' || value === null) return undefined;
  const key = value as { toBytes?: () => unknown; toBuffer?: () => unknown };
  const bytes = typeof key.toBytes === 'function' ? key.toBytes() : key.toBuffer?.();
  return bytes instanceof Uint8Array ? bytes : undefined;
}

/**
 * The facts of a web3.js `Transaction` (legacy: `instructions` with `programId`, `data`,
 * `signature`) or `VersionedTransaction` (`message.staticAccountKeys`,
 * `message.compiledInstructions`, `signatures`), read without calling anything that changes it.
 */
export function transactionFacts(transaction: unknown): TransactionFacts | undefined {
  if (transaction instanceof Uint8Array) return parseWireTransaction(transaction);
  if (typeof transaction !== 'object' || transaction === null) return undefined;
  const tx = transaction as {
    instructions?: unknown;
    signature?: unknown;
    signatures?: unknown;
    message?: { staticAccountKeys?: unknown; compiledInstructions?: unknown };
  };
  if (Array.isArray(tx.instructions)) {
    const instructions: RawInstruction[] = [];
    for (const instruction of tx.instructions) {
      const programId = bytesOf((instruction as { programId?: unknown }).programId);
      const data = bytesOf((instruction as { data?: unknown }).data);
      if (programId !== undefined && data !== undefined) instructions.push({ programId, data });
    }
    return { signature: signatureOf(bytesOf(tx.signature)), instructions };
  }
  const keys = tx.message?.staticAccountKeys;
  const compiled = tx.message?.compiledInstructions;
  if (Array.isArray(keys) && Array.isArray(compiled)) {
    const instructions: RawInstruction[] = [];
    for (const instruction of compiled) {
      const { programIdIndex, data } = instruction as { programIdIndex?: unknown; data?: unknown };
      const programId =
        typeof programIdIndex === 'number' ? bytesOf(keys[programIdIndex]) : undefined;
      const bytes = bytesOf(data);
      if (programId !== undefined && bytes !== undefined)
        instructions.push({ programId, data: bytes });
    }
    const signatures = Array.isArray(tx.signatures) ? tx.signatures : [];
    return { signature: signatureOf(bytesOf(signatures[0])), instructions };
  }
  return undefined;
}

const SYSTEM_PROGRAM = '11111111111111111111111111111111';
const COMPUTE_BUDGET = 'ComputeBudget111111111111111111111111111111';
/** System program instructions that move lamports, by index (the amount is the u64 after it). */
const SYSTEM_MOVES: Record<number, string> = {
  0: 'createAccount',
  2: 'transfer',
  11: 'transferWithSeed',
};

/** The lamports a transaction moves through the system program, its main program and instruction. */
export interface TransactionSummary {
  lamports: string;
  programId?: string;
  instruction?: string;
  programIds: string[];
}

function u32(data: Uint8Array): number | undefined {
  if (data.length < 4) return undefined;
  return new DataView(data.buffer, data.byteOffset, 4).getUint32(0, true);
}

function u64At(data: Uint8Array, offset: number): bigint | undefined {
  if (data.length < offset + 8) return undefined;
  return new DataView(data.buffer, data.byteOffset + offset, 8).getBigUint64(0, true);
}

export function summarize(facts: TransactionFacts): TransactionSummary {
  let lamports = 0n;
  const programIds: string[] = [];
  let programId: string | undefined;
  let instruction: string | undefined;
  for (const { programId: id, data } of facts.instructions) {
    const program = base58(id);
    if (!programIds.includes(program)) programIds.push(program);
    if (program === COMPUTE_BUDGET) continue;
    if (program === SYSTEM_PROGRAM) {
      const index = u32(data);
      const name = index === undefined ? undefined : SYSTEM_MOVES[index];
      const amount = name === undefined ? undefined : u64At(data, 4);
      if (amount !== undefined) lamports += amount;
      programId ??= program;
      instruction ??= name ?? `system#${index ?? '?'}`;
    } else if (programId === undefined || programId === SYSTEM_PROGRAM) {
      // The first program besides the system program is what the transaction is about.
      if (programId === SYSTEM_PROGRAM) instruction = undefined;
      programId = program;
    }
  }
  const summary: TransactionSummary = { lamports: lamports.toString(), programIds };
  if (programId !== undefined) summary.programId = programId;
  if (instruction !== undefined) summary.instruction = instruction;
  return summary;
}
