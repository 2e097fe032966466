import type { WorkerLogger } from '../analysis/analysis-worker.js';
import type { Metrics } from '../observability/metrics.js';
import type { AnchorStore, ClaimedBatch } from '../store/anchor-store.js';
import type { AnchorSink } from './anchor-sink.js';

/*
 * The anchorer: gathers finished runs' fingerprints into trees and puts each tree's root on chain
 * through its sink, outside the request path — it shares only the store with ingest, and only
 * with small statements. A batch goes gathered → signed (kept before it is sent) → anchored:
 *
 * - a signed batch is sent, then looked up by its signature until it lands;
 * - it is signed anew only when its transaction can no longer land (expired) or failed on chain,
 *   so a crash at any point, a timeout or a second instance never puts a tree on chain twice;
 * - every failure is tried again with exponential backoff; ingest never waits on any of it.
 */

export interface AnchorerOptions {
  store: Pick<
    AnchorStore,
    | 'waitingRuns'
    | 'gather'
    | 'claim'
    | 'markSigned'
    | 'markAnchored'
    | 'unsign'
    | 'release'
    | 'adoptOtherClusters'
  >;
  sink: AnchorSink;
  logger: WorkerLogger;
  metrics: Metrics;
  /** A tree is gathered at least this often while runs wait (`ANCHOR_INTERVAL_MS`). */
  intervalMs: number;
  /** Runs per tree at most; this many waiting gathers a tree at once (`ANCHOR_BATCH_RUNS`). */
  batchRuns: number;
  /** How often the anchorer looks at the store (`ANCHOR_POLL_MS`). */
  pollMs: number;
  /** How long a batch is held by the instance working on it (`ANCHOR_LEASE_MS`). */
  leaseMs: number;
  /** First retry delay after a failure, doubled each time up to `maxBackoffMs`. */
  backoffMs: number;
  maxBackoffMs: number;
}

/** Batches worked per look at the store. */
const BATCHES_PER_PASS = 8;

export class Anchorer {
  private loop: Promise<void> | undefined;
  private stopRequested = false;
  private wake: (() => void) | undefined;
  private lastGatherAt = Date.now();
  private storeFailures = 0;
  private adopted = false;

  constructor(private readonly options: AnchorerOptions) {}

  start(): void {
    this.loop ??= this.run();
  }

  /** Stops after the step in flight (each is bounded by the RPC's timeout). Idempotent. */
  async stop(): Promise<void> {
    this.stopRequested = true;
    this.wake?.();
    await this.loop;
  }

  /** One pass: gathers a tree if one is due, then works the batches that are due. */
  async pass(): Promise<void> {
    const { store, sink, leaseMs, logger } = this.options;
    if (!this.adopted) {
      const adopted = await store.adoptOtherClusters(sink.cluster);
      this.adopted = true;
      if (adopted.moved + adopted.dropped > 0)
        logger.warn(
          { cluster: sink.cluster, ...adopted },
          'anchoring: trees of another cluster taken over (ANCHOR_CLUSTER changed); those ' +
            'signed there are dropped and their runs anchored anew here',
        );
    }
    // a gather that fails (the store busy) must not hold back the trees already under way
    try {
      await this.gatherIfDue();
    } catch (error) {
      logger.warn({ err: error }, 'anchoring: gathering runs failed; tried again next pass');
    }
    for (let i = 0; i < BATCHES_PER_PASS && !this.stopRequested; i++) {
      const batch = await store.claim(sink.cluster, leaseMs);
      if (!batch) break;
      await this.advance(batch);
    }
  }

  private async gatherIfDue(): Promise<void> {
    const { store, sink, batchRuns, intervalMs, metrics } = this.options;
    const waiting = await store.waitingRuns(batchRuns);
    if (waiting < batchRuns && (waiting === 0 || Date.now() - this.lastGatherAt < intervalMs))
      return;
    const gathered = await store.gather(sink.cluster, batchRuns);
    this.lastGatherAt = Date.now();
    if (gathered) {
      metrics.anchorBatches.inc({ step: 'gathered' });
      this.options.logger.debug({ batchId: gathered.id, runs: gathered.size }, 'runs gathered');
    }
  }

