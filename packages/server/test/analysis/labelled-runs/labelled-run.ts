import MarkdownIt from 'markdown-it';
import type { StoredRun } from '../../../src/analysis/analyzer.js';

/*
 * One run of the labelled set, with what a careful engineer reading it would name as the cause,
 * and what the top of its autopsy (the verdict and the likely cause, the first ~250 characters a
 * person reads) must and must not say.
 */

/** The shapes the set covers (issue 21's list). */
export type Shape =
  | 'direct failure'
  | 'nested failure'
  | 'retry recovered'
  | 'retry gave up'
  | 'loop'
  | 'not a loop'
  | 'timeout'
  | 'partial success'
  | 'dominant step'
  | 'success'
  | 'encrypted'
  | 'large run'
  | 'prompt injection';

export interface LabelledRun {
  /** Kebab-case, unique: names the recorded model answer too. */
  id: string;
  shape: Shape;
  /** The cause a careful engineer would name, in a sentence. */
  why: string;
  /** Builds the run as the worker loads it (fresh ids each call). */
  run: () => StoredRun;
  /** The worker's SERVICE_MASTER_KEY, for encrypted runs read with the key. */
  masterKey?: Buffer;
  /** Each must appear (case-insensitive) in the first {@link TOP_CHARS} characters of the text. */
  mustContain: string[];
  /**
   * None may appear (case-insensitive) in the top: the verdict and the paragraph after it (the
   * evidence below may well quote them: a summary, a later failure).
   */
  mustNotContain: string[];
}

/** Where the answer must be: the first characters of the autopsy as a reader sees it. */
export const TOP_CHARS = 250;

const md = new MarkdownIt('commonmark', { html: false, linkify: false }).enable('table');

const ENTITIES: Record<string, string> = {
  '&lt;': '<',
  '&gt;': '>',
  '&amp;': '&',
  '&quot;': '"',
  '&#39;': "'",
};

/** What a reader sees of `markdown`: rendered, tags dropped, blocks on lines of their own. */
export function plainText(markdown: string): string {
  return md
    .render(markdown)
    .replace(/<\/(?:h\d|p|li|tr|blockquote)>/g, '\n')
    .replace(/<[^>]+>/g, '')
    .replace(/&(?:lt|gt|amp|quot|#39);/g, (e) => ENTITIES[e] ?? e)
    .replace(/[ \t]+/g, ' ')
    .replace(/\n\s*\n+/g, '\n')
    .trim();
}

/** The verdict and the paragraph after it (the likely cause), as text. */
export function topBlock(markdown: string): string {
  const blocks = markdown.split(/\n\s*\n/);
  return plainText(blocks.slice(0, 2).join('\n\n'));
}

export interface CaseScore {
  id: string;
  ok: boolean;
  /** Expected text not found in the first TOP_CHARS characters. */
  missing: string[];
  /** Text found in the top that must not be there. */
  unwanted: string[];
  /** The first TOP_CHARS characters, for the report. */
  top: string;
}

/** Scores one autopsy against its case. */
export function scoreAutopsy(labelled: LabelledRun, autopsy: string): CaseScore {
  const first = plainText(autopsy).slice(0, TOP_CHARS).toLowerCase();
  const block = topBlock(autopsy).toLowerCase();
  const missing = labelled.mustContain.filter((s) => !first.includes(s.toLowerCase()));
  const unwanted = labelled.mustNotContain.filter((s) => block.includes(s.toLowerCase()));
  return {
    id: labelled.id,
    ok: missing.length === 0 && unwanted.length === 0,
    missing,
    unwanted,
    top: plainText(autopsy).slice(0, TOP_CHARS),
  };
}

/** A report of the failed cases, one paragraph each. */
export function describeMisses(scores: CaseScore[]): string {
  return scores
    .filter((s) => !s.ok)
    .map(
      (s) =>
        `${s.id}:\n  missing ${JSON.stringify(s.missing)}\n  unwanted ${JSON.stringify(s.unwanted)}\n  top: ${JSON.stringify(s.top)}`,
    )
    .join('\n');
}
