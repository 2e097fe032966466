import { buildApp, type AppDependencies, type FlightlogApp } from './app.js';
import type { Config } from './config.js';
import { createRedisBus } from './live/redis-bus.js';
import { openStore, type Store } from './store/open-store.js';

export interface RunningServer extends FlightlogApp {
  store: Store;
  /** `http://host:port` the server listens on. */
  url: string;
  /** Stops accepting, lets in-flight requests finish, closes the store. Idempotent; bounded. */
  close(): Promise<void>;
}

/** Opens the configured store (migrating it), builds the app and listens. */
export async function startServer(
  config: Config,
  options: { logger?: AppDependencies['logger'] } = {},
): Promise<RunningServer> {
  const store = await openStore({
    ...(config.databaseUrl ? { databaseUrl: config.databaseUrl } : { dataDir: config.dataDir }),
    ...(config.databaseSchema ? { databaseSchema: config.databaseSchema } : {}),
    poolSize: config.databasePoolSize,
  });
  let built: FlightlogApp;
  try {
    // The live bus is chosen once, from configuration: Redis Streams when REDIS_URL is set.
    const bus = config.redisUrl
      ? createRedisBus({ url: config.redisUrl, keyPrefix: config.liveRedisPrefix })
      : undefined;
    // Give Redis a moment so the first streams get their replay; a Redis that is down does not
    // hold the service back (streams warn until it is up).
    await bus?.ready(2_000);
    built = await buildApp({
      config,
      store,
      ...(bus ? { bus } : {}),
      ...(options.logger !== undefined ? { logger: options.logger } : {}),
    });
    await built.app.listen({ port: config.port, host: config.host });
  } catch (error) {
    await store.close();
    throw error;
  }
  const address = built.app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          built.app.log.warn({ timeoutMs: config.shutdownTimeoutMs }, 'shutdown deadline reached');
          built.app.server.closeAllConnections();
          resolve();
        }, config.shutdownTimeoutMs);
        timer.unref();
      });
      await Promise.race([built.app.close(), deadline]);
      clearTimeout(timer);
      await store.close();
    })();
    return closing;
  };
  return { ...built, store, url: `http://${host}:${port}`, close };
}