  private async run(): Promise<void> {
    const { logger, sink, pollMs } = this.options;
    logger.info({ cluster: sink.cluster }, 'anchoring started');
    while (!this.stopRequested) {
      let sleepMs = pollMs;
      try {
        await this.pass();
        if (this.storeFailures > 0) logger.info({}, 'anchoring: the store is reachable again');
        this.storeFailures = 0;
      } catch (error) {
        this.storeFailures++;
        sleepMs = Math.min(this.options.maxBackoffMs, pollMs * 2 ** this.storeFailures);
        if (this.storeFailures === 1 || this.storeFailures % 20 === 0)
          logger.warn({ err: error }, 'anchoring: the store is unavailable');
      }
      await this.sleep(sleepMs);
    }
    logger.info({}, 'anchoring stopped');
  }

  /** Moves one batch a step or two on its way; a failure hands it back with backoff. */
  private async advance(batch: ClaimedBatch): Promise<void> {
    const { store, sink, metrics, logger } = this.options;
    let signed = batch.signed;
    if (batch.state === 'gathered' || signed === undefined) {
      const outcome = await sink.sign(batch.memo);
      if (!outcome.ok) return this.failed(batch, `signing: ${outcome.reason}`);
      if (!(await store.markSigned(batch, outcome.value))) return; // the claim was lost
      metrics.anchorBatches.inc({ step: 'signed' });
      signed = outcome.value;
      const sent = await sink.send(signed);
      if (!sent.ok) return this.failed(batch, `sending: ${sent.reason}`);
      // looked at again soon: a transaction lands within seconds
      return store.release(batch, this.options.pollMs);
    }
    const landing = await sink.landing(signed);
    if (!landing.ok) return this.failed(batch, `looking up the transaction: ${landing.reason}`);
    switch (landing.value.kind) {
      case 'landed': {
        if (await store.markAnchored(batch, signed.signature, landing.value.slot)) {
          metrics.anchorBatches.inc({ step: 'anchored' });
          metrics.anchoredRuns.inc(batch.size);
          logger.info(
            {
              batchId: batch.id,
              runs: batch.size,
              signature: signed.signature,
              slot: landing.value.slot.toString(),
            },
            'runs anchored',
          );
        }
        return;
      }
      case 'expired':
      case 'failed': {
        const reason =
          landing.value.kind === 'expired'
            ? 'the transaction expired before it landed'
            : landing.value.reason;
        if (await store.unsign(batch, reason, this.backoff(batch)))
          metrics.anchorBatches.inc({ step: 'resigned' });
        logger.warn({ batchId: batch.id, reason }, 'anchoring: signing the tree anew');
        return;
      }
      case 'unknown':
        // signing anew could anchor the tree twice: wait, loudly, for an RPC that can tell
        return this.failed(batch, landing.value.reason);
      case 'pending': {
        // sent again: a send lost before it reached the cluster (a crash, a dropped packet)
        // would otherwise leave the batch waiting for the transaction to expire
        const sent = await sink.send(signed);
        if (!sent.ok) logger.debug({ batchId: batch.id, reason: sent.reason }, 'resend failed');
        return store.release(batch, this.options.pollMs);
      }
    }
  }

  private async failed(batch: ClaimedBatch, reason: string): Promise<void> {
    this.options.metrics.anchorFailures.inc();
    const delayMs = this.backoff(batch);
    this.options.logger.warn(
      { batchId: batch.id, attempts: batch.attempts + 1, retryInMs: delayMs, reason },
      'anchoring failed; it is tried again',
    );
    await this.options.store.release(batch, delayMs, reason);
  }

  /** Exponential in the batch's failures, with jitter so instances do not retry in step. */
  private backoff(batch: ClaimedBatch): number {
    const { backoffMs, maxBackoffMs } = this.options;
    const base = Math.min(maxBackoffMs, backoffMs * 2 ** Math.min(batch.attempts, 30));
    return Math.round(base * (0.75 + Math.random() * 0.5));
  }

  private sleep(ms: number): Promise<void> {
    if (this.stopRequested) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      timer.unref();
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }
}
