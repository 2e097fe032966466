import { dominantText, renderTop, retryText } from './autopsy-top.js';
import type { FailureChain } from './failure-facts.js';
import type { LoopFact } from './loop-facts.js';
import {
  cell,
  code,
  codeCell,
  count,
  duration,
  group,
  inline,
  lamportsToSol,
  percent,
  plural,
  quote,
  sequences,
  stepLine,
  stepRef,
} from './markdown-format.js';
import type { RunFacts } from './run-facts.js';
import type { ContributorFact } from './spend-facts.js';

export { lamportsToSol } from './markdown-format.js';

/*
 * The heuristic autopsy: the facts of a run as a short Markdown report. The answer on top (the
 * verdict and the likely cause, autopsy-top.ts), then the evidence: what the run was asked and
 * produced, the failure chain, retries, loops, dominant steps, tools, spend, transactions and
 * payments. Text that came from the agent is shortened and shown as text, never as Markdown of
 * its own: every piece goes through agentMarkdown.
 */

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

function runLine(f: RunFacts): string {
  const eventsLine =
    `${plural(f.events.analysed, 'event')} analysed` +
    (f.events.omitted > 0
      ? ` (${count(f.events.omitted)} in the middle of the run left out)`
      : '') +
    (f.events.reported !== f.events.analysed + f.events.omitted
      ? `; the trace reports ${count(f.events.reported)}`
      : '');
  return `The run **${f.status}** after ${duration(f.durationMs)}: ${eventsLine}.`;
}

function chainSection(chain: FailureChain): string[] {
  const out = ['', '### Failure chain', ''];
  // outermost first, down to where it started
  const path = [...chain.above].reverse();
  if (path.length === 0) out.push(stepLine(chain.root));
  else {
    path.forEach((s, i) => out.push(`${i + 1}. ${stepLine(s)}`));
    out.push(`${path.length + 1}. ${stepLine(chain.root)} — where it started`);
  }
  if (chain.ledBy.length > 0)
    out.push('', `Led there by its parent steps: ${chain.ledBy.map(stepRef).join(' ← ')}.`);
  if (chain.handledBy) out.push('', `Handled inside ${stepRef(chain.handledBy)}, which succeeded.`);
  if (chain.missingParent)
    out.push('', `Its parent ${code(chain.missingParent)} is not among the analysed events.`);
  if (path.length === 0 && chain.ledBy.length === 0 && !chain.missingParent && !chain.handledBy)
    out.push(
      '',
      chain.before.length > 0
        ? `A top-level step; just before it: ${chain.before.map(stepRef).join(', ')}.`
        : 'A top-level step, the first of the run.',
    );
  return out;
}

function loopLine(loop: LoopFact): string {
  const names = loop.operations.map((n) => code(n));
  const what =
    loop.period === 1
      ? `${names[0]} called ${loop.calls} times in a row with the same input${loop.input ? ` ${code(loop.input)}` : ''} and the same answer`
      : `${names.join(' → ')}: the same ${plural(loop.period, 'call')} (${loop.inputs} distinct) repeated ${loop.repetitions} times`;
  return `- ${what} (steps ${sequences(loop.sequences, loop.calls)}).`;
}

/** Every section below the top: the evidence for it. */
export function renderEvidence(f: RunFacts): string[] {
  const out: string[] = [];
  const push = (...lines: string[]) => out.push(...lines);

  push(runLine(f));
  push('', '### Asked', '', quote(f.inputSummary));
  push('', '### Produced', '');
  if (f.outputSummary) push(quote(f.outputSummary));
  else push('No output summary.');
  if (f.errorMessage) push('', `**Error:** ${inline(f.errorMessage)}`);

  const primary = f.diagnosis.causes.find((c) => c.kind === 'failure')?.chain;
  if (primary) push(...chainSection(primary));
  const { others, moreOthers } = f.failures;
  if (others.length > 0)
    push(
      '',
      `Other failures not made good (${others.length + moreOthers}):`,
      ...others.map((s) => `- ${stepLine(s)}`),
      ...(moreOthers > 0 ? [`- … and ${count(moreOthers)} more`] : []),
    );

  if (f.retries.length > 0) {
    push('', '### Retries', '');
    for (const r of f.retries) push(`- ${retryText(r)}.`);
    if (f.moreRetries > 0) push(`- … and ${count(f.moreRetries)} more.`);
  }

  if (f.loops.length > 0) {
    push('', '### Loops', '');
    for (const loop of f.loops) push(loopLine(loop));
    if (f.moreLoops > 0) push(`- … and ${count(f.moreLoops)} more.`);
  }

  if (f.dominant.length > 0) push('', '### Dominant steps', '', `${dominantText(f.dominant)}.`);

  if (f.tools.length > 0) {
    push('', '### Tool calls', '', '| tool | calls | failed | first error |', '|---|---|---|---|');
    for (const t of f.tools.slice(0, 15))
      push(`| ${codeCell(t.tool)} | ${t.calls} | ${t.failed} | ${cell(t.firstError)} |`);
    const moreTools = f.tools.length + f.moreTools - 15;
    if (moreTools > 0) push('', `… and ${count(moreTools)} more tools.`);
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
        ? ` over ${plural(tokens.llmCalls, 'model call')} (${count(tokens.input)} in, ${count(tokens.output)} out)`
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
          'signatures are unknown to this autopsy (so are retries and loops among them); the ' +
          'totals above are the trace’s own.',
      );
      if (f.toolsListed.length > 0)
        push(
          '',
          `The trace lists these tools: ${f.toolsListed.map((t) => code(t)).join(', ')}` +
            (f.moreToolsListed > 0 ? ` and ${count(f.moreToolsListed)} more.` : '.'),
        );
    }
  }
  return out;
}

/** The Markdown autopsy of a run: the answer on top, the evidence below. */
export function renderAutopsy(f: RunFacts): string {
  return `${[...renderTop(f.diagnosis), '', ...renderEvidence(f)].join('\n')}\n`;
}
