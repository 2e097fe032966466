import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { HeuristicAnalyzer } from '../../src/analysis/heuristic-analyzer.js';
import { LABELLED_RUNS } from './labelled-runs/index.js';

/*
 * The autopsies shown in the README and docs/autopsy.md are the analyzer's own: each block marked
 * `<!-- autopsy-example: <case> -->` (the whole autopsy) or `<!-- autopsy-top: <case> -->` (the
 * verdict and the paragraph after it) is what the analyzer writes for that labelled case.
 */

const root = new URL('../../../../', import.meta.url);
const MARKED = /<!-- autopsy-(example|top): ([a-z0-9-]+) -->\n\n```text\n([\s\S]*?)\n```/g;

function examplesIn(file: string) {
  const text = readFileSync(new URL(file, root), 'utf8');
  return [...text.matchAll(MARKED)].map(([, kind, id, shown]) => ({ kind, id: id!, shown }));
}

function written(id: string): string {
  const labelled = LABELLED_RUNS.find((c) => c.id === id);
  if (!labelled) throw new Error(`no labelled case ${id}`);
  return new HeuristicAnalyzer(labelled.masterKey).analyzeNow(labelled.run()).autopsy.trimEnd();
}

describe('autopsies shown in the documentation', () => {
  it.each(['README.md', 'docs/autopsy.md'])('%s shows what the analyzer writes', (file) => {
    const examples = examplesIn(file);
    expect(examples.length).toBeGreaterThanOrEqual(2);
    for (const { kind, id, shown } of examples) {
      const autopsy = written(id);
      const expected =
        kind === 'example' ? autopsy : autopsy.split('\n\n').slice(0, 2).join('\n\n');
      expect(shown, `${file}: ${id}`).toBe(expected);
    }
  });
});
