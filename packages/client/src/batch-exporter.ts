import {
  assembleItems,
  batchJsonParts,
  truncatedPayloadJson,
  wireItemBytes,
  type VerifyFields,
  type WireEvent,
  type WireItem,
} from './batch-assembler.js';
import type { ClientCounters } from './client-stats.js';
import { Deferred } from './deferred.js';
import { type FieldError, type TransportOutcome } from './http-transport.js';
import type { UlidFactory } from './ids.js';
import { type WarningChannel, WARN_INTERVAL_MS } from './logger.js';
import { sealPayload, type PayloadSealing } from './payload-sealing.js';
import type { DrainedItem } from './recorded-event.js';
import type { RetryingTransport } from './retrying-transport.js';
import { errorText } from './storable-text.js';
import { gzipSliced } from './sliced-json.js';

/** What a {@link BatchExporter} works with; the client builds it from its settings. */
export interface BatchExporterOptions {
  /** Sends each batch, retrying it on its schedule (the one `completeTrace()` uses too). */
  transport: RetryingTransport;
  /** Bytes of waiting batches kept; past it the oldest waiting batch is dropped. */
  maxBacklogBytes: number;
  sealing: PayloadSealing;
  /** Largest payload JSON of one event in UTF-8 bytes (the `maxEventBytes` setting). */
  maxEventBytes: number;
  /**
   * Sent with every batch until one that carries it is acknowledged (202): the service consumes
   * the token only with a batch it stores, so a batch lost on the way must not use it up.
   */
  verify: VerifyFields | undefined;
  warnings: WarningChannel;
  counters: ClientCounters;
  ids: UlidFactory;
  /** Told when the last waiting batch is done, so the client may flush what piled up meanwhile. */
  onIdle: () => void;
}

interface Batch {
  batchId: string;
  /** What the buffer gave; replaced by `wire` once assembled. */
  drained: DrainedItem[] | undefined;
  wire: WireItem[] | undefined;
  /** The gzip body, kept across retries so every attempt sends the same bytes. */
  body: Buffer | undefined;
  eventCount: number;
  bytes: number;
  attempts: number;
  /** The body carries the verify token (decided when the body is built, kept across retries). */
  withVerify: boolean;
  /** A lone event of this batch was already cut to a marker after a 413. */
  truncated: boolean;
  done: Deferred;
}

/** Trace ids the service refused as another agent's, remembered to drop their later items. */
const MAX_REFUSED_TRACES = 1_000;
/** A pointer into the batch body naming one item, and maybe one event of it. */
const ITEM_POINTER = /^\/items\/(0|[1-9][0-9]*)(?:\/events\/(0|[1-9][0-9]*))?(?:\/|$)/;

/** Which parts of a refused batch the service named: per item index, the whole item or events. */
type RefusedParts = Map<number, 'item' | Set<number>>;

/**
 * The items and events a refusal names, when every field error points into `/items/<i>` of this
 * batch; undefined when one does not (or there are none): then the refusal is about the batch.
 */
function refusedParts(errors: FieldError[], wire: WireItem[]): RefusedParts | undefined {
  if (errors.length === 0) return undefined;
  const parts: RefusedParts = new Map();
  for (const { pointer } of errors) {
    const match = ITEM_POINTER.exec(pointer);
    if (!match) return undefined;
    const index = Number(match[1]);
    const item = wire[index];
    if (item === undefined) return undefined;
    const eventText = match[2];
    if (eventText === undefined) {
      parts.set(index, 'item');
      continue;
    }
    const event = Number(eventText);
    if (event >= item.events.length) return undefined;
    const current = parts.get(index);
    if (current === 'item') continue;
    if (current === undefined) parts.set(index, new Set([event]));
    else current.add(event);
  }
  return parts;
}

