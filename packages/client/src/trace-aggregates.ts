import { ExactDecimal } from './exact-decimal.js';
import { storableText } from './storable-text.js';

/** The trace schema's caps on `toolsCalled`. */
const MAX_TOOLS = 1_024;
const MAX_TOOL_NAME = 256;

/** Lamport amounts up to 15 digits are summed as doubles, exact below 2^53. */
const FAST_LAMPORTS_DIGITS = 15;
/**
 * The wire's IntegerString holds at most 80 digits; a trace whose total is longer would be refused
 * whole. The total saturates here instead (10^80 − 1 lamports is far past any real amount).
 */
const MAX_LAMPORTS = 10n ** 80n - 1n;

/**
 * The running totals of one trace, kept exactly and cheaply: costs as whole 10^-12 units,
 * lamports as whole numbers, both in doubles while they are exact (below 2^53) and in BigInt
 * beyond, so recording an event stays a few additions while the totals never drift.
 */
export class TraceAggregates {
  eventCount = 0;
  totalTokens = 0;
  chainTxCount = 0;
  /** True once a tool name past the schema's 1,024 was left out of `toolsCalled`. */
  toolsOverflowed = false;
  private readonly cost = new ExactDecimal();
  private lamportsSmall = 0;
  private lamportsBig = 0n;
  /** True once `totalLamports` reached its 80-digit cap and stopped growing. */
  lamportsSaturated = false;
  /** Characters of `toolsCalled` as JSON (names, quotes, commas), for the buffer's account. */
  toolsBytes = 0;
  private readonly toolNames = new Set<string>();
  private readonly tools: string[] = [];
  private readonly storedNames = new Set<string>();

  addLlmCall(totalTokens: number, costUsd: number): void {
    this.eventCount += 1;
    // Beyond 2^53 a JSON number is no longer exact; the schema caps it there.
    this.totalTokens = Math.min(this.totalTokens + totalTokens, Number.MAX_SAFE_INTEGER);
    if (costUsd !== 0) this.cost.add(costUsd);
  }

  /**
   * Counts a chain transaction of `lamports` (a checked IntegerString). Returns true when this
   * addition made the total reach its 80-digit cap (it is then kept at 10^80 − 1), so the caller
   * can say so once; the event itself is kept either way.
   */
  addChainTx(lamports: string): boolean {
    this.eventCount += 1;
    this.chainTxCount += 1;
    if (lamports === '0' || this.lamportsSaturated) return false;
    if (lamports.length <= FAST_LAMPORTS_DIGITS) {
      const amount = Number(lamports);
      if (this.lamportsSmall + amount > Number.MAX_SAFE_INTEGER) {
        this.lamportsBig += BigInt(this.lamportsSmall);
        this.lamportsSmall = 0;
      }
      this.lamportsSmall += amount;
      // Doubles stay below 2^53, so only the BigInt part can pass the cap.
      return false;
    }
    this.lamportsBig += BigInt(lamports);
    if (this.lamportsBig + BigInt(this.lamportsSmall) <= MAX_LAMPORTS) return false;
    this.lamportsBig = MAX_LAMPORTS;
    this.lamportsSmall = 0;
    this.lamportsSaturated = true;
    return true;
  }

  addToolCall(name: string): void {
    this.eventCount += 1;
    if (this.toolNames.has(name)) return;
    if (this.tools.length >= MAX_TOOLS) {
      this.toolsOverflowed = true;
      return;
    }
    this.toolNames.add(name);
    const stored = storableText(name, MAX_TOOL_NAME);
    // Two names can store the same (cut to 256 characters, cleaned): kept once.
    if (this.storedNames.has(stored)) return;
    this.storedNames.add(stored);
    this.tools.push(stored);
    this.toolsBytes += stored.length + 3;
  }

  addOther(): void {
    this.eventCount += 1;
  }

  /** Exact decimal string of the summed `costUsd`. */
  totalCostUsd(): string {
    return this.cost.toString();
  }

  /** Decimal string of the summed lamports (at most 80 digits: saturated, see addChainTx). */
  totalLamports(): string {
    if (this.lamportsBig === 0n) return String(this.lamportsSmall);
    return (this.lamportsBig + BigInt(this.lamportsSmall)).toString();
  }

  /** De-duplicated tool names, in first-call order (a copy). */
  toolsCalled(): string[] {
    return [...this.tools];
  }
}
