import { createHash } from 'node:crypto';
import { openPayloadEnvelope, type Event } from '@flightlog/protocol';
import type { StoredRun } from '../store/analysis-store.js';

/*
 * The facts of one run that an autopsy states, computed from the stored trace and its events.
 * Both analyzers start here: the heuristic one renders them as Markdown, the LLM one sends them
 * as JSON. Payloads are read defensively (the server accepts any object payload), and encrypted
 * ones are opened only when a key is given, in memory, for this computation.
 */

/** How an event's payload could be read. */
export type PayloadAccess = 'plain' | 'decrypted' | 'unreadable';

/** One step of the run, as the autopsy names it. */
export interface StepFact {
  sequence: number;
  eventId: string;
  type: string;
  /** e.g. `tool_call dex.getPrice`, `llm_call gpt-4o-mini`, `chain_tx delegateStake`. */
  label: string;
  status: string;
  durationMs: number | null;
  errorMessage: string | null;
  payload: PayloadAccess;
}

export interface ToolFact {
  tool: string;
  calls: number;
  failed: number;
  firstError: string | null;
}

/** A tool called over and over: with the same input, or many times in a row. */
export interface LoopFact {
  tool: string;
  /** Most calls with one identical input. */
  sameInputCalls: number;
  /** Longest streak of consecutive tool calls to this tool (other step types in between ignored). */
  longestStreak: number;
  /** Sequences of the calls (at most 12). */
  sequences: number[];
  /** The repeated input, shortened; only from plain payloads (never decrypted ones). */
  input: string | null;
}

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

export interface RunFacts {
  traceId: string;
  status: string;
  inputSummary: string;
  outputSummary: string | null;
  errorMessage: string | null;
  startedAt: string;
  endedAt: string | null;
  durationMs: number | null;
  tags: string[];
  /** The trace's own de-duplicated tool names (known even when payloads are not), the first LISTED. */
  toolsListed: string[];
  moreToolsListed: number;
  events: {
    /** The trace's own count (may exceed what is stored, or what was loaded). */
    reported: number;
    analysed: number;
    /** Left out of a very long run (the middle). */
    omitted: number;
    byType: Record<string, number>;
    failed: number;
    /** Names of `custom` events, with counts: the LISTED most frequent. */
    custom: Record<string, number>;
    moreCustomNames: number;
  };
  firstFailure: {
    step: StepFact;
    /** Parents through parentEventId, nearest first. */
    parents: StepFact[];
    /** A parent id that is not among the analysed events (missing, or omitted). */
    missingParent: string | null;
    /** For a top-level failure: the steps just before it. */
    before: StepFact[];
  } | null;
  /** Failed steps after the first (at most 10). */
  laterFailures: StepFact[];
  failedSteps: number;
  /** The LISTED most called tools. */
  tools: ToolFact[];
  /** Tools beyond the listed ones. */
  moreTools: number;
  /** The LISTED strongest loops. */
  loops: LoopFact[];
  slowest: StepFact[];
  spend: {
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
      /** The LISTED most costly models. */
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
  };
  chainTxs: ChainTxFact[];
  /** Chain transactions beyond the listed ones. */
  moreChainTxs: number;
  payments: PaymentFact[];
  morePayments: number;
  encryption: {
    encrypted: number;
    decrypted: number;
    unreadable: number;
    /** Whether the worker had SERVICE_MASTER_KEY. */
    keyGiven: boolean;
    /** Why payloads could not be read, with counts (`no-key`, `authentication-failed`, ...). */
    reasons: Record<string, number>;
  };
}

export interface FactOptions {
  /** SERVICE_MASTER_KEY: opens encrypted payloads for this computation only. */
  masterKey?: Buffer | undefined;
}

/** Repeats of one tool with one input that count as a loop. */
export const SAME_INPUT_LOOP = 3;
/** Consecutive calls of one tool that count as a loop. */
export const STREAK_LOOP = 4;
/**
 * Every list of the facts stops here: a run may have 20,000 distinct tools, and the facts (for
 * the autopsy and for a model's prompt) must stay small whatever the run.
 */
