import type { LiveBus } from '../live/live-bus.js';
import type { LifecycleStore } from '../store/lifecycle-store.js';

/** Who asks for a deletion: a dashboard user (who must own the run's agent), or the admin. */
export type Deleter = { kind: 'user'; userId: string } | { kind: 'admin' };

export type RunDeletionOutcome =
  | { kind: 'deleted'; agentId: string; events: number }
  /** No such run, or one the user has no role on: the same answer, so nothing is revealed. */
  | { kind: 'not-found' }
  /** The user may read the run but is not an owner of its agent. */
  | { kind: 'forbidden' }
  /**
   * The run's rows are gone, but the live buffer could not be reached: a replay could still show
   * it. Asking again (within the tombstone) clears it; the sweeper retries meanwhile.
   */
  | { kind: 'live-not-cleared'; agentId: string; error: unknown };

export interface RunDeletionContext {
  store: Pick<LifecycleStore, 'runHolders' | 'tombstone' | 'deleteRunRows' | 'markLiveCleared'>;
  bus: Pick<LiveBus, 'forgetTraces'>;
  /** How long the run's id stays refused to its agent's batches (DELETED_RUN_TOMBSTONE_MS). */
  tombstoneMs: number;
  /** Rows per statement (LIFECYCLE_SWEEP_ROWS). */
  rowsPerStatement: number;
}

/**
 * Deletes a run everywhere it is stored: first a tombstone with its audit record (from then on a batch of it, from a
 * client still retrying, writes nothing), then its events in short statements, then the run with
 * its analysis jobs and autopsies, then its messages in the live buffer. Asking again while the
 * tombstone lasts finishes what is left and answers as the first time: a deletion is idempotent.
 */
export async function deleteRun(
  context: RunDeletionContext,
  deleter: Deleter,
  traceId: string,
): Promise<RunDeletionOutcome> {
  const { store } = context;
  const holders = await store.runHolders(traceId, deleter.kind === 'user' ? deleter.userId : null);
  const holder = deleter.kind === 'admin' ? holders[0] : holders.find((h) => h.role !== null);
  if (!holder) return { kind: 'not-found' };
  if (deleter.kind === 'user' && holder.role !== 'owner') return { kind: 'forbidden' };
  const { agentId } = holder;
  const actor = deleter.kind === 'admin' ? 'admin' : `user:${deleter.userId}`;
  await store.tombstone(agentId, traceId, context.tombstoneMs, actor);
  const events = await store.deleteRunRows(agentId, traceId, context.rowsPerStatement);
  try {
    await context.bus.forgetTraces(agentId, [traceId]);
  } catch (error) {
    return { kind: 'live-not-cleared', agentId, error };
  }
  await store.markLiveCleared(agentId, traceId);
  return { kind: 'deleted', agentId, events };
}