/**
 * Sends flushed batches to the service, one request at a time and in order, so a later
 * snapshot of a trace can never overtake an earlier one (the model is OpenTelemetry's batch
 * processor: export one batch at a time, forceFlush waits for the one in flight). Retryable
 * failures are retried by the {@link RetryingTransport} with the same batchId (the service
 * deduplicates). A 413 splits the batch in halves, and the pieces back off as retries do: while
 * the service keeps answering 413, each request waits the retry delay of that many failures in a
 * row (a service that refuses everything gets a handful of requests, not thousands), and the
 * first delivery ends the backoff. Another refusal
 * that names items or events of the batch (a 409 id conflict, a 400 naming `/items/<i>/…`)
 * drops only those, and the rest goes again as a new batch (the service stores all of a batch or
 * nothing, so nothing of the refused one was kept); a trace whose id the service refused as
 * another agent's is remembered, and its later items are dropped without being sent. Any other
 * refusal drops the batch with a warning. While a request is pending, later batches wait in a
 * backlog capped at `maxBacklogBytes`: past it the oldest waiting batch is dropped and counted.
 */
export class BatchExporter {
  private readonly queue: Batch[] = [];
  private queuedByteCount = 0;
  private current: Batch | undefined;
  /** True until a batch carrying the verify token is acknowledged. */
  private verifyPending: boolean;
  /** Trace ids refused as another agent's (409 on `/items/<i>/trace/id`), oldest first. */
  private readonly refusedTraces = new Set<string>();
  private stopped = false;
  /** Aborted by {@link abandon}, then replaced: each batch sends under the one of its start. */
  private abort = new AbortController();
  /** 413s in a row, the first delivery resets it: how long the next request backs off. */
  private tooLargeInARow = 0;

  constructor(private readonly options: BatchExporterOptions) {
    this.verifyPending = options.verify !== undefined;
  }

  get queuedBatches(): number {
    return this.queue.length;
  }

  get queuedBytes(): number {
    return this.queuedByteCount;
  }

  /** Events in the batch in flight and the waiting ones. */
  get pendingEvents(): number {
    const waiting = this.queue.reduce((n, batch) => n + batch.eventCount, 0);
    return waiting + (this.current?.eventCount ?? 0);
  }

  /** True when nothing is in flight or waiting. */
  isIdle(): boolean {
    return this.current === undefined && this.queue.length === 0;
  }

  /** Queues drained items as one batch with a fresh batchId; returns when it will be done. */
  enqueue(items: DrainedItem[], bytes: number): Promise<void> {
    const eventCount = items.reduce((n, item) => n + item.events.length, 0);
    const batch = this.newBatch(items, undefined, eventCount, bytes);
    if (this.stopped) {
      this.drop(batch);
      return batch.done.promise;
    }
    this.queue.push(batch);
    this.queuedByteCount += bytes;
    this.enforceBacklogCap();
    this.pump();
    return batch.done.promise;
  }

  /** Resolves once every batch queued or in flight now is delivered or given up on. */
  whenSettled(): Promise<void> {
    const pending = this.queue.map((b) => b.done.promise);
    if (this.current) pending.push(this.current.done.promise);
    return Promise.all(pending).then(() => undefined);
  }

