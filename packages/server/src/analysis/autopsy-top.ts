import type { Cause, Diagnosis } from './diagnosis.js';
import type { DominantFact } from './dominant-facts.js';
import type { LoopFact } from './loop-facts.js';
import {
  code,
  duration,
  inline,
  percent,
  plural,
  sequences,
  shortId,
  stepRef,
} from './markdown-format.js';
import type { RetryFact } from './retry-facts.js';

/*
 * The top of the autopsy: the verdict line and the paragraph after it. Read first, often alone,
 * so it carries the answer in about 250 characters: how the run ended, and what made it so (the
 * deepest failing step with its own error and identifiers, a retry that gave up, a loop, a step
 * that never ended), or for a run that went well, the step that took most of its time or cost.
 */

/** Agent text in the top is cut shorter than in the sections below. */
const TOP_TEXT = 160;
const TOP_INPUT = 60;

function outcomeText(d: Diagnosis): string {
  const failed = d.failedSteps === 0 ? '' : `, ${plural(d.failedSteps, 'failed step')}`;
  switch (d.outcome) {
    case 'failed':
      return `failed${failed}`;
    case 'timed-out':
      return `timed out${failed}`;
    case 'completed-with-problems':
      return d.failedSteps === 0 ? 'completed, stuck in a loop' : `completed${failed}`;
    case 'succeeded-after-retries':
      return `succeeded, ${plural(d.recoveredFailures, 'failed step')} made good by retries`;
    case 'succeeded':
      return 'succeeded';
    case 'running':
      return `running when analysed${failed}`;
  }
}

/** `#3 \`llm_call gpt-4o\` took 70 % of the time (7.0 s of 10.0 s)`, or of the model cost. */
export function dominantText(facts: DominantFact[]): string {
  const [first, second] = facts;
  if (!first) return '';
  const part = (d: DominantFact) =>
    d.kind === 'time'
      ? `${percent(d.share)} of the time (${duration(d.ms)} of ${duration(d.runMs)})`
      : `${percent(d.share)} of the model cost ($${d.usd} of $${d.totalUsd})`;
  const verb = (d: DominantFact) => (d.kind === 'time' ? 'took' : 'was');
  if (second && second.step.eventId === first.step.eventId)
    return `${stepRef(first.step)} took ${part(first)} and ${part(second)}`;
  return facts.map((d) => `${stepRef(d.step)} ${verb(d)} ${part(d)}`).join('; ');
}

function loopText(loop: LoopFact, completed: boolean): string {
  const names = loop.operations.map((n) => code(n, 80));
  let what: string;
  if (loop.period === 1)
    what =
      `${names[0]} was called ${loop.calls} times in a row with the same input` +
      (loop.input ? ` ${code(loop.input, TOP_INPUT)}` : '') +
      ' and the same answer';
  else if (names.length === 1)
    what = `${names[0]} went round the same ${loop.inputs} inputs ${loop.repetitions} times (${loop.calls} calls, same answers)`;
  else
    what = `${names.join(' → ')} repeated ${loop.repetitions} times (${loop.calls} calls, same inputs and answers)`;
  return (
    `stuck in a loop: ${what}, from #${loop.firstSequence} to #${loop.lastSequence}` +
    (completed ? ' (the run still completed)' : '')
  );
}

