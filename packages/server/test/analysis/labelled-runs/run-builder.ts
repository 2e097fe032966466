import type { Event, EventType, Trace } from '@flightlog/protocol';
import type { StoredRun } from '../../../src/analysis/analyzer.js';
import { at, newId, traceSnapshot } from '../../fixtures/batches.js';
import { seal } from '../../fixtures/runs.js';

/*
 * A small language for the runs of the labelled set: steps are recorded in order on a clock, a
 * step with children wraps them (its time covers theirs), and the trace's totals are computed
 * from the steps as the client library would (tokens, cost, lamports, tools), so a case states
 * only what it is about.
 */

export interface StepOptions {
  /** Duration in ms (default 300). */
  ms?: number;
  /** Fails the step with this message. */
  error?: string;
  /** `error` status without a message. */
  failedSilently?: boolean;
  /** Never finished: no end time, no duration (the clock still moves past its start). */
  unfinished?: boolean;
  /** Idle time before the step starts (default 10 ms). */
  gapMs?: number;
}

export interface RunOptions {
  status: Trace['status'];
  input: string;
  output?: string | null;
  error?: string | null;
  /** The trace's duration; default: from its first start to its last end. */
  durationMs?: number;
  /** Events the store left out in the middle (for a run longer than it loads). */
  omittedEvents?: number;
}

type Payload = Record<string, unknown>;

export class RunBuilder {
  readonly trace: Trace;
  private readonly events: Event[] = [];
  private clock = 0;
  private parent: string | null = null;

  constructor(private readonly options: RunOptions) {
    this.trace = traceSnapshot({ status: options.status, inputSummary: options.input });
  }

  /** Records one step of `type` and returns its id. */
  step(type: EventType, payload: Payload, options: StepOptions = {}): string {
    this.clock += options.gapMs ?? 10;
    const ms = options.ms ?? 300;
    const failed = options.error !== undefined || options.failedSilently === true;
    const id = newId();
    this.events.push({
      id,
      traceId: this.trace.id,
      sequence: this.events.length,
      type,
      startedAt: at(this.clock),
      endedAt: options.unfinished ? null : at(this.clock + ms),
      durationMs: options.unfinished ? null : ms,
      status: failed ? 'error' : 'ok',
      payloadEncrypted: false,
      parentEventId: this.parent,
      errorMessage: options.error ?? null,
      payload,
    });
    this.clock += options.unfinished ? 0 : ms;
    return id;
  }

  /**
   * Records a step whose children `body` records; its duration covers theirs plus `ms` of its
   * own (default 20), split before and after them.
   */
  wrap(type: EventType, payload: Payload, options: StepOptions, body: () => void): string {
    const own = options.ms ?? 20;
    // the step first (it is recorded before its children, as the client's timed spans are)
    const id = this.step(type, payload, { ...options, ms: 0 });
    const event = this.events.at(-1)!;
    const started = Date.parse(event.startedAt);
    this.clock += Math.ceil(own / 2);
    const outer = this.parent;
    this.parent = id;
    try {
      body();
    } finally {
      this.parent = outer;
    }
    this.clock += Math.floor(own / 2);
    if (!options.unfinished) {
      event.endedAt = at(this.clock);
      event.durationMs = Date.parse(event.endedAt) - started;
    }
    return id;
  }

  llm(model: string, options: StepOptions & LlmOptions = {}): string {
    const [inTokens, outTokens] = options.tokens ?? [400, 100];
    return this.step(
      'llm_call',
      {
        provider: 'openai',
        model,
        input: { messages: [{ role: 'user', content: options.prompt ?? 'Next step?' }] },
        output: { content: options.answer ?? 'Go on.', finishReason: 'stop' },
        usage: {
          inputTokens: inTokens,
          outputTokens: outTokens,
          totalTokens: inTokens + outTokens,
        },
        costUsd: options.costUsd ?? 0.0002,
        streamed: false,
      },
      options,
    );
  }

