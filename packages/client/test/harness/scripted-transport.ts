import { gunzipSync } from 'node:zlib';
import type { TransportBatchPayload } from '@flightlog/protocol';
import type { Transport, TransportOutcome } from '../../src/http-transport.js';

export const OK: TransportOutcome = { kind: 'ok', status: 202, replayed: false, verify: null };

/**
 * A transport for unit tests (no I/O): it records every batch request, decoded, and answers what
 * the test scripts. The real HTTP path is covered by the end-to-end tests.
 */
export class ScriptedTransport implements Transport {
  readonly requests: TransportBatchPayload[] = [];
  readonly completes: { traceId: string; body: object }[] = [];
  /** Answers the n-th request (1-based); default: 202. */
  answer: (
    batch: TransportBatchPayload,
    n: number,
    signal: AbortSignal,
  ) => TransportOutcome | Promise<TransportOutcome> = () => OK;

  sendBatch(body: Buffer, signal: AbortSignal): Promise<TransportOutcome> {
    const batch = JSON.parse(gunzipSync(body).toString('utf8')) as TransportBatchPayload;
    this.requests.push(batch);
    return Promise.resolve(this.answer(batch, this.requests.length, signal));
  }

  complete(traceId: string, body: object): Promise<TransportOutcome> {
    this.completes.push({ traceId, body });
    return Promise.resolve(OK);
  }

  /** Event ids of every request, in order (retries included). */
  eventIds(): string[] {
    return this.requests.flatMap((b) => b.items.flatMap((i) => i.events.map((e) => e.id)));
  }
}

/** Lets real macrotasks run (gzip on the thread pool, setImmediate) until `done()` or a bound. */
export async function until(done: () => boolean, maxTurns = 20_000): Promise<void> {
  for (let i = 0; i < maxTurns && !done(); i++) await new Promise((r) => setImmediate(r));
  if (!done()) throw new Error('condition not reached');
}
