import { isIPv6 } from 'node:net';
import type { AnalysisWorker } from './analysis/analysis-worker.js';
import { workerFromConfig } from './analysis/worker-from-config.js';
import type { Anchorer } from './anchoring/anchorer.js';
import { anchorerFromConfig } from './anchoring/anchorer-from-config.js';
import { buildApp, type AppDependencies, type FlightlogApp } from './app.js';
import type { Config } from './config.js';
import { createRedisBus } from './live/redis-bus.js';
import { replayHistoryFrom } from './live/replay-history.js';
import { openStore, type Store } from './store/open-store.js';
import { storeOptionsFrom } from './store/store-from-config.js';

export interface RunningServer extends FlightlogApp {
  store: Store;
  /** `http://host:port` the server listens on. */
  url: string;
  /** The in-process analysis worker; absent with `ANALYSIS_WORKER=off`. */
  worker: AnalysisWorker | undefined;
  /** The anchorer putting finished runs on chain; absent without `ANCHOR_KEYPAIR`. */
  anchorer: Anchorer | undefined;
  /**
   * Stops accepting and claiming, lets in-flight requests and the analysis in flight finish,
   * closes the store. Idempotent; bounded by SHUTDOWN_TIMEOUT_MS.
   */
  close(): Promise<void>;
}

/** Opens the configured store (migrating it), builds the app and listens. */
export async function startServer(
  config: Config,
  options: { logger?: AppDependencies['logger'] } = {},
): Promise<RunningServer> {
  const store = await openStore(storeOptionsFrom(config.store, 'server'));
  let built: FlightlogApp;
  let logBusError: (error: unknown) => void = () => {};
  let worker: AnalysisWorker | undefined;
  let anchorer: Anchorer | undefined;
  try {
    // The live bus is chosen once, from configuration: Redis Streams when REDIS_URL is set. Its
    // connection errors repeat at every reconnection attempt while Redis is away: debug level
    // (the streams' warnings and the backlog metrics tell the operator).
    const bus = config.live.redisUrl
      ? createRedisBus({
          url: config.live.redisUrl,
          keyPrefix: config.live.redisPrefix,
          totalMaxBytes: config.live.bufferMaxBytes,
          agentMaxBytes: config.live.agentBufferMaxBytes,
          backlogMaxBytes: config.live.backlogMaxBytes,
          history: replayHistoryFrom(store.traces),
          onError: (error) => logBusError(error),
        })
      : undefined;
    // Give Redis a moment so the first streams get their replay; a Redis that is down does not
    // hold the service back (streams warn until it is up).
    await bus?.ready(2_000);
    built = await buildApp({
      config,
      store,
      // closed here, after the analysis worker is done with it
      closeStoreOnClose: false,
      onAnalysisQueued: (runnableInMs) => worker?.nudge(runnableInMs),
      ...(bus ? { bus } : {}),
      ...(options.logger !== undefined ? { logger: options.logger } : {}),
    });
    const log = built.app.log;
    logBusError = (error) => log.debug({ err: error }, 'live bus error');
    await built.app.listen({ port: config.http.port, host: config.http.host });
    if (config.analysis.worker) {
      worker = workerFromConfig(config.analysis, store, {
        logger: built.app.log,
        metrics: built.metrics,
      });
      worker.start();
    }
    anchorer = anchorerFromConfig(config.anchoring, store, {
      logger: built.app.log,
      metrics: built.metrics,
    });
    anchorer?.start();
  } catch (error) {
    await store.close();
    throw error;
  }
  const address = built.app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.http.port;
  const host =
    config.http.host === '0.0.0.0' || config.http.host === '::' ? '127.0.0.1' : config.http.host;
  // an IPv6 address is bracketed in a URL (`HOST=::1`)
  const urlHost = isIPv6(host) ? `[${host}]` : host;

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          built.app.log.warn(
            { timeoutMs: config.process.shutdownTimeoutMs },
            'shutdown deadline reached',
          );
          built.app.server.closeAllConnections();
          resolve();
        }, config.process.shutdownTimeoutMs);
        timer.unref();
      });
      // The worker stops claiming at once; its job in flight has until just before the same
      // deadline, so that it is abandoned (to its lease) before the store goes away.
      await Promise.race([
        Promise.all([
          built.app.close(),
          worker?.stop(Math.floor(config.process.shutdownTimeoutMs * 0.9)),
          anchorer?.stop(),
        ]),
        deadline,
      ]);
      clearTimeout(timer);
      await store.close();
    })();
    return closing;
  };
  return { ...built, store, url: `http://${urlHost}:${port}`, worker, anchorer, close };
}
