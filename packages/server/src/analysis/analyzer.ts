import type { AnalysisResult, StoredRun } from '../store/analysis-store.js';

/**
 * Writes the autopsy of one stored run. Implementations must not store anything themselves and
 * must not put decrypted payload content into the result beyond the facts they state.
 */
export interface Analyzer {
  /** Recorded with each result: `heuristic`, `llm:<model>`. */
  readonly name: string;
  /** `signal` aborts when the worker gives up on the job (shutdown deadline). */
  analyze(run: StoredRun, signal: AbortSignal): Promise<AnalysisResult>;
}