  /**
   * Gives up on everything (close deadline): aborts the request in flight, drops what waits,
   * counts it. Further batches are dropped as they come.
   */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.abandon();
  }

  /**
   * Gives up on what is pending now (the exit flush's deadline): aborts the request in flight or
   * its retry wait, drops the waiting batches, counts their events. Unlike {@link stop}, batches
   * enqueued later are sent as usual.
   */
  abandon(): void {
    this.abort.abort();
    this.abort = new AbortController();
    for (const batch of this.queue.splice(0)) this.drop(batch);
    this.queuedByteCount = 0;
  }

  private newBatch(
    drained: DrainedItem[] | undefined,
    wire: WireItem[] | undefined,
    eventCount: number,
    bytes: number,
  ): Batch {
    return {
      batchId: this.options.ids.next(),
      drained,
      wire,
      body: undefined,
      eventCount,
      bytes,
      attempts: 0,
      withVerify: false,
      truncated: false,
      done: new Deferred(),
    };
  }

  private enforceBacklogCap(): void {
    let droppedEvents = 0;
    let droppedBatches = 0;
    while (this.queuedByteCount > this.options.maxBacklogBytes && this.queue.length > 1) {
      const oldest = this.queue.shift() as Batch;
      this.queuedByteCount -= oldest.bytes;
      droppedEvents += oldest.eventCount;
      droppedBatches += 1;
      this.drop(oldest);
    }
    if (droppedBatches > 0)
      this.options.warnings.throttled(
        'backlog-cap',
        WARN_INTERVAL_MS,
        `backlog passed maxBacklogBytes (${this.options.maxBacklogBytes}): dropped the oldest ${droppedBatches} batch(es), ${droppedEvents} events`,
        { droppedEventsTotal: this.options.counters.droppedEvents },
      );
  }

  private pump(): void {
    if (this.current !== undefined || this.stopped) return;
    const next = this.queue.shift();
    if (next === undefined) {
      this.options.warnings.guard('the flush after a send', this.options.onIdle);
      return;
    }
    this.queuedByteCount -= next.bytes;
    this.current = next;
    void this.run(next);
  }

  private async run(batch: Batch): Promise<void> {
    const signal = this.abort.signal;
    try {
      // Let the host's call that triggered the flush return before any of our work starts.
      await new Promise<void>((resolve) => setImmediate(resolve));
      await this.deliver(batch, signal);
    } catch (error) {
      // Only a bug of ours gets here; the host must not pay for it.
      this.options.warnings.throttled(
        'internal:send',
        WARN_INTERVAL_MS,
        'internal error while sending a batch; it is dropped',
        { error: errorText(error, 500) },
      );
      this.drop(batch);
    } finally {
      this.current = undefined;
      // run() is never awaited: a throw here would be an unhandled rejection in the host.
      this.options.warnings.guard('the batch queue', () => this.pump());
    }
  }

  private async deliver(batch: Batch, signal: AbortSignal): Promise<void> {
    if (batch.wire === undefined) {
      batch.wire = await assembleItems(
        batch.drained ?? [],
        this.options.sealing,
        {
          dropped: (count, reason, context) => {
            this.options.counters.droppedEvents += count;
            batch.eventCount -= count;
            this.options.warnings.throttled(
              `unsendable:${reason.slice(0, 40)}`,
              WARN_INTERVAL_MS,
              `event dropped at flush: ${reason}`,
              context,
            );
          },
        },
        { maxEventBytes: this.options.maxEventBytes, warnings: this.options.warnings },
      );
      batch.drained = undefined;
    }
    if (signal.aborted) return this.drop(batch);
    if (batch.body === undefined) {
      const wire = this.withoutRefusedTraces(batch);
      if (wire.length === 0) return batch.done.resolve();
      // Decided once per body: every retry of a batchId sends the same bytes.
      batch.withVerify = this.verifyPending;
      batch.body = await gzipSliced(
        batchJsonParts(batch.batchId, wire, batch.withVerify ? this.options.verify : undefined),
      );
      if (signal.aborted) return this.drop(batch);
    }
    const { outcome, attempts } = await this.options.transport.sendBatch(batch.body, {
      signal,
      failuresBefore: this.tooLargeInARow,
      onRetry: (retry, attempt, delay) => {
        this.options.counters.retriedRequests += 1;
        this.options.warnings.throttled(
          'retrying',
          WARN_INTERVAL_MS,
          `batch not delivered (${retry.reason}); retrying in ${delay} ms with the same batchId`,
          { batchId: batch.batchId, attempt: batch.attempts + attempt },
        );
      },
    });
    batch.attempts += attempts;
    if (signal.aborted && outcome.kind !== 'ok') return this.drop(batch);
    switch (outcome.kind) {
      case 'ok':
        this.tooLargeInARow = 0;
        this.options.counters.sentBatches += 1;
        if (outcome.replayed) this.options.counters.replayedBatches += 1;
        this.options.counters.deliveredEvents += batch.eventCount;
        if (batch.withVerify) {
          // The service looked at the token with a batch it stored: it is used up either way.
          this.verifyPending = false;
          if (outcome.verify === 'rejected')
            this.options.warnings.warn(
              'the service rejected verifyToken (wrong, already used, or not this agent’s); the batch was stored',
              { agentId: this.options.verify?.agentId },
            );
        }
        return batch.done.resolve();
      case 'retryable':
        this.options.counters.failedBatches += 1;
        this.options.warnings.throttled(
          'gave-up',
          WARN_INTERVAL_MS,
          `batch given up after ${batch.attempts} attempts: ${outcome.reason}`,
          { batchId: batch.batchId, events: batch.eventCount },
        );
        return this.drop(batch);
      case 'failed':
        if (outcome.status === 413) {
          this.tooLargeInARow += 1;
          return this.splitTooLarge(batch, outcome.detail);
        }
        return this.refused(batch, outcome);
    }
  }

  /**
   * A 4xx other than 413. When every field error of the answer names an item or an event of the
   * batch, only those are dropped (with a warning naming the status, the detail and the trace)
   * and the rest is sent again as a new batch: the service stores a batch whole or not at all,
   * so nothing of this one was kept, and the rest deserves another chance. Each round drops at
   * least one item or event, so this ends. Otherwise (401, a problem with the batch as a whole)
   * the batch is dropped.
   */
  private refused(batch: Batch, outcome: Extract<TransportOutcome, { kind: 'failed' }>): void {
    const wire = batch.wire ?? [];
    const parts = refusedParts(outcome.fieldErrors ?? [], wire);
    if (parts === undefined) {
      this.options.counters.failedBatches += 1;
      this.options.warnings.throttled(
        `refused:${outcome.status}`,
        WARN_INTERVAL_MS,
        `the service refused a batch with ${outcome.status}: ${outcome.detail}; ${batch.eventCount} events dropped`,
        { status: outcome.status, detail: outcome.detail, batchId: batch.batchId },
      );
      return this.drop(batch);
    }
    const kept: WireItem[] = [];
    let dropped = 0;
    wire.forEach((item, index) => {
      const part = parts.get(index);
      if (part === undefined) {
        kept.push(item);
        return;
      }
      const context = { status: outcome.status, detail: outcome.detail, traceId: item.traceId };
      if (part === 'item') {
        dropped += item.events.length;
        const foreignId =
          outcome.status === 409 &&
          (outcome.fieldErrors ?? []).some((e) => e.pointer === `/items/${index}/trace/id`);
        if (foreignId) this.rememberRefusedTrace(item.traceId);
        this.options.warnings.throttled(
          `refused-item:${outcome.status}:${item.traceId}`,
          WARN_INTERVAL_MS,
          `the service refused trace ${item.traceId} with ${outcome.status}: ${outcome.detail}; its snapshot and ${item.events.length} events in this batch are dropped, the rest of the batch is sent again${foreignId ? '; later events of this trace are dropped without being sent' : ''}`,
          context,
        );
        return;
      }
      const events = item.events.filter((_, j) => !part.has(j));
      dropped += item.events.length - events.length;
      this.options.warnings.throttled(
        `refused-events:${outcome.status}:${item.traceId}`,
        WARN_INTERVAL_MS,
        `the service refused ${part.size} event(s) of trace ${item.traceId} with ${outcome.status}: ${outcome.detail}; they are dropped, the rest of the batch is sent again`,
        { ...context, eventIds: item.events.filter((_, j) => part.has(j)).map((e) => e.id) },
      );
      kept.push({ ...item, events });
    });
    this.options.counters.droppedEvents += dropped;
    if (kept.length === 0) {
      // Every item was refused: nothing of the batch is left, it was given up whole.
      this.options.counters.failedBatches += 1;
      return batch.done.resolve();
    }
    const resend = this.newBatch(
      undefined,
      kept,
      kept.reduce((n, item) => n + item.events.length, 0),
      kept.reduce((n, item) => n + wireItemBytes(item), 0),
    );
    this.requeueFirst([resend], batch);
  }

  private rememberRefusedTrace(traceId: string): void {
    this.refusedTraces.delete(traceId);
    this.refusedTraces.add(traceId);
    if (this.refusedTraces.size > MAX_REFUSED_TRACES) {
      const oldest = this.refusedTraces.values().next().value;
      if (oldest !== undefined) this.refusedTraces.delete(oldest);
    }
  }

  /**
   * The batch's items, less those of traces the service refused as another agent's: sending them
   * would only have the whole batch refused again. Their events are dropped and counted, with one
   * warning per trace.
   */
  private withoutRefusedTraces(batch: Batch): WireItem[] {
    const wire = batch.wire ?? [];
    if (this.refusedTraces.size === 0) return wire;
    const kept = wire.filter((item) => !this.refusedTraces.has(item.traceId));
    if (kept.length === wire.length) return wire;
    for (const item of wire) {
      if (!this.refusedTraces.has(item.traceId)) continue;
      this.options.counters.droppedEvents += item.events.length;
      batch.eventCount -= item.events.length;
      this.options.warnings.once(
        `refused-trace:${item.traceId}`,
        `events of trace ${item.traceId} are dropped without being sent: the service refused its id (409, used by another agent's trace)`,
        { traceId: item.traceId },
      );
    }
    batch.wire = kept;
    return kept;
  }

  /**
   * A 413: the body is over the service's limit. Items are split in halves, then a lone item's
   * events; a lone event gets its payload replaced by a `truncated` marker, once. What still does
   * not fit is dropped with a warning: never retried forever.
   */
  private splitTooLarge(batch: Batch, detail: string): void {
    const wire = batch.wire ?? [];
    let pieces: WireItem[][] | undefined;
    if (wire.length > 1) {
      const half = Math.ceil(wire.length / 2);
      pieces = [wire.slice(0, half), wire.slice(half)];
    } else if (wire.length === 1 && (wire[0] as WireItem).events.length > 1) {
      const item = wire[0] as WireItem;
      const half = Math.ceil(item.events.length / 2);
      pieces = [
        [{ ...item, events: item.events.slice(0, half) }],
        [{ ...item, events: item.events.slice(half) }],
      ];
    } else if (wire.length === 1 && (wire[0] as WireItem).events.length === 1 && !batch.truncated) {
      const item = wire[0] as WireItem;
      const event = item.events[0] as WireEvent;
      this.options.warnings.throttled(
        'too-large-event',
        WARN_INTERVAL_MS,
        'an event is too large for the service; its payload is replaced by a truncation marker',
        { detail, traceId: item.traceId, eventId: event.id, bytes: event.payload.length },
      );
      const marker = sealPayload(
        truncatedPayloadJson('too large for the service', event.payload.length),
        this.options.sealing,
      );
      const retry = this.newBatch(
        undefined,
        [{ ...item, events: [{ ...event, payload: marker }] }],
        batch.eventCount,
        0,
      );
      retry.truncated = true;
      this.requeueFirst([retry], batch);
      return;
    }
    if (pieces === undefined) {
      this.options.counters.failedBatches += 1;
      this.options.warnings.throttled(
        'too-large-dropped',
        WARN_INTERVAL_MS,
        'a batch is too large for the service even alone; its events are dropped',
        { detail, batchId: batch.batchId, events: batch.eventCount },
      );
      return this.drop(batch);
    }
    const made = pieces.map((items) =>
      this.newBatch(
        undefined,
        items,
        items.reduce((n, item) => n + item.events.length, 0),
        items.reduce((n, item) => n + wireItemBytes(item), 0),
      ),
    );
    this.requeueFirst(made, batch);
  }

  /** Puts the pieces of `original` at the head of the queue; it is done when they are. */
  private requeueFirst(pieces: Batch[], original: Batch): void {
    this.queue.unshift(...pieces);
    for (const piece of pieces) this.queuedByteCount += piece.bytes;
    void Promise.all(pieces.map((p) => p.done.promise)).then(() => original.done.resolve());
  }

  /** Gives a batch up: its events count as dropped (the warning was given where it happened). */
  private drop(batch: Batch): void {
    this.options.counters.droppedEvents += batch.eventCount;
    batch.done.resolve();
  }
}
