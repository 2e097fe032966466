import { ANCHOR_DEFAULT_RPC, type AnchoringConfig } from '../config.js';
import type { WorkerLogger } from '../analysis/analysis-worker.js';
import type { Metrics } from '../observability/metrics.js';
import type { Store } from '../store/open-store.js';
import { Anchorer } from './anchorer.js';
import { SolanaMemoSink } from './solana-memo-sink.js';

/** Longest wait between retries of a failing batch. */
const MAX_BACKOFF_MS = 5 * 60_000;

/** The anchorer (not started) the configuration asks for; undefined when anchoring is off. */
export function anchorerFromConfig(
  config: AnchoringConfig,
  store: Store,
  deps: { logger: WorkerLogger; metrics: Metrics },
): Anchorer | undefined {
  if (config.keypair === undefined || config.cluster === undefined) return undefined;
  const sink = new SolanaMemoSink({
    cluster: config.cluster,
    rpcUrl: config.rpcUrl ?? ANCHOR_DEFAULT_RPC[config.cluster],
    keypair: config.keypair,
  });
  return new Anchorer({
    store: store.anchors,
    sink,
    logger: deps.logger,
    metrics: deps.metrics,
    intervalMs: config.intervalMs,
    batchRuns: config.batchRuns,
    pollMs: config.pollMs,
    leaseMs: config.leaseMs,
    backoffMs: config.backoffMs,
    maxBackoffMs: MAX_BACKOFF_MS,
  });
}
