import type { AnalysisResult, StoredRun } from '../analysis/analyzer.js';
import type { Analyzer } from './analyzer.js';
import { renderAutopsy } from './autopsy-markdown.js';
import { collectRunFacts } from './run-facts.js';

export const HEURISTIC_ANALYZER = 'heuristic';

/** The default analyzer: no network, a Markdown autopsy from the stored facts alone. */
export class HeuristicAnalyzer implements Analyzer {
  readonly name = HEURISTIC_ANALYZER;

  /** `masterKey` (SERVICE_MASTER_KEY) opens encrypted payloads in memory, for this only. */
  constructor(private readonly masterKey?: Buffer) {}

  /** Synchronous at heart; exposed for the benchmark's in-process baseline too. */
  analyzeNow(run: StoredRun): AnalysisResult {
    const facts = collectRunFacts(run, { masterKey: this.masterKey });
    return { autopsy: renderAutopsy(facts), analyzer: this.name, fallbackReason: null };
  }

  async analyze(run: StoredRun): Promise<AnalysisResult> {
    return this.analyzeNow(run);
  }
}