const LISTED = 20;

const firstListed = <T>(items: T[]): T[] => items.slice(0, LISTED);
const QUOTE_CHARS = 160;

type Payload = Record<string, unknown>;

const str = (p: Payload | undefined, key: string): string | null => {
  const value = p?.[key];
  return typeof value === 'string' && value.length > 0 ? value : null;
};
const num = (p: Payload | undefined, key: string): number | null => {
  const value = p?.[key];
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
};
const obj = (p: Payload | undefined, key: string): Payload | undefined => {
  const value = p?.[key];
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Payload)
    : undefined;
};
const bool = (p: Payload | undefined, key: string): boolean | null => {
  const value = p?.[key];
  return typeof value === 'boolean' ? value : null;
};
const INTEGER = /^(?:0|[1-9][0-9]*)$/;
const lamportsOf = (p: Payload | undefined, key: string): string | null => {
  const value = str(p, key);
  return value !== null && INTEGER.test(value) && value.length <= 80 ? value : null;
};

/** JSON with sorted keys, so that two equal inputs compare equal whatever their key order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (typeof value === 'object' && value !== null)
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Payload)[k])}`)
      .join(',')}}`;
  return JSON.stringify(value) ?? 'null';
}

function shorten(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** USD as decimal text with up to 6 significant digits past the leading zeros. */
export function formatUsd(value: number): string {
  if (value === 0) return '0';
  const digits = Math.max(2, Math.min(12, 5 - Math.floor(Math.log10(Math.abs(value)))));
  return value.toFixed(digits).replace(/\.?0+$/, '');
}

interface ReadEvent {
  event: Event;
  payload: Payload | undefined;
  access: PayloadAccess;
  reason: string | null;
}

function readPayload(event: Event, key: Buffer | undefined): ReadEvent {
  if (!event.payloadEncrypted)
    return { event, payload: event.payload, access: 'plain', reason: null };
  if (!key) return { event, payload: undefined, access: 'unreadable', reason: 'no-key' };
  const opened = openPayloadEnvelope(event.payload, key);
  return opened.ok
    ? { event, payload: opened.payload, access: 'decrypted', reason: null }
    : { event, payload: undefined, access: 'unreadable', reason: opened.reason };
}

/** The tool an event called, for tool_call and mcp_call. */
function toolOf(read: ReadEvent): string | null {
  const { event, payload } = read;
  if (event.type === 'tool_call') return str(payload, 'name');
  if (event.type === 'mcp_call') {
    const server = str(payload, 'server');
    const tool = str(payload, 'tool') ?? str(payload, 'method');
    return server && tool ? `${server}/${tool}` : (tool ?? server);
  }
  return null;
}

function labelOf(read: ReadEvent): string {
  const { event, payload } = read;
  let detail: string | null = null;
  switch (event.type) {
    case 'llm_call':
      detail = str(payload, 'model');
      break;
    case 'tool_call':
    case 'mcp_call':
      detail = toolOf(read);
      break;
    case 'chain_tx':
      detail = str(payload, 'instruction') ?? str(payload, 'programId');
      break;
    case 'x402_payment':
      detail = str(payload, 'resource');
      break;
    case 'custom':
      detail = str(payload, 'name');
      break;
  }
  if (detail === null && read.access === 'unreadable') detail = '(encrypted)';
  return detail === null ? event.type : `${event.type} ${shorten(detail, 80)}`;
}

function step(read: ReadEvent): StepFact {
  const { event } = read;
  return {
    sequence: event.sequence,
    eventId: event.id,
    type: event.type,
    label: labelOf(read),
    status: event.status,
    durationMs: event.durationMs ?? null,
    errorMessage: event.errorMessage ?? null,
    payload: read.access,
  };
}

function share(part: bigint | number, whole: bigint | number): number {
  if (typeof part === 'bigint' && typeof whole === 'bigint')
    return whole === 0n ? 0 : Number((part * 10_000n) / whole) / 10_000;
  return Number(whole) === 0 ? 0 : Number(part) / Number(whole);
}

