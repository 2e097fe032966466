import type { Event, Trace } from '@flightlog/protocol';

/** What an analyzer wrote about a run: its autopsy (Markdown), who wrote it, and why a fallback was used. */
export interface AnalysisResult {
  autopsy: string;
  analyzer: string;
  fallbackReason: string | null;
}

/** A stored run, as the analyzers read it. */
export interface StoredRun {
  trace: Trace;
  /** By sequence. With more than the load limit, the first and last halves. */
  events: Event[];
  /** Events left out between the two halves (0 when all were loaded). */
  omittedEvents: number;
}

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
