import type { TraceFingerprints } from '@flightlog/protocol';
import type { Store } from '../store/open-store.js';

export type FingerprintsLookup =
  | { kind: 'found'; fingerprints: TraceFingerprints }
  /** No such run, or the user has no role on its agent. */
  | { kind: 'not-found' };

/** Every fingerprint a run had, when the user has a role on its agent. */
export async function readFingerprints(
  store: Store,
  userId: string,
  traceId: string,
): Promise<FingerprintsLookup> {
  const found = await store.fingerprints.historyForMember(userId, traceId);
  return found === undefined ? { kind: 'not-found' } : { kind: 'found', fingerprints: found };
}
