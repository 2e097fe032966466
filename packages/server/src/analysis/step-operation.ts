import { createHash } from 'node:crypto';
import { canonical, obj, shorten, str } from './payload-fields.js';
import { subjectOf, type ReadEvent } from './run-steps.js';

/*
 * What a step did, as retries and loops compare it: the operation (a tool, a model, an
 * instruction, a resource), with what went in and what came out. Two steps are the same call
 * when all three are equal. Payloads that could not be read have no operation: nothing about
 * them can be compared, so no retry or loop is ever claimed from them.
 */

/** What a step is in the run's flow: its action, the model's thinking, or a note. */
export type StepRole = 'action' | 'thinking' | 'note';

export const roleOf = (read: ReadEvent): StepRole =>
  read.event.type === 'llm_call' ? 'thinking' : read.event.type === 'custom' ? 'note' : 'action';

const QUOTE_CHARS = 160;

/** Short texts are their own key; long ones (a prompt, a page) are hashed to keep keys small. */
const digest = (text: string) =>
  text.length <= 128 ? text : `#${createHash('sha1').update(text).digest('base64')}`;

function inputOf(read: ReadEvent): unknown {
  const p = read.payload;
  switch (read.event.type) {
    case 'llm_call':
      return obj(p, 'input')?.['messages'] ?? null;
    case 'tool_call':
    case 'mcp_call':
      return p?.['input'] ?? null;
    case 'chain_tx':
      // a resend carries a new signature: the amount is what makes it the same transfer
      return { lamports: str(p, 'lamports') };
    case 'x402_payment':
      return { amount: str(p, 'amount'), asset: str(p, 'asset') };
    default:
      return p?.['data'] ?? null;
  }
}

/** What came out, or undefined when the step type reports nothing comparable. */
function outputOf(read: ReadEvent): unknown {
  const p = read.payload;
  switch (read.event.type) {
    case 'llm_call':
      return obj(p, 'output')?.['content'] ?? null;
    case 'tool_call':
    case 'mcp_call':
      return p?.['output'] ?? null;
    default:
      return undefined;
  }
}

/**
 * What a step did. The operation's key is cheap and known at once; the input and output are
 * serialised only when asked for (a run of 20,000 model calls compares their inputs only where
 * one failed and was tried again).
 */
export class Operation {
  private inputKey: string | undefined;
  private outputKey: string | null | undefined;
  private inputText: string | undefined;

  constructor(
    private readonly read: ReadEvent,
    /** Equal for steps of one operation: the type and subject (`tool_call dex.getPrice`). */
    readonly key: string,
    /** The subject, for text (`dex.getPrice`). */
    readonly name: string,
  ) {}

  private text(): string {
    this.inputText ??= canonical(inputOf(this.read));
    return this.inputText;
  }

  /** A digest of the canonical input. */
  get input(): string {
    this.inputKey ??= digest(this.text());
    return this.inputKey;
  }

  /** A digest of the canonical output, or null when the step type has none. */
  get output(): string | null {
    if (this.outputKey === undefined) {
      const output = outputOf(this.read);
      this.outputKey = output === undefined ? null : digest(canonical(output));
    }
    return this.outputKey;
  }

  /** The input, shortened, for quoting; only from plain payloads (decrypted ones are never quoted). */
  get quote(): string | null {
    return this.read.access === 'plain' ? shorten(this.text(), QUOTE_CHARS) : null;
  }
}

/** The step's operation (made once per step), or null when it cannot be compared. */
export function operationOf(read: ReadEvent): Operation | null {
  if (read.operation === undefined) {
    const name = read.access === 'unreadable' ? null : subjectOf(read);
    const programId = read.event.type === 'chain_tx' ? (str(read.payload, 'programId') ?? '') : '';
    read.operation =
      name === null ? null : new Operation(read, `${read.event.type} ${name} ${programId}`, name);
  }
  return read.operation;
}
