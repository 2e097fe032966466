import { agentMarkdown } from './agent-markdown.js';
import type { ContributorFact, RunFacts, StepFact } from './run-facts.js';

/*
 * The heuristic autopsy: the facts of a run as a short Markdown report, most useful first (the
 * verdict and the likely cause), then the evidence. Text that came from the agent is shortened
 * and shown as text, never as Markdown of its own: every piece goes through agentMarkdown.
 */

const SUMMARY_CHARS = 1_500;
const INLINE_CHARS = 300;

/** Inline code: a name or label from the agent. */
const code = (text: string) => agentMarkdown(text, 'code', INLINE_CHARS);

/** Inline prose from the agent, on one line. */
const inline = (text: string) => agentMarkdown(text, 'inline', INLINE_CHARS);

/** A table cell: agent text escaped (a pipe included), or a dash for nothing. */
const cell = (text: string | null) => (text === null ? '—' : agentMarkdown(text, 'inline', 120));

/** A name, URL or signature in a table cell, as code. */
const codeCell = (text: string | null) =>
  text === null ? '—' : agentMarkdown(text, 'code-cell', 120);

const quote = (text: string) => agentMarkdown(text, 'quote', SUMMARY_CHARS);

const count = (n: number) => n.toLocaleString('en-US');

/** A non-negative integer in decimal text, grouped by thousands. */
function group(digits: string): string {
  return digits.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** Lamports as SOL (1 SOL = 10^9 lamports), exactly. */
export function lamportsToSol(lamports: string): string {
  const padded = lamports.padStart(10, '0');
  const whole = padded.slice(0, -9).replace(/^0+(?=\d)/, '');
  const fraction = padded.slice(-9).replace(/0+$/, '');
  return fraction ? `${group(whole)}.${fraction}` : group(whole);
}

function duration(ms: number | null): string {
  if (ms === null) return 'an unknown time';
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 120_000) return `${(ms / 1_000).toFixed(1)} s`;
  if (ms < 2 * 3_600_000) return `${(ms / 60_000).toFixed(1)} min`;
  if (ms < 2 * 86_400_000) return `${(ms / 3_600_000).toFixed(1)} h`;
  return `${(ms / 86_400_000).toFixed(1)} days`;
}

/** Never rounds a part to 0 % or to the whole. */
const percent = (share: number) =>
  share > 0 && share < 0.005
    ? '<1 %'
    : share < 1 && share >= 0.995
      ? '>99 %'
      : `${Math.round(share * 100)} %`;

const stepRef = (s: StepFact) => `#${s.sequence} ${code(s.label)}`;

function stepLine(s: StepFact): string {
  const outcome = s.status === 'error' ? 'failed' : 'ok';
  const error = s.errorMessage ? `: ${inline(s.errorMessage)}` : '';
  return `${stepRef(s)} (${outcome}, ${duration(s.durationMs)})${error}`;
}

function verdict(f: RunFacts): string {
  const failedSteps =
    f.failedSteps === 0 ? '' : `, ${f.failedSteps} failed step${f.failedSteps === 1 ? '' : 's'}`;
  switch (f.status) {
    case 'errored':
      return `failed${failedSteps}`;
    case 'completed':
      return f.failedSteps === 0 ? 'succeeded' : `completed${failedSteps}`;
    case 'timeout':
      return `timed out${failedSteps}`;
    default:
      return `${f.status} when analysed${failedSteps}`;
  }
}

/** The most probable explanation, from the strongest signal present. */
function likelyCause(f: RunFacts): string | null {
  const loop = f.loops[0];
  const failedTx = f.chainTxs.find((t) => t.status === 'error' || t.confirmation === 'failed');
  const unsettled = f.payments.find((p) => p.status === 'error' || p.settled === false);
  const parts: string[] = [];
  if (loop)
    parts.push(
      `stuck in a loop: ${code(loop.tool)} was called ${loopSize(loop)}` +
        (f.status === 'completed' ? ' (the run still completed)' : ''),
    );
  if (failedTx)
    parts.push(
      `chain transaction #${failedTx.sequence} ${code(failedTx.instruction ?? failedTx.programId ?? 'chain_tx')} failed` +
        (failedTx.confirmation ? ` (confirmation: ${inline(failedTx.confirmation)})` : '') +
        (failedTx.errorMessage ? `: ${inline(failedTx.errorMessage)}` : ''),
    );
  if (unsettled)
    parts.push(
      `x402 payment #${unsettled.sequence} for ${code(unsettled.resource ?? 'a resource')} was not settled`,
    );
  const first = f.firstFailure?.step;
  if (parts.length === 0 && first)
    parts.push(
      `${stepRef(first)} failed${first.errorMessage ? `: ${inline(first.errorMessage)}` : ''}`,
    );
  if (parts.length === 0 && f.status === 'errored')
    parts.push(
      f.errorMessage
        ? `no step failed; the run reported: ${inline(f.errorMessage)}`
        : 'no step failed and the run gave no error message',
    );
  return parts.length === 0 ? null : parts.join('; ');
}