function failureText(cause: Extract<Cause, { kind: 'failure' }>): string {
  const { chain, retry, chainTx, payment } = cause;
  const root = chain.root;
  let text = stepRef(root);
  if (payment) {
    if (payment.amount)
      text += ` (${inline([payment.amount, payment.asset].filter(Boolean).join(' '), 40)})`;
    text += payment.settled === false ? ' was not settled' : ' failed';
  } else text += ' failed';
  const confirmation = chainTx?.confirmation ?? null;
  if (confirmation !== null && (confirmation === 'failed' || root.status === 'error'))
    text += ` (confirmation: ${inline(confirmation, 20)})`;
  if (retry)
    text +=
      ` on all ${retry.attempts} attempts` +
      (retry.spentMs === null ? '' : ` (${duration(retry.spentMs)})`);
  if (chain.message?.from === root.sequence) text += `: ${inline(chain.message.text, TOP_TEXT)}`;
  else if (chain.message)
    text += ` without a message; #${chain.message.from} above it said: ${inline(chain.message.text, TOP_TEXT)}`;
  const ids: string[] = [];
  if (chainTx?.signature) ids.push(`signature ${shortId(chainTx.signature)}`);
  if (payment?.txSignature) ids.push(`transaction ${shortId(payment.txSignature)}`);
  if (ids.length > 0) text += `; ${ids.join(', ')}`;
  const above = chain.above;
  if (above.length === 1) text += ` (inside ${stepRef(above[0]!)})`;
  else if (above.length === 2) text += ` (inside ${stepRef(above[0]!)} ← ${stepRef(above[1]!)})`;
  else if (above.length > 2)
    text += ` (inside ${stepRef(above[0]!)} ← … ← ${stepRef(above.at(-1)!)}, ${above.length} levels up)`;
  if (chain.handledBy) text += ` (handled inside ${stepRef(chain.handledBy)}, which succeeded)`;
  if (chain.missingParent) text += ' (its parent step is not among the analysed events)';
  return text;
}

function causeText(cause: Cause, d: Diagnosis): string {
  switch (cause.kind) {
    case 'failure':
      return failureText(cause);
    case 'loop':
      return loopText(cause.loop, d.outcome === 'completed-with-problems');
    case 'unfinished':
      return (
        `${stepRef(cause.step)} was still running when the run ${d.outcome === 'timed-out' ? 'timed out' : 'ended'}` +
        (cause.startedAfterMs === null
          ? ''
          : ` (started ${duration(cause.startedAfterMs)} in, never finished)`)
      );
    case 'run-error': {
      const said = cause.message
        ? `no step failed; the run reported: ${inline(cause.message, TOP_TEXT)}`
        : 'no step failed and the run gave no error message';
      return cause.dominant ? `${said}; ${dominantText([cause.dominant])}` : said;
    }
  }
}

export function retryText(r: RetryFact): string {
  const errors = r.errors.length > 0 ? ` (${r.errors.map((e) => inline(e, 80)).join('; ')})` : '';
  const head = `${code(r.label, 80)} needed ${r.attempts} attempts (${sequences(r.sequences, r.attempts)})`;
  const spent = r.spentMs === null ? '' : `, ${duration(r.spentMs)}`;
  return r.recovered
    ? `${head}: ${plural(r.failedAttempts, 'failure')}${errors} before the one that worked${spent}` +
        (r.sameInput ? '' : ', with a changed input')
    : `${head}, all failed${errors}${spent}; it gave up`;
}

/** The verdict line and the paragraph with the answer. */
export function renderTop(d: Diagnosis): string[] {
  const wentWell = d.outcome === 'succeeded' || d.outcome === 'succeeded-after-retries';
  const dominant = wentWell ? dominantText(d.dominant) : '';
  const out = [`## Verdict: ${outcomeText(d)}${dominant ? `; ${dominant}` : ''}`];
  if (d.causes.length > 0) {
    const [first, ...rest] = d.causes.map((c) => causeText(c, d));
    // a loop, then the failure that stopped it; otherwise a second cause is one more finding
    const link = d.causes[0]?.kind === 'loop' && d.causes[1]?.kind === 'failure' ? 'then' : 'also';
    out.push('', `**Likely cause:** ${[first, ...rest.map((t) => `${link} ${t}`)].join('; ')}.`);
  } else if (d.outcome === 'succeeded-after-retries' && d.recoveredRetries.length > 0)
    out.push('', `**Retried:** ${d.recoveredRetries.map(retryText).join('; ')}.`);
  return out;
}
