import type { Store } from '../../src/store/open-store.js';

/**
 * Runs `work` while the store is busy for `ms` (a transaction holding the table every batch
 * claims its id in), and resolves with its result once the store is free again: the first batch
 * statement waits, and every write that arrives meanwhile waits to be grouped, as under load.
 * (On PGlite in memory a statement otherwise ends before the next request is even read: no batch
 * would ever wait.)
 */
export async function whileStoreBusy<T>(
  store: Store,
  work: () => Promise<T>,
  ms = 300,
): Promise<T> {
  let held!: () => void;
  const holding = new Promise<void>((resolve) => (held = resolve));
  const busy = store.sql.transaction(async (tx) => {
    await tx.query('LOCK TABLE accepted_batches IN EXCLUSIVE MODE');
    held();
    await new Promise((resolve) => setTimeout(resolve, ms));
  });
  await holding;
  const result = work();
  await busy;
  return result;
}