  tool(name: string, input: unknown, options: StepOptions & { output?: unknown } = {}): string {
    return this.step('tool_call', { name, input, output: options.output ?? { ok: true } }, options);
  }

  mcp(server: string, tool: string, input: unknown, options: StepOptions = {}): string {
    return this.step('mcp_call', { server, method: 'tools/call', tool, input }, options);
  }

  tx(instruction: string, lamports: string, options: StepOptions & TxOptions = {}): string {
    return this.step(
      'chain_tx',
      {
        signature: options.signature ?? null,
        lamports,
        network: 'devnet',
        programId: options.programId ?? '11111111111111111111111111111111',
        instruction,
        feeLamports: '5000',
        confirmation: options.confirmation ?? (options.error ? 'failed' : 'finalized'),
      },
      options,
    );
  }

  pay(resource: string, amount: string, options: StepOptions & PayOptions = {}): string {
    return this.step(
      'x402_payment',
      {
        resource,
        amount,
        asset: 'USDC',
        network: 'solana-devnet',
        payTo: 'Pay2Me1111111111111111111111111111111111111',
        txSignature: options.txSignature ?? null,
        settled: options.settled ?? options.error === undefined,
      },
      options,
    );
  }

  custom(name: string, data: unknown, options: StepOptions = {}): string {
    return this.step('custom', { name, data }, options);
  }

  /** Changes a recorded event (for shapes the helpers do not make). */
  patch(id: string, change: (event: Event) => void): void {
    change(this.events.find((e) => e.id === id)!);
  }

  /** The stored run, with the trace's totals from its steps. */
  done(options: { encryptWith?: Buffer } = {}): StoredRun {
    let tokens = 0;
    let cost = 0;
    let lamports = 0n;
    let chainTxs = 0;
    const tools = new Set<string>();
    let end = 0;
    for (const e of this.events) {
      const p = e.payload;
      if (e.type === 'llm_call') {
        tokens += (p.usage as { totalTokens: number }).totalTokens;
        cost += p.costUsd as number;
      }
      if (e.type === 'chain_tx') {
        chainTxs++;
        lamports += BigInt(p.lamports as string);
      }
      if (e.type === 'tool_call') tools.add(p.name as string);
      end = Math.max(end, Date.parse(e.endedAt ?? e.startedAt) - Date.parse(at(0)));
    }
    const durationMs = this.options.durationMs ?? end;
    const trace: Trace = {
      ...this.trace,
      outputSummary: this.options.output ?? null,
      errorMessage: this.options.error ?? null,
      endedAt: at(durationMs),
      durationMs,
      eventCount: this.events.length + (this.options.omittedEvents ?? 0),
      totalTokens: tokens,
      totalCostUsd: String(Number(cost.toFixed(8))),
      totalLamports: lamports.toString(),
      chainTxCount: chainTxs,
      toolsCalled: [...tools],
    };
    const key = options.encryptWith;
    const events = key
      ? this.events.map((e) => ({ ...e, payloadEncrypted: true, payload: seal(e.payload, key) }))
      : this.events.map((e) => ({ ...e }));
    return { trace, events, omittedEvents: this.options.omittedEvents ?? 0 };
  }
}

interface LlmOptions {
  tokens?: [number, number];
  costUsd?: number;
  prompt?: string;
  answer?: string;
}

interface TxOptions {
  signature?: string;
  programId?: string;
  confirmation?: 'processed' | 'confirmed' | 'finalized' | 'failed';
}

interface PayOptions {
  settled?: boolean;
  txSignature?: string;
}

export const runOf = (options: RunOptions): RunBuilder => new RunBuilder(options);

/** A Solana-looking signature (88 characters) that starts with a short tag. */
export function signature(tag: string): string {
  const alphabet = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
  let out = tag;
  let n = 7;
  while (out.length < 88) {
    n = (n * 31 + out.length) % 9973;
    out += alphabet[n % alphabet.length];
  }
  return out.slice(0, 88);
}
