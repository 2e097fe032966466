export { buildApp, type AppDependencies, type FlightlogApp } from './app.js';
export {
  changeConfig,
  loadConfig,
  ConfigError,
  type Config,
  type ConfigChanges,
} from './config.js';
export { startServer, type RunningServer } from './server.js';
export { openStore, type Store, type StoreOptions } from './store/open-store.js';
export { migrate } from './store/migrate.js';
export { openPgliteDataDir, type DataDirDurability } from './store/pglite-durability.js';
export { PGLITE_EXTENSIONS } from './store/pglite-client.js';
export type { SqlClient, SqlExecutor, StoreEngine } from './store/sql-client.js';
export { FlightlogError, type ErrorCode } from './errors/flightlog-error.js';
export { mintDevToken } from './auth/dev-token.js';
