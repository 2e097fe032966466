import type { StoreConfig } from '../config.js';
import type { StoreOptions } from './open-store.js';

/** Who opens the store: the server, a stand-alone analysis worker, or a one-off CLI command. */
export type StoreUser = 'server' | 'worker' | 'command';

/**
 * The configured store's options for `user`: the same engine, place, schema and durability for
 * every process of one deployment; pool, deadlines, group commit and migration by what the
 * process does with it.
 */
export function storeOptionsFrom(config: StoreConfig, user: StoreUser): StoreOptions {
  const where: StoreOptions = config.databaseUrl
    ? { databaseUrl: config.databaseUrl }
    : {
        dataDir: config.dataDir,
        dataDirDurability: config.dataDirDurability,
        pgliteThread: config.pgliteThread,
      };
  if (config.databaseSchema) where.databaseSchema = config.databaseSchema;
  switch (user) {
    case 'server':
      return {
        ...where,
        poolSize: config.poolSize,
        statementTimeoutMs: config.statementTimeoutMs,
        ingestGroup: config.ingestGroup,
      };
    case 'worker':
      // One job at a time: a connection for it and one for the lease bookkeeping. It ingests
      // nothing, so it has no group commit.
      return {
        ...where,
        poolSize: Math.min(config.poolSize, 2),
        statementTimeoutMs: config.statementTimeoutMs,
      };
    case 'command':
      // A small pool; whether it migrates is the command's to say (see the CLI).
      return { ...where, poolSize: 2 };
  }
}
