import { AgentStore } from './agent-store.js';
import { AnalysisStore } from './analysis-store.js';
import { AuditStore } from './audit-store.js';
import { ExportStore } from './export-store.js';
import { LifecycleStore } from './lifecycle-store.js';
import { migrate } from './migrate.js';
import { openPgliteClient } from './pglite-client.js';
import type { DataDirDurability } from './pglite-durability.js';
import { openPostgresClient } from './postgres-client.js';
import type { SqlClient, StoreEngine } from './sql-client.js';
import { StatsStore } from './stats-store.js';
import { TraceStore } from './trace-store.js';

export interface StoreOptions {
  /** PostgreSQL connection string; when absent the embedded PGlite engine is used. */
  databaseUrl?: string;
  /** Schema inside PostgreSQL (default: the connection's search path). */
  databaseSchema?: string;
  /** PGlite data directory; undefined keeps the data in memory. */
  dataDir?: string;
  /** What an acknowledged commit in `dataDir` survives (default `power-loss`: it is fsynced). */
  dataDirDurability?: DataDirDurability;
  poolSize?: number;
  /**
   * PostgreSQL: the longest a statement may run (`statement_timeout`); a database that does not
   * answer at all is given up 2 s after it. Default 10000.
   */
  statementTimeoutMs?: number;
  /** Apply pending migrations on open (the server does; `flightlog migrate` does explicitly). */
  migrate?: boolean;
}

/** The trace store: one SQL client and the repositories built on it. */
export interface Store {
  readonly engine: StoreEngine;
  readonly sql: SqlClient;
  readonly traces: TraceStore;
  readonly agents: AgentStore;
  readonly analysis: AnalysisStore;
  readonly stats: StatsStore;
  /** Run time-outs, deletion, retention and the audit log (the data lifecycle). */
  readonly lifecycle: LifecycleStore;
  /** An agent's runs with their events, page by page (export). */
  readonly exports: ExportStore;
  /** Deletions and lifecycle changes: who, what, when. */
  readonly audit: AuditStore;
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Chooses the engine once, from configuration, and applies migrations. */
export async function openStore(options: StoreOptions): Promise<Store> {
  const sql = options.databaseUrl
    ? await openPostgresClient({
        connectionString: options.databaseUrl,
        ...(options.databaseSchema ? { schema: options.databaseSchema } : {}),
        ...(options.poolSize ? { poolSize: options.poolSize } : {}),
        ...(options.statementTimeoutMs ? { statementTimeoutMs: options.statementTimeoutMs } : {}),
      })
    : await openPgliteClient(options.dataDir, options.dataDirDurability);
  try {
    if (options.migrate !== false) await migrate(sql);
  } catch (error) {
    await sql.close();
    throw error;
  }
  return {
    engine: sql.engine,
    sql,
    traces: new TraceStore(sql),
    agents: new AgentStore(sql),
    analysis: new AnalysisStore(sql),
    stats: new StatsStore(sql),
    lifecycle: new LifecycleStore(sql),
    exports: new ExportStore(sql),
    audit: new AuditStore(sql),
    ping: () => sql.ping(),
    close: () => sql.close(),
  };
}