function loopSize(loop: RunFacts['loops'][number]): string {
  const same =
    loop.sameInputCalls >= 3
      ? `${loop.sameInputCalls} times with the same input${loop.input ? ` ${code(loop.input)}` : ''}`
      : null;
  const streak = loop.longestStreak >= 4 ? `${loop.longestStreak} times in a row` : null;
  return [same, streak].filter((s): s is string => s !== null).join(', ');
}

function contributors(top: ContributorFact[], unit: (amount: string) => string): string {
  return top
    .map(
      (c) =>
        `#${c.sequence} ${code(c.label)} ${unit(c.amount)} (${percent(c.share)}` +
        (c.tokens !== undefined ? `, ${count(c.tokens)} tokens` : '') +
        ')',
    )
    .join(', ');
}

/** The Markdown autopsy of a run. */
export function renderAutopsy(f: RunFacts): string {
  const out: string[] = [];
  const push = (...lines: string[]) => out.push(...lines);

  push(`## Verdict: ${verdict(f)}`, '');
  const eventsLine =
    `${count(f.events.analysed)} event${f.events.analysed === 1 ? '' : 's'} analysed` +
    (f.events.omitted > 0
      ? ` (${count(f.events.omitted)} in the middle of the run left out)`
      : '') +
    (f.events.reported !== f.events.analysed + f.events.omitted
      ? `; the trace reports ${count(f.events.reported)}`
      : '');
  push(`The run **${f.status}** after ${duration(f.durationMs)}: ${eventsLine}.`);
  const cause = likelyCause(f);
  if (cause) push('', `**Likely cause:** ${cause}.`);

  push('', '### Asked', '', quote(f.inputSummary));
  push('', '### Produced', '');
  if (f.outputSummary) push(quote(f.outputSummary));
  else push('No output summary.');
  if (f.errorMessage) push('', `**Error:** ${inline(f.errorMessage)}`);

  if (f.firstFailure) {
    const { step, parents, missingParent, before } = f.firstFailure;
    push('', '### First failure', '', stepLine(step));
    if (parents.length > 0)
      push('', `Led there by its parent steps: ${parents.map(stepRef).join(' ← ')}.`);
    if (missingParent)
      push('', `Its parent ${code(missingParent)} is not among the analysed events.`);
    if (parents.length === 0 && !missingParent)
      push(
        '',
        before.length > 0
          ? `A top-level step; just before it: ${before.map(stepRef).join(', ')}.`
          : 'A top-level step, the first of the run.',
      );
    if (f.failedSteps > 1)
      push(
        '',
        `Later failures (${f.failedSteps - 1}):`,
        ...f.laterFailures.map((s) => `- ${stepLine(s)}`),
        ...(f.failedSteps - 1 > f.laterFailures.length
          ? [`- … and ${f.failedSteps - 1 - f.laterFailures.length} more`]
          : []),
      );
  }

  if (f.tools.length > 0) {
    push('', '### Tool calls', '', '| tool | calls | failed | first error |', '|---|---|---|---|');
    for (const t of f.tools.slice(0, 15))
      push(`| ${codeCell(t.tool)} | ${t.calls} | ${t.failed} | ${cell(t.firstError)} |`);
    const moreTools = f.tools.length + f.moreTools - 15;
    if (moreTools > 0) push('', `… and ${count(moreTools)} more tools.`);
    for (const loop of f.loops)
      push(
        '',
        `**Loop:** ${code(loop.tool)} was called ${loopSize(loop)} (steps ${loop.sequences
          .map((s) => `#${s}`)
          .join(', ')}).`,
      );
  }

  if (f.slowest.length > 0) {
    push('', '### Slowest steps', '');
    f.slowest.forEach((s, i) => {
      const part =
        f.durationMs && s.durationMs !== null && f.durationMs > 0
          ? `, ${percent(s.durationMs / f.durationMs)} of the run`
          : '';
      push(`${i + 1}. ${stepRef(s)}: ${duration(s.durationMs)}${part}`);
    });
  }

  const { tokens, cost, lamports } = f.spend;
  push('', '### Spend', '');
  push(
    `- **Tokens:** ${count(tokens.total)}` +
      (tokens.llmCalls > 0
        ? ` over ${tokens.llmCalls} model call${tokens.llmCalls === 1 ? '' : 's'} (${count(tokens.input)} in, ${count(tokens.output)} out)`
        : ''),
  );
  push(
    `- **Model cost:** $${cost.totalUsd}` +
      (cost.top.length > 0 ? `; largest: ${contributors(cost.top, (usd) => `$${usd}`)}` : ''),
  );
  if (cost.byModel.length > 1)
    push(
      `  - by model: ${cost.byModel
        .map((m) => `${code(m.model)} ${m.calls}× $${m.usd}`)
        .join(', ')}`,
    );
  push(
    `- **Lamports:** ${group(lamports.total)} (${lamportsToSol(lamports.total)} SOL)` +
      (lamports.fees !== '0' ? `, plus ${group(lamports.fees)} in fees` : '') +
      (lamports.inFailed !== '0'
        ? ` (${group(lamports.inFailed)} of them in failed transactions, so not moved)`
        : '') +
      (lamports.top.length > 0
        ? `; largest: ${contributors(lamports.top, (l) => `${group(l)} lamports`)}`
        : ''),
  );

  if (f.chainTxs.length > 0) {
    push(
      '',
      '### Chain transactions',
      '',
      '| step | instruction | lamports | confirmation | outcome | signature |',
      '|---|---|---|---|---|---|',
    );
    for (const t of f.chainTxs)
      push(
        `| #${t.sequence} | ${codeCell(t.instruction ?? t.programId)} | ${cell(t.lamports === null ? null : group(t.lamports))} | ${cell(t.confirmation)} | ${t.status === 'error' ? `failed: ${cell(t.errorMessage ?? 'no message')}` : 'ok'} | ${codeCell(t.signature)} |`,
      );
    if (f.moreChainTxs > 0) push('', `… and ${f.moreChainTxs} more.`);
  }

  if (f.payments.length > 0) {
    push(
      '',
      '### x402 payments',
      '',
      '| step | resource | amount | settled | outcome | transaction |',
      '|---|---|---|---|---|---|',
    );
    for (const p of f.payments)
      push(
        `| #${p.sequence} | ${codeCell(p.resource)} | ${cell(p.amount === null ? null : `${p.amount} ${p.asset ?? ''}`.trim())} | ${p.settled === null ? '—' : p.settled ? 'yes' : 'no'} | ${p.status === 'error' ? `failed: ${cell(p.errorMessage ?? 'no message')}` : 'ok'} | ${codeCell(p.txSignature)} |`,
      );
    if (f.morePayments > 0) push('', `… and ${f.morePayments} more.`);
  }

  const customNames = Object.entries(f.events.custom);
  if (customNames.length > 0)
    push(
      '',
      `Custom events: ${customNames.map(([name, n]) => `${code(name)}${n > 1 ? ` ×${n}` : ''}`).join(', ')}` +
        (f.events.moreCustomNames > 0
          ? ` and ${count(f.events.moreCustomNames)} more names.`
          : '.'),
    );

  const { encryption } = f;
  if (encryption.encrypted > 0) {
    push('', '### Encrypted payloads', '');
    if (encryption.decrypted > 0)
      push(
        `${encryption.decrypted} of ${encryption.encrypted} encrypted payloads were decrypted for this analysis only; ` +
          'their contents (inputs, outputs, messages) are not quoted here.',
      );
    if (encryption.unreadable > 0) {
      const why = encryption.keyGiven
        ? `could not be opened with the worker's SERVICE_MASTER_KEY (${Object.keys(
            encryption.reasons,
          ).join(', ')}: a different key?)`
        : 'could not be read: the worker has no SERVICE_MASTER_KEY';
      push(
        `${encryption.unreadable} of ${encryption.encrypted} encrypted payloads ${why}. ` +
          'For those steps the tool names and inputs, models, token counts, costs, lamports and ' +
          'signatures are unknown to this autopsy; the totals above are the trace’s own.',
      );
      if (f.toolsListed.length > 0)
        push(
          '',
          `The trace lists these tools: ${f.toolsListed.map(code).join(', ')}` +
            (f.moreToolsListed > 0 ? ` and ${count(f.moreToolsListed)} more.` : '.'),
        );
    }
  }

  return `${out.join('\n')}\n`;
}