/** Every fact an autopsy states about `run`. */
export function collectRunFacts(run: StoredRun, options: FactOptions = {}): RunFacts {
  const { trace } = run;
  const reads = run.events.map((event) => readPayload(event, options.masterKey));
  const byId = new Map(reads.map((r) => [r.event.id, r]));

  const byType: Record<string, number> = {};
  const custom: Record<string, number> = {};
  const reasons: Record<string, number> = {};
  for (const read of reads) {
    byType[read.event.type] = (byType[read.event.type] ?? 0) + 1;
    if (read.event.type === 'custom') {
      const name = str(read.payload, 'name') ?? '(unnamed)';
      custom[name] = (custom[name] ?? 0) + 1;
    }
    if (read.reason) reasons[read.reason] = (reasons[read.reason] ?? 0) + 1;
  }

  // First failure and what led to it.
  const failed = reads.filter((r) => r.event.status === 'error');
  let firstFailure: RunFacts['firstFailure'] = null;
  const first = failed[0];
  if (first) {
    const parents: StepFact[] = [];
    const seen = new Set([first.event.id]);
    let missingParent: string | null = null;
    let parentId = first.event.parentEventId ?? null;
    while (parentId !== null && parents.length < 20 && !seen.has(parentId)) {
      seen.add(parentId);
      const parent = byId.get(parentId);
      if (!parent) {
        missingParent = parentId;
        break;
      }
      parents.push(step(parent));
      parentId = parent.event.parentEventId ?? null;
    }
    const index = reads.indexOf(first);
    const before =
      parents.length === 0 && missingParent === null
        ? reads.slice(Math.max(0, index - 3), index).map(step)
        : [];
    firstFailure = { step: step(first), parents, missingParent, before };
  }

  const customNames = Object.entries(custom).sort(
    (a, b) => b[1] - a[1] || a[0].localeCompare(b[0]),
  );

  // Tools: calls, failures, loops.
  const tools = new Map<string, ToolFact>();
  const inputs = new Map<string, { tool: string; sequences: number[]; input: string | null }>();
  const streaks = new Map<string, number>();
  const sequencesOf = new Map<string, number[]>();
  let streakTool: string | null = null;
  let streak = 0;
  for (const read of reads) {
    const tool = toolOf(read);
    if (tool === null) continue;
    const fact = tools.get(tool) ?? { tool, calls: 0, failed: 0, firstError: null };
    fact.calls++;
    if (read.event.status === 'error') {
      fact.failed++;
      fact.firstError ??= read.event.errorMessage ?? null;
    }
    tools.set(tool, fact);
    const calls = sequencesOf.get(tool) ?? [];
    if (calls.length < 12) calls.push(read.event.sequence);
    sequencesOf.set(tool, calls);

    const input = canonical(read.payload?.input ?? null);
    const key = `${tool}\u0000${createHash('sha1').update(input).digest('hex')}`;
    const group = inputs.get(key) ?? {
      tool,
      sequences: [],
      // decrypted inputs are never quoted: the autopsy is stored in plain text
      input: read.access === 'plain' ? shorten(input, QUOTE_CHARS) : null,
    };
    group.sequences.push(read.event.sequence); // bounded by the events loaded
    if (read.access !== 'plain') group.input = null;
    inputs.set(key, group);

    streak = tool === streakTool ? streak + 1 : 1;
    streakTool = tool;
    streaks.set(tool, Math.max(streaks.get(tool) ?? 0, streak));
  }
  const loops = new Map<string, LoopFact>();
  for (const group of inputs.values()) {
    const known = loops.get(group.tool);
    if (known && known.sameInputCalls >= group.sequences.length) continue;
    loops.set(group.tool, {
      tool: group.tool,
      sameInputCalls: group.sequences.length,
      longestStreak: streaks.get(group.tool) ?? 0,
      sequences: group.sequences.slice(0, 12),
      input: group.sequences.length >= SAME_INPUT_LOOP ? group.input : null,
    });
  }
  for (const [tool, loop] of loops) {
    if (loop.sameInputCalls >= SAME_INPUT_LOOP) continue;
    if (loop.longestStreak < STREAK_LOOP) loops.delete(tool);
    // a streak with varying inputs: name the calls of the tool, not one input's
    else loop.sequences = (sequencesOf.get(tool) ?? []).slice(0, 12);
  }

  // Spend.
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
      const usd = Math.max(0, num(payload, 'costUsd') ?? 0);
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
      const lamports = lamportsOf(payload, 'lamports');
      const fee = lamportsOf(payload, 'feeLamports');
      const txFailed = event.status === 'error' || str(payload, 'confirmation') === 'failed';
      if (lamports !== null) {
        readableLamports += BigInt(lamports);
        if (txFailed) inFailed += BigInt(lamports);
        transfers.push({ read, lamports: BigInt(lamports) });
      }
      if (fee !== null) fees += BigInt(fee);
      chainTxs.push({
        sequence: event.sequence,
        status: event.status,
        instruction: str(payload, 'instruction'),
        programId: str(payload, 'programId'),
        network: str(payload, 'network'),
        lamports,
        feeLamports: fee,
        confirmation: str(payload, 'confirmation'),
        signature: str(payload, 'signature'),
        slot: str(payload, 'slot'),
        errorMessage: event.errorMessage ?? null,
      });
    }
    if (event.type === 'x402_payment')
      payments.push({
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
      });
  }

  const slowest = reads
    .filter((r) => typeof r.event.durationMs === 'number')
    .sort((a, b) => (b.event.durationMs ?? 0) - (a.event.durationMs ?? 0))
    .slice(0, 3)
    .map(step);

  const encrypted = reads.filter((r) => r.event.payloadEncrypted).length;
  const decrypted = reads.filter((r) => r.access === 'decrypted').length;

  return {
    traceId: trace.id,
    status: trace.status,
    inputSummary: trace.inputSummary,
    outputSummary: trace.outputSummary ?? null,
    errorMessage: trace.errorMessage ?? null,
    startedAt: trace.startedAt,
    endedAt: trace.endedAt ?? null,
    durationMs: trace.durationMs ?? null,
    tags: trace.tags,
    toolsListed: firstListed(trace.toolsCalled),
    moreToolsListed: Math.max(0, trace.toolsCalled.length - LISTED),
    events: {
      reported: trace.eventCount,
      analysed: reads.length,
      omitted: run.omittedEvents,
      byType,
      failed: failed.length,
      custom: Object.fromEntries(firstListed(customNames)),
      moreCustomNames: Math.max(0, customNames.length - LISTED),
    },
    firstFailure,
    laterFailures: failed.slice(1, 11).map(step),
    failedSteps: failed.length,
    tools: firstListed(
      [...tools.values()].sort((a, b) => b.calls - a.calls || a.tool.localeCompare(b.tool)),
    ),
    moreTools: Math.max(0, tools.size - LISTED),
    loops: firstListed(
      [...loops.values()].sort(
        (a, b) =>
          Math.max(b.sameInputCalls, b.longestStreak) - Math.max(a.sameInputCalls, a.longestStreak),
      ),
    ),
    slowest,
    spend: {
      tokens: { total: trace.totalTokens, input: inputTokens, output: outputTokens, llmCalls },
      cost: {
        totalUsd: trace.totalCostUsd,
        readableUsd: formatUsd(readableUsd),
        byModel: firstListed([...models.values()].sort((a, b) => b.usd - a.usd)).map((m) => ({
          ...m,
          usd: formatUsd(m.usd),
        })),
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
    chainTxs: chainTxs.slice(0, LISTED),
    moreChainTxs: Math.max(0, chainTxs.length - LISTED),
    payments: payments.slice(0, LISTED),
    morePayments: Math.max(0, payments.length - LISTED),
    encryption: {
      encrypted,
      decrypted,
      unreadable: encrypted - decrypted,
      keyGiven: options.masterKey !== undefined,
      reasons,
    },
  };
}
