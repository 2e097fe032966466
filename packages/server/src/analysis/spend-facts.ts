import type { Trace } from '@flightlog/protocol';
import { bool, formatUsd, lamportsOf, num, obj, str } from './payload-fields.js';
import { labelOf, type ReadEvent } from './run-steps.js';

/*
 * What a run spent and moved: tokens and model cost from llm_call payloads, lamports from chain
 * transactions (exact, as big integers), and every chain transaction and x402 payment with its
 * outcome and identifiers. The trace's own totals are stated beside what the readable payloads
 * add up to, since encrypted or left-out events may hold the rest.
 */

export interface ContributorFact {
  sequence: number;
  label: string;
  /** Decimal text: USD for model cost, lamports for chain transactions. */
  amount: string;
  /** Share of the readable total, 0..1. */
  share: number;
  tokens?: number;
}

export interface ChainTxFact {
  sequence: number;
  status: string;
  instruction: string | null;
  programId: string | null;
  network: string | null;
  lamports: string | null;
  feeLamports: string | null;
  confirmation: string | null;
  signature: string | null;
  slot: string | null;
  errorMessage: string | null;
}

export interface PaymentFact {
  sequence: number;
  status: string;
  resource: string | null;
  amount: string | null;
  asset: string | null;
  network: string | null;
  payTo: string | null;
  settled: boolean | null;
  txSignature: string | null;
  errorMessage: string | null;
}

export interface SpendFacts {
  tokens: {
    /** The trace's total. */
    total: number;
    /** Summed over readable llm_call payloads. */
    input: number;
    output: number;
    llmCalls: number;
  };
  cost: {
    /** The trace's total (exact decimal text). */
    totalUsd: string;
    readableUsd: string;
    /** The most costly models (at most `limit`). */
    byModel: { model: string; calls: number; usd: string; tokens: number }[];
    top: ContributorFact[];
  };
  lamports: {
    /** The trace's total (exact decimal text). */
    total: string;
    readable: string;
    /** Lamports of transactions that failed (status error or confirmation failed). */
    inFailed: string;
    fees: string;
    top: ContributorFact[];
  };
}

export interface MovementFacts {
  spend: SpendFacts;
  chainTxs: ChainTxFact[];
  /** Chain transactions beyond the listed ones. */
  moreChainTxs: number;
  payments: PaymentFact[];
  morePayments: number;
}

function share(part: bigint | number, whole: bigint | number): number {
  if (typeof part === 'bigint' && typeof whole === 'bigint')
    return whole === 0n ? 0 : Number((part * 10_000n) / whole) / 10_000;
  return Number(whole) === 0 ? 0 : Number(part) / Number(whole);
}

/** The model cost of one readable llm_call (never negative). */
export const costOf = (read: ReadEvent): number =>
  read.event.type === 'llm_call' && read.payload
    ? Math.max(0, num(read.payload, 'costUsd') ?? 0)
    : 0;

