/** What a query can run on: the client itself, or one open transaction. */
export interface SqlExecutor {
  query<Row = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<Row[]>;
}

export type StoreEngine = 'pglite' | 'postgres';

export const PGLITE_THREADS = ['main', 'worker'] as const;
/** Where the embedded engine runs: the event loop, or a thread of its own (pglite-thread-client.ts). */
export type PgliteThread = (typeof PGLITE_THREADS)[number];

/**
 * The storage engine boundary. Flightlog speaks one SQL dialect; the two implementations
 * (pglite-client.ts, postgres-client.ts) differ only in how they connect and run transactions.
 *
 * Row values come back normalised the same way on both: bigint as number, numeric as string,
 * timestamptz as Date, json as parsed value, arrays as arrays.
 */
export interface SqlClient extends SqlExecutor {
  readonly engine: StoreEngine;
  /** Runs `work` in one transaction: committed if it resolves, rolled back if it throws. */
  transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T>;
  /** Resolves when the engine answers a trivial query. */
  ping(): Promise<void>;
  /** Idempotent. */
  close(): Promise<void>;
}
