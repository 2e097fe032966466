import { timerDelay } from './timer-delay.js';

/**
 * What the registry needs from a client: its periodic flush, its exit flush, and where to warn.
 * Implemented by ClientCore.
 */
export interface RegisteredClient {
  /** The flush timer's work. Never throws. */
  tick(): void;
  /** `beforeExit`: send what is buffered (when the client was made with `flushOnExit`). */
  flushBeforeExit(): void;
  /** Told once when too many clients are alive at once. */
  warnTooManyClients(count: number): void;
}

/**
 * More live clients than this is almost always one client per request or per task that is
 * never closed: each keeps a timer, a buffer and a connection pool. Warned about once.
 */
export const MANY_CLIENTS = 100;

interface Tracking {
  ref: WeakRef<RegisteredClient>;
  timer: NodeJS.Timeout;
}

/** Every client not yet closed, weakly: a client the host dropped may be collected. */
const live = new Set<WeakRef<RegisteredClient>>();
/**
 * Clients with work pending (a buffer to flush, a batch to send), strongly: an unreferenced client
 * stays alive until its data is delivered or given up on, then becomes collectable again.
 */
const busy = new Set<RegisteredClient>();
/** Tracking of each live client, to forget it on close(). */
const tracking = new WeakMap<RegisteredClient, Tracking>();
/** A collected client's timer is stopped and its entry forgotten. */
const collected = new FinalizationRegistry<Tracking>((held) => {
  clearInterval(held.timer);
  live.delete(held.ref);
  if (live.size === 0) process.off('beforeExit', onBeforeExit);
});
let warnedMany = false;

function onBeforeExit(): void {
  // A copy: a flush may finish synchronously and take the client out of the set.
  for (const client of [...busy]) client.flushBeforeExit();
}

/**
 * Tracks a new client: starts its flush timer (unref'd, so it never keeps the process alive; its
 * callback holds the client only weakly, so the timer does not keep the client alive either) and
 * the one `beforeExit` listener all clients share. A client the host no longer references, once
 * idle with an empty buffer, is collected by the garbage collector, and its timer stops.
 */
export function trackClient(client: RegisteredClient, flushIntervalMs: number): void {
  const ref = new WeakRef(client);
  // Only the weak reference is captured: the interval must not keep the client alive.
  // Clamped: past 2^31 − 1 ms Node fires after 1 ms instead, a flush loop.
  const timer = setInterval(() => ref.deref()?.tick(), timerDelay(flushIntervalMs));
  timer.unref();
  const entry: Tracking = { ref, timer };
  tracking.set(client, entry);
  collected.register(client, entry, client);
  if (live.size === 0) process.on('beforeExit', onBeforeExit);
  live.add(ref);
  // Counting the live ones drops the collected ones first (their finalizers may not have run
  // yet): a walk of about a hundred entries, done only past the threshold and only until the
  // warning was given.
  if (!warnedMany && live.size > MANY_CLIENTS) {
    const count = liveClientCount();
    if (count > MANY_CLIENTS) {
      warnedMany = true;
      client.warnTooManyClients(count);
    }
  }
}

/** The client has work pending: keep it alive (and flushed at exit) until {@link markIdle}. */
export function markBusy(client: RegisteredClient): void {
  busy.add(client);
}

/** The client has nothing buffered or in flight: it may be collected once unreferenced. */
export function markIdle(client: RegisteredClient): void {
  busy.delete(client);
}

/** Forgets a closed client: its timer stops, it no longer counts as live. */
export function untrackClient(client: RegisteredClient): void {
  busy.delete(client);
  const entry = tracking.get(client);
  if (entry === undefined) return;
  tracking.delete(client);
  collected.unregister(client);
  clearInterval(entry.timer);
  live.delete(entry.ref);
  if (live.size === 0) process.off('beforeExit', onBeforeExit);
}

/** Clients created and neither closed nor collected (for the warning, and for tests). */
export function liveClientCount(): number {
  for (const ref of live) if (ref.deref() === undefined) live.delete(ref);
  return live.size;
}
