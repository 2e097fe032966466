import type { AnalysisConfig } from '../config.js';
import type { Metrics } from '../observability/metrics.js';
import type { Store } from '../store/open-store.js';
import { AnalysisWorker, type WorkerLogger } from './analysis-worker.js';
import type { Analyzer } from './analyzer.js';
import { HeuristicAnalyzer } from './heuristic-analyzer.js';
import { LlmAnalyzer } from './llm-analyzer.js';

/** The heuristic analyzer, or the LLM one (falling back to it) when an endpoint is configured. */
export function analyzerFromConfig(config: AnalysisConfig): Analyzer {
  const heuristic = new HeuristicAnalyzer(config.serviceMasterKey);
  if (config.llmBaseUrl === undefined || config.llmModel === undefined) return heuristic;
  return new LlmAnalyzer({
    endpoint: {
      baseUrl: config.llmBaseUrl,
      model: config.llmModel,
      apiKey: config.llmApiKey,
      timeoutMs: config.llmTimeoutMs,
    },
    fallback: heuristic,
    masterKey: config.serviceMasterKey,
    sendDecrypted: config.llmSendDecrypted,
  });
}

/** A worker (not started) on `store`'s queue with the configured analyzer and limits. */
export function workerFromConfig(
  config: AnalysisConfig,
  store: Store,
  deps: { logger: WorkerLogger; metrics: Metrics; analyzer?: Analyzer },
): AnalysisWorker {
  return new AnalysisWorker({
    queue: store.analysis,
    fingerprints: store.fingerprints,
    analyzer: deps.analyzer ?? analyzerFromConfig(config),
    logger: deps.logger,
    metrics: deps.metrics,
    leaseMs: config.leaseMs,
    maxAttempts: config.maxAttempts,
    pollMs: config.pollMs,
  });
}
