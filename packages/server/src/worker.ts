import { pino } from 'pino';
import type { AnalysisWorker, WorkerLogger } from './analysis/analysis-worker.js';
import { workerFromConfig } from './analysis/worker-from-config.js';
import type { Config } from './config.js';
import { serializeError } from './observability/log-error.js';
import { Metrics } from './observability/metrics.js';
import { DataDirInUseError } from './store/data-dir-lock.js';
import { openStore, type Store } from './store/open-store.js';
import { storeOptionsFrom } from './store/store-from-config.js';

export interface RunningWorker {
  worker: AnalysisWorker;
  store: Store;
  metrics: Metrics;
  /** Stops claiming, lets the job in flight finish within SHUTDOWN_TIMEOUT_MS, closes the store. */
  close(): Promise<void>;
}

/** Why `flightlog worker` cannot run on the embedded engine beside a server. */
export class WorkerNeedsDatabaseError extends Error {
  override name = 'WorkerNeedsDatabaseError';
}

/**
 * A stand-alone analysis worker (`flightlog worker`): opens the configured store (migrating
 * it, so a worker may start first) and works the queue until closed.
 */
export async function startWorker(
  config: Config,
  options: { logger?: WorkerLogger } = {},
): Promise<RunningWorker> {
  let store: Store;
  try {
    store = await openStore(storeOptionsFrom(config.store, 'worker'));
  } catch (error) {
    if (error instanceof DataDirInUseError)
      throw new WorkerNeedsDatabaseError(
        `DATA_DIR ${error.dataDir} is in use by ${error.holder}, probably a server. ` +
          'On the embedded engine only one process may hold DATA_DIR, and the server already ' +
          'runs an analysis worker (unless ANALYSIS_WORKER=off). Stand-alone workers need ' +
          'PostgreSQL: set DATABASE_URL (the same as the server’s).',
        { cause: error },
      );
    throw error;
  }
  const logger =
    options.logger ??
    pino({
      level: config.process.logLevel,
      base: { pid: process.pid },
      serializers: { err: serializeError },
    });
  const metrics = new Metrics();
  const worker = workerFromConfig(config.analysis, store, { logger, metrics });
  worker.start();
  // The worker's own timers never hold a process open; this command exists to run it.
  const keepAlive = setInterval(() => {}, 2 ** 30);

  let closing: Promise<void> | undefined;
  return {
    worker,
    store,
    metrics,
    close() {
      closing ??= (async () => {
        clearInterval(keepAlive);
        await worker.stop(config.process.shutdownTimeoutMs);
        await store.close();
      })();
      return closing;
    },
  };
}
