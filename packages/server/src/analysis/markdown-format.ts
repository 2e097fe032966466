import { agentMarkdown } from './agent-markdown.js';
import type { StepFact } from './run-steps.js';

/*
 * How the autopsy writes numbers, times, shares and steps, and how agent text goes into it
 * (always through agentMarkdown: names as code, prose escaped, never Markdown of its own).
 */

const INLINE_CHARS = 300;
const SUMMARY_CHARS = 1_500;

/** Inline code: a name or label from the agent. */
export const code = (text: string, max = INLINE_CHARS) => agentMarkdown(text, 'code', max);

/** Inline prose from the agent, on one line. */
export const inline = (text: string, max = INLINE_CHARS) => agentMarkdown(text, 'inline', max);

/** A table cell: agent text escaped (a pipe included), or a dash for nothing. */
export const cell = (text: string | null) =>
  text === null ? '—' : agentMarkdown(text, 'inline', 120);

/** A name, URL or signature in a table cell, as code. */
export const codeCell = (text: string | null) =>
  text === null ? '—' : agentMarkdown(text, 'code-cell', 120);

/** A block quote of agent text (summaries). */
export const quote = (text: string) => agentMarkdown(text, 'quote', SUMMARY_CHARS);

const NUMBER = new Intl.NumberFormat('en-US');

/** A count, grouped by thousands. */
export const count = (n: number) => NUMBER.format(n);

/** `n thing` or `n things`. */
export const plural = (n: number, thing: string) => `${count(n)} ${thing}${n === 1 ? '' : 's'}`;

/** A non-negative integer in decimal text, grouped by thousands. */
export function group(digits: string): string {
  return digits.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** Lamports as SOL (1 SOL = 10^9 lamports), exactly. */
export function lamportsToSol(lamports: string): string {
  const padded = lamports.padStart(10, '0');
  const whole = padded.slice(0, -9).replace(/^0+(?=\d)/, '');
  const fraction = padded.slice(-9).replace(/0+$/, '');
  return fraction ? `${group(whole)}.${fraction}` : group(whole);
}

export function duration(ms: number | null): string {
  if (ms === null) return 'an unknown time';
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 120_000) return `${(ms / 1_000).toFixed(1)} s`;
  if (ms < 2 * 3_600_000) return `${(ms / 60_000).toFixed(1)} min`;
  if (ms < 2 * 86_400_000) return `${(ms / 3_600_000).toFixed(1)} h`;
  return `${(ms / 86_400_000).toFixed(1)} days`;
}

/** Never rounds a part to 0 % or to the whole. */
export const percent = (share: number) =>
  share > 0 && share < 0.005
    ? '<1 %'
    : share < 1 && share >= 0.995
      ? '>99 %'
      : `${Math.round(share * 100)} %`;

/** `#12 \`tool_call dex.getPrice\`` */
export const stepRef = (s: StepFact) => `#${s.sequence} ${code(s.label)}`;

/** A step with its outcome, duration and error. */
export function stepLine(s: StepFact): string {
  const outcome = s.status === 'error' ? 'failed' : 'ok';
  const error = s.errorMessage ? `: ${inline(s.errorMessage)}` : '';
  return `${stepRef(s)} (${outcome}, ${duration(s.durationMs)})${error}`;
}

/** A signature or other long identifier, shortened to its ends (the tables show it whole). */
export function shortId(id: string): string {
  return code(id.length > 20 ? `${id.slice(0, 12)}…${id.slice(-4)}` : id);
}

/** `#1, #3, #5` (and how many more). */
export function sequences(list: number[], total = list.length): string {
  const shown = list.map((s) => `#${s}`).join(', ');
  return total > list.length ? `${shown} and ${count(total - list.length)} more` : shown;
}
