import { AgentStore } from './agent-store.js';
import { AnchorStore } from './anchor-store.js';
import { AnalysisStore } from './analysis-store.js';
import { FingerprintStore } from './fingerprint-store.js';
import { AuditStore } from './audit-store.js';
import { ExportStore } from './export-store.js';
import { LifecycleStore } from './lifecycle-store.js';
import { migrate } from './migrate.js';
import { openPgliteClient } from './pglite-client.js';
import { openPgliteThreadClient } from './pglite-thread-client.js';
import type { DataDirDurability } from './pglite-durability.js';
import { openPostgresClient } from './postgres-client.js';
import { ShareStore } from './share-store.js';
import type { PgliteThread, SqlClient, StoreEngine } from './sql-client.js';
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
  /** Where PGlite runs: on the event loop (the default), or on a thread of its own. */
  pgliteThread?: PgliteThread;
  poolSize?: number;
  /**
   * PostgreSQL: the longest a statement may run (`statement_timeout`); a database that does not
   * answer at all is given up 2 s after it. Default 10000.
   */
  statementTimeoutMs?: number;
  /**
   * Group commit of ingest batches (see batch-groups.ts); off when absent. Concurrency defaults
   * to GROUP_CONCURRENCY of the engine.
   */
  ingestGroup?: { maxBatches: number; concurrency?: number };
  /** Apply pending migrations on open (the server does; `flightlog migrate` does explicitly). */
  migrate?: boolean;
}

/** The most JSON one group's statement carries; a batch past it goes alone. */
const GROUP_MAX_BYTES = 1024 * 1024;

/**
 * Batch statements under way at once before arrivals wait to be grouped. PGlite runs one
 * statement at a time anyway, so what arrives during one statement is the next one's group.
 * PostgreSQL runs two side by side (each on a connection of its own): against four, the groups
 * are about twice as large, which cost the database 13–40 % less CPU per batch and the service
 * less too (fewer statements to build and answers to read), for 3–30 % more batches/s in
 * interleaved runs (docs/performance.md); one writer gained a little more on small batches, but
 * would leave every batch behind a tenant's one slow statement.
 */
const GROUP_CONCURRENCY: Record<StoreEngine, number> = { postgres: 2, pglite: 1 };

/** The trace store: one SQL client and the repositories built on it. */
export interface Store {
  readonly engine: StoreEngine;
  readonly sql: SqlClient;
  readonly traces: TraceStore;
  readonly agents: AgentStore;
  readonly analysis: AnalysisStore;
  /** Finished runs' fingerprints (`traceHash`) and their history. */
  readonly fingerprints: FingerprintStore;
  readonly stats: StatsStore;
  /** Run time-outs, deletion, retention and the audit log (the data lifecycle). */
  readonly lifecycle: LifecycleStore;
  /** An agent's runs with their events, page by page (export). */
  readonly exports: ExportStore;
  /** Deletions and lifecycle changes: who, what, when. */
  readonly audit: AuditStore;
  /** Runs' public share links. */
  readonly shares: ShareStore;
  /** Finished runs' trees and their way on chain (anchoring). */
  readonly anchors: AnchorStore;
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
    : options.pgliteThread === 'worker'
      ? await openPgliteThreadClient(options.dataDir, options.dataDirDurability)
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
    traces: new TraceStore(
      sql,
      options.ingestGroup
        ? {
            groups: {
              maxBatches: options.ingestGroup.maxBatches,
              concurrency: options.ingestGroup.concurrency ?? GROUP_CONCURRENCY[sql.engine],
              maxBytes: GROUP_MAX_BYTES,
              // PGlite on the event loop runs each statement there (see batch-groups.ts); on
              // its own thread, batches that come in meanwhile group as on PostgreSQL
              gatherTurn: sql.engine === 'pglite' && options.pgliteThread !== 'worker',
            },
          }
        : {},
    ),
    agents: new AgentStore(sql),
    analysis: new AnalysisStore(sql),
    fingerprints: new FingerprintStore(sql),
    stats: new StatsStore(sql),
    lifecycle: new LifecycleStore(sql),
    exports: new ExportStore(sql),
    audit: new AuditStore(sql),
    shares: new ShareStore(sql),
    anchors: new AnchorStore(sql),
    ping: () => sql.ping(),
    close: () => sql.close(),
  };
}
