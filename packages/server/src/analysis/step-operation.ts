import { createHash } from 'node:crypto';
import { canonical, obj, shorten, str } from './payload-fields.js';
import { subjectOf, type ReadEvent } from './run-steps.js';

/*
 * What a step did, as retries and loops compare it: the operation (a tool, a model, an
 * instruction, a resource), with what went in and what came out. Two steps are the same call
 * when all three are equal. Payloads that could not be read have no operation: nothing about
 * them can be compared, so no retry or loop is ever claimed from them.
 */

export interface Operation {
  /** Equal for steps of one operation: the type and subject (`tool_call dex.getPrice`). */
  key: string;
  /** The subject, for text (`dex.getPrice`). */
  name: string;
  /** A digest of the canonical input. */
  input: string;
  /** A digest of the canonical output, or null when the step type has none. */
  output: string | null;
  /** The input, shortened, for quoting; only from plain payloads (decrypted ones are never quoted). */
  quote: string | null;
}

/** What a step is in the run's flow: its action, the model's thinking, or a note. */
export type StepRole = 'action' | 'thinking' | 'note';

export const roleOf = (read: ReadEvent): StepRole =>
  read.event.type === 'llm_call' ? 'thinking' : read.event.type === 'custom' ? 'note' : 'action';

const QUOTE_CHARS = 160;

/** Short texts are their own key; long ones (a prompt, a page) are hashed to keep keys small. */
const digest = (text: string) =>
  text.length <= 128 ? text : `#${createHash('sha1').update(text).digest('base64')}`;

function inputAndOutput(read: ReadEvent): [unknown, unknown] {
  const p = read.payload;
  switch (read.event.type) {
    case 'llm_call':
      return [obj(p, 'input')?.['messages'] ?? null, obj(p, 'output')?.['content'] ?? null];
    case 'tool_call':
    case 'mcp_call':
      return [p?.['input'] ?? null, p?.['output'] ?? null];
    case 'chain_tx':
      // a resend carries a new signature: the amount is what makes it the same transfer
      return [{ lamports: str(p, 'lamports') }, undefined];
    case 'x402_payment':
      return [{ amount: str(p, 'amount'), asset: str(p, 'asset') }, undefined];
    default:
      return [p?.['data'] ?? null, undefined];
  }
}

/** The step's operation (computed once per step), or null when it cannot be compared. */
export function operationOf(read: ReadEvent): Operation | null {
  if (read.operation === undefined) read.operation = computeOperation(read);
  return read.operation;
}

function computeOperation(read: ReadEvent): Operation | null {
  if (read.access === 'unreadable') return null;
  const name = subjectOf(read);
  if (name === null) return null;
  const [input, output] = inputAndOutput(read);
  const inputText = canonical(input);
  const programId = read.event.type === 'chain_tx' ? (str(read.payload, 'programId') ?? '') : '';
  return {
    key: `${read.event.type} ${name} ${programId}`,
    name,
    input: digest(inputText),
    output: output === undefined ? null : digest(canonical(output)),
    quote: read.access === 'plain' ? shorten(inputText, QUOTE_CHARS) : null,
  };
}