export function collectSpend(trace: Trace, reads: ReadEvent[], limit: number): MovementFacts {
  let inputTokens = 0;
  let outputTokens = 0;
  let llmCalls = 0;
  let readableUsd = 0;
  const models = new Map<string, { model: string; calls: number; usd: number; tokens: number }>();
  const costs: { read: ReadEvent; usd: number; tokens: number }[] = [];
  let readableLamports = 0n;
  let fees = 0n;
  let inFailed = 0n;
  const transfers: { read: ReadEvent; lamports: bigint }[] = [];
  const chainTxs: ChainTxFact[] = [];
  const payments: PaymentFact[] = [];
  for (const read of reads) {
    const { event, payload } = read;
    if (event.type === 'llm_call' && payload) {
      llmCalls++;
      const usage = obj(payload, 'usage');
      const inTokens = num(usage, 'inputTokens') ?? 0;
      const outTokens = num(usage, 'outputTokens') ?? 0;
      const tokens = num(usage, 'totalTokens') ?? inTokens + outTokens;
      inputTokens += inTokens;
      outputTokens += outTokens;
      const usd = costOf(read);
      readableUsd += usd;
      costs.push({ read, usd, tokens });
      const model = str(payload, 'model') ?? '(unknown model)';
      const entry = models.get(model) ?? { model, calls: 0, usd: 0, tokens: 0 };
      entry.calls++;
      entry.usd += usd;
      entry.tokens += tokens;
      models.set(model, entry);
    }
    if (event.type === 'chain_tx') {
      const tx = chainTxOf(read);
      chainTxs.push(tx);
      const txFailed = event.status === 'error' || tx.confirmation === 'failed';
      if (tx.lamports !== null) {
        const lamports = BigInt(tx.lamports);
        readableLamports += lamports;
        if (txFailed) inFailed += lamports;
        transfers.push({ read, lamports });
      }
      if (tx.feeLamports !== null) fees += BigInt(tx.feeLamports);
    }
    if (event.type === 'x402_payment') payments.push(paymentOf(read));
  }

  return {
    spend: {
      tokens: { total: trace.totalTokens, input: inputTokens, output: outputTokens, llmCalls },
      cost: {
        totalUsd: trace.totalCostUsd,
        readableUsd: formatUsd(readableUsd),
        byModel: [...models.values()]
          .sort((a, b) => b.usd - a.usd)
          .slice(0, limit)
          .map((m) => ({ ...m, usd: formatUsd(m.usd) })),
        top: costs
          .filter((c) => c.usd > 0)
          .sort((a, b) => b.usd - a.usd)
          .slice(0, 3)
          .map((c) => ({
            sequence: c.read.event.sequence,
            label: labelOf(c.read),
            amount: formatUsd(c.usd),
            share: share(c.usd, readableUsd),
            tokens: c.tokens,
          })),
      },
      lamports: {
        total: trace.totalLamports,
        readable: readableLamports.toString(),
        inFailed: inFailed.toString(),
        fees: fees.toString(),
        top: transfers
          .filter((t) => t.lamports > 0n)
          .sort((a, b) => (b.lamports > a.lamports ? 1 : b.lamports < a.lamports ? -1 : 0))
          .slice(0, 3)
          .map((t) => ({
            sequence: t.read.event.sequence,
            label: labelOf(t.read),
            amount: t.lamports.toString(),
            share: share(t.lamports, readableLamports),
          })),
      },
    },
    chainTxs: chainTxs.slice(0, limit),
    moreChainTxs: Math.max(0, chainTxs.length - limit),
    payments: payments.slice(0, limit),
    morePayments: Math.max(0, payments.length - limit),
  };
}

/** A chain transaction's facts (for the cause of a failure too). */
export function chainTxOf(read: ReadEvent): ChainTxFact {
  const { event, payload } = read;
  return {
    sequence: event.sequence,
    status: event.status,
    instruction: str(payload, 'instruction'),
    programId: str(payload, 'programId'),
    network: str(payload, 'network'),
    lamports: lamportsOf(payload, 'lamports'),
    feeLamports: lamportsOf(payload, 'feeLamports'),
    confirmation: str(payload, 'confirmation'),
    signature: str(payload, 'signature'),
    slot: str(payload, 'slot'),
    errorMessage: event.errorMessage ?? null,
  };
}

/** An x402 payment's facts (for the cause of a failure too). */
export function paymentOf(read: ReadEvent): PaymentFact {
  const { event, payload } = read;
  return {
    sequence: event.sequence,
    status: event.status,
    resource: str(payload, 'resource'),
    amount: str(payload, 'amount'),
    asset: str(payload, 'asset'),
    network: str(payload, 'network'),
    payTo: str(payload, 'payTo'),
    settled: bool(payload, 'settled'),
    txSignature: str(payload, 'txSignature'),
    errorMessage: event.errorMessage ?? null,
  };
}
