import { MAX_TIMER_DELAY_MS } from './timer-delay.js';

/**
 * Keeps the host's process alive until the returned function is called: a ref'd timer that never
 * fires. For calls the host awaits (`completeTrace()`): the client's own timers and sockets are
 * unref'd so that it never holds a process by itself, but a process must not exit in the middle
 * of an `await` the host is still in (Node ends it with code 13, the call neither done nor
 * reported). Calling the function twice is harmless.
 */
export function holdProcess(): () => void {
  const timer = setInterval(() => undefined, MAX_TIMER_DELAY_MS);
  return () => clearInterval(timer);
}
