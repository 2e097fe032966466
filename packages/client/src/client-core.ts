import { isIdentifier, type CompleteTraceBody } from '@flightlog/protocol';
import { ActiveSession, type SessionHost } from './active-session.js';
import { BatchExporter } from './batch-exporter.js';
import { emptyCounters, type ClientCounters, type ClientStats } from './client-stats.js';
import { EventBuffer } from './event-buffer.js';
import {
  markBusy,
  markIdle,
  trackClient,
  untrackClient,
  MANY_CLIENTS,
  type RegisteredClient,
} from './client-registry.js';
import { HttpTransport, type Transport } from './http-transport.js';
import { UlidFactory } from './ids.js';
import type { WarningChannel } from './logger.js';
import { parseMasterKey } from './payload-cipher.js';
import { completeBodyProblem } from './payload-checks.js';
import type { PayloadSealing } from './payload-sealing.js';
import type { RecordedEvent, SnapshotSource } from './recorded-event.js';
import { PendingSteps } from './pending-steps.js';
import { NoopSession } from './noop-session.js';
import { holdProcess } from './process-hold.js';
import { RetryingTransport } from './retrying-transport.js';
import { completeBodyFrom, sessionIdentityFrom } from './session-options.js';
import type { FlightlogSession } from './session-types.js';
import type { ResolvedSettings } from './settings.js';
import { timerDelay } from './timer-delay.js';

/** How a `flush()` or `close()` ended. */
export interface FlushResult {
  /**
   * True when the timeout passed before everything recorded earlier was delivered or given up on
   * (after `close()`, what was left is dropped and counted in `stats().droppedEvents`).
   */
  timedOut: boolean;
}

/** Body of {@link FlightlogClient.completeTrace}: the complete endpoint's fields, all optional. */
export interface CompleteTraceOptions extends Omit<CompleteTraceBody, 'endedAt'> {
  /** When the run ended. Default: the server's current time. */
  endedAt?: Date | string;
}

/** How a `completeTrace()` call ended; never an exception. */
export type CompleteOutcome =
  | { kind: 'ok' }
  | {
      kind: 'failed';
      /** The HTTP status, or null when no answer came (network, timeout, disabled client). */
      status: number | null;
      detail: string;
    };

/**
 * Replaceable parts of a client: the optional second argument of `new FlightlogClient`. Normal
 * use needs none of them; tests and benchmarks substitute the transport to run without network.
 */
export interface ClientDependencies {
  /**
   * Sends the requests, one attempt each: the client retries `retryable` outcomes itself, on its
   * `retry` schedule. Default: HTTP(S) to `ingestUrl` over `node:http` with keep-alive.
   */
  transport?: Transport;
  /** Where `SERVICE_MASTER_KEY` is read when the client is created. Default `process.env`. */
  env?: Record<string, string | undefined>;
  /** Random numbers in [0, 1) for the retry jitter. Default `Math.random`. */
  random?: () => number;
}

/**
 * What happens to event payloads before they leave the process (fixed when the client is
 * created, from `SERVICE_MASTER_KEY`): `plain` (no key set), `encrypted` (AES-256-GCM), or
 * `withheld` (the key is set but unusable: every payload is replaced by `{withheld: true, …}`,
 * never sent in plaintext).
 */
export type PayloadMode = 'plain' | 'encrypted' | 'withheld';

const USER_AGENT = `flightlog-client/0.1.0 node/${process.version}`;

function settleWithin(work: Promise<void>, timeoutMs: number): Promise<FlushResult> {
  return new Promise<FlushResult>((resolve) => {
    // Ref'd on purpose: the host is awaiting this, so the process stays up until the deadline.
    // Clamped: past 2^31 − 1 ms Node would fire after 1 ms instead (and warn on stderr).
    const timer = setTimeout(() => resolve({ timedOut: true }), timerDelay(timeoutMs));
    void work.then(() => {
      clearTimeout(timer);
      resolve({ timedOut: false });
    });
  });
}

/** Reads one property of a host object; a getter that throws gives `failed` instead. */
/**
 * The enabled client's machinery: the buffer, the exporter, the flush timer, the sessions'
 * host. FlightlogClient wraps it so that nothing here can throw into the host.
 */
export class ClientCore implements SessionHost, RegisteredClient {
  readonly ids = new UlidFactory();
  readonly counters: ClientCounters = emptyCounters();
  readonly maxEventBytes: number;
  readonly sealing: PayloadSealing;
  readonly pendingSteps = new PendingSteps();
  private readonly buffer: EventBuffer;
  private readonly exporter: BatchExporter;
  private readonly transport: RetryingTransport;
  private flushDue = false;
  private flushScheduled = false;
  private closing: Promise<FlushResult> | undefined;
  /**
   * One controller per `completeTrace()` in progress, aborted by close(). Not one signal shared
   * by all of them: 20 calls at once would put 20 listeners on it and Node would print a
   * MaxListenersExceededWarning on the host's stderr.
   */
  private readonly completeCalls = new Set<AbortController>();
  /** Registered as busy (kept alive by the registry) while something is buffered or sending. */
  private busy = false;
  /** The ref'd timer that keeps the process up while the exit flush delivers. */
  private exitHold: NodeJS.Timeout | undefined;
  /** The exit flush ran out of time once: the process is not held again. */
  private exitHoldExpired = false;

  constructor(
    private readonly settings: ResolvedSettings,
    readonly warnings: WarningChannel,
    dependencies: ClientDependencies = {},
  ) {
    this.maxEventBytes = settings.maxEventBytes;
    this.sealing = this.sealingFrom((dependencies.env ?? process.env).SERVICE_MASTER_KEY);
    this.transport = new RetryingTransport(
      dependencies.transport ??
        new HttpTransport({
          ingestUrl: settings.ingestUrl,
          apiKey: settings.apiKey,
          timeoutMs: settings.requestTimeoutMs,
          userAgent: USER_AGENT,
        }),
      settings.retry,
      dependencies.random,
    );
    this.buffer = new EventBuffer(settings.maxBufferBytes);
    this.exporter = new BatchExporter({
      transport: this.transport,
      maxBacklogBytes: settings.maxBacklogBytes,
      sealing: this.sealing,
      maxEventBytes: settings.maxEventBytes,
      verify:
        settings.verifyToken === undefined
          ? undefined
          : { agentId: settings.agentId, verifyToken: settings.verifyToken },
      warnings,
      counters: this.counters,
      ids: this.ids,
      onIdle: () => this.onIdle(),
    });
    // The flush timer is unref'd (it never keeps the host's process alive) and holds this client
    // only weakly (an idle client the host dropped can be collected); see client-registry.ts.
    trackClient(this, settings.flushIntervalMs);
  }

  /** How payloads leave the process; see {@link PayloadMode}. */
  get payloadMode(): PayloadMode {
    switch (this.sealing.kind) {
      case 'plain':
        return 'plain';
      case 'encrypt':
        return 'encrypted';
      case 'withhold':
        return 'withheld';
    }
  }

  private sealingFrom(value: string | undefined): PayloadSealing {
    const key = parseMasterKey(value);
    if (key.kind === 'absent') return { kind: 'plain' };
    if (key.kind === 'valid') return { kind: 'encrypt', key: key.key };
    this.warnings.warn(
      `SERVICE_MASTER_KEY is set but unusable (${key.reason}; it must be 32 random bytes in base64). Payloads are withheld — replaced by {"withheld": true} — and never sent in plaintext.`,
    );
    return { kind: 'withhold', reason: 'SERVICE_MASTER_KEY is not a valid key' };
  }

  startSession(options: unknown): FlightlogSession {
    const identity = sessionIdentityFrom(
      options,
      { agentId: this.settings.agentId, environment: this.settings.environment, ids: this.ids },
      (message) =>
        this.warnings.throttled(`session-option:${message}`, 10_000, `startSession: ${message}`),
    );
    if (this.closing) {
      this.warnings.once(
        'session-after-close',
        'startSession() after close(): nothing is recorded',
      );
      return new NoopSession(identity.traceId);
    }
    return new ActiveSession(this, identity);
  }

  accept(source: SnapshotSource, event: RecordedEvent): void {
    if (this.closing) {
      this.counters.droppedEvents += 1;
      this.warnings.once('event-after-close', 'an event recorded after close() is dropped');
      return;
    }
    // The spec's buffer rule: flush before accepting the event that would exceed the buffer.
    if (this.buffer.mustFlushBefore(source, event.bytes)) this.drain();
    this.buffer.add(source, event);
    this.counters.recordedEvents += 1;
    if (!this.busy) this.markBusy();
    if (this.buffer.isFull()) this.drain();
  }

  touch(source: SnapshotSource): void {
    if (this.closing) {
      this.warnings.once('end-after-close', 'a session changed after close(): not sent');
      return;
    }
    if (this.buffer.mustFlushBefore(source, 0)) this.drain();
    this.buffer.touch(source);
    if (!this.busy) this.markBusy();
  }

  /** A session ended: flush soon (coalescing many ends of one tick into one batch). */
  requestFlush(): void {
    this.flushDue = true;
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() =>
      this.warnings.guard('the flush after a session ended', () => {
        this.flushScheduled = false;
        if (this.closing === undefined && this.exporter.isIdle() && !this.buffer.isEmpty()) {
          this.flushDue = false;
          this.drain();
        }
      }),
    ).unref();
  }

  flush(timeoutMs: number = this.settings.flushTimeoutMs): Promise<FlushResult> {
    if (this.closing) return this.closing;
    this.pendingSteps.settle();
    if (!this.buffer.isEmpty()) this.drain();
    if (this.exporter.isIdle()) return Promise.resolve({ timedOut: false });
    return settleWithin(this.exporter.whenSettled(), timeoutMs);
  }

  close(timeoutMs: number = this.settings.flushTimeoutMs): Promise<FlushResult> {
    // Before `closing` is set: a call that ended is recorded, not dropped as after close().
    if (this.closing === undefined) this.pendingSteps.settle();
    this.closing ??= (async () => {
      untrackClient(this);
      this.busy = false;
      if (this.exitHold !== undefined) clearTimeout(this.exitHold);
      if (!this.buffer.isEmpty()) this.drain();
      const result = this.exporter.isIdle()
        ? { timedOut: false }
        : await settleWithin(this.exporter.whenSettled(), timeoutMs);
      if (result.timedOut) {
        const pending = this.exporter.pendingEvents;
        this.exporter.stop();
        this.warnings.warn(
          `close(): not everything was delivered within ${timeoutMs} ms; ${pending} events dropped`,
        );
      }
      for (const call of this.completeCalls) call.abort();
      this.transport.close();
      this.warnings.reportHeldBack();
      return result;
    })();
    return this.closing;
  }

  async completeTrace(traceId: unknown, options: unknown): Promise<CompleteOutcome> {
    if (this.closing) return { kind: 'failed', status: null, detail: 'the client is closed' };
    if (typeof traceId !== 'string' || !isIdentifier(traceId))
      return { kind: 'failed', status: null, detail: 'traceId is not a trace id' };
    const body = completeBodyFrom(options);
    const problem = completeBodyProblem(body);
    if (problem !== null)
      return { kind: 'failed', status: null, detail: `invalid completeTrace body: ${problem}` };
    // The host is awaiting this: the process stays up until the outcome is known, retry waits
    // included (they are unref'd, and so are the sockets).
    const release = holdProcess();
    const call = new AbortController();
    this.completeCalls.add(call);
    try {
      // The batches that create the trace must arrive first, or the service answers 404.
      await this.flush();
      const { outcome, attempts } = await this.transport.complete(traceId, body, {
        signal: call.signal,
      });
      switch (outcome.kind) {
        case 'ok':
          return { kind: 'ok' };
        case 'failed':
          this.warnings.throttled(
            `complete-refused:${outcome.status}`,
            10_000,
            `completeTrace refused with ${outcome.status}: ${outcome.detail}`,
            { traceId },
          );
          return { kind: 'failed', status: outcome.status, detail: outcome.detail };
        case 'retryable':
          this.warnings.throttled(
            'complete-gave-up',
            10_000,
            call.signal.aborted
              ? `completeTrace aborted by close(): ${outcome.reason}`
              : `completeTrace gave up after ${attempts} attempts: ${outcome.reason}`,
            { traceId },
          );
          return { kind: 'failed', status: null, detail: outcome.reason };
      }
    } finally {
      this.completeCalls.delete(call);
      release();
    }
  }

  stats(): ClientStats {
    this.pendingSteps.settle();
    return {
      ...this.counters,
      bufferedEvents: this.buffer.eventCount,
      bufferedBytes: this.buffer.bytes,
      queuedBatches: this.exporter.queuedBatches,
      queuedBytes: this.exporter.queuedBytes,
    };
  }

  /**
   * Node's `beforeExit`: the event loop ran dry and the host never called `close()`. What is
   * buffered is sent. Retry delays and sockets are unref'd, so without more the process would
   * exit in the middle of a request or a retry (after a 429 or 503) and lose the batch silently:
   * while delivery is pending, a ref'd timer keeps the process up for at most `flushTimeoutMs`.
   * When delivery ends, the timer goes and the process exits; when the time runs out first, the
   * request in flight is aborted, what waits is dropped and counted, one warning says how many
   * events were not delivered, and the process, held by nothing else of the client, exits. It is
   * not held again.
   */
  flushBeforeExit(): void {
    this.warnings.guard('the flush before exit', () => {
      if (!this.settings.flushOnExit || this.closing !== undefined) return;
      this.pendingSteps.settle();
      if (!this.buffer.isEmpty()) this.drain();
      if (this.exporter.isIdle() || this.exitHold !== undefined || this.exitHoldExpired) return;
      const timeoutMs = this.settings.flushTimeoutMs;
      const hold = setTimeout(
        () =>
          this.warnings.guard('the exit deadline', () => {
            this.exitHold = undefined;
            this.exitHoldExpired = true;
            const pending = this.exporter.pendingEvents + this.buffer.eventCount;
            // Nothing of ours may outlive the hold: a socket waiting on a silent service would.
            this.exporter.abandon();
            this.warnings.once(
              'exit-undelivered',
              `the process is exiting with ${pending} events not delivered: the service did not take them within flushTimeoutMs (${timeoutMs} ms) of the exit flush, so they are lost. Call await client.close() before exiting to choose how long to wait.`,
              { pendingEvents: pending },
            );
          }),
        timerDelay(timeoutMs),
      );
      this.exitHold = hold;
      void this.exporter.whenSettled().then(() => {
        clearTimeout(hold);
        if (this.exitHold === hold) this.exitHold = undefined;
      });
    });
  }

  /** The flush timer's work (the registry calls it every `flushIntervalMs`). */
  tick(): void {
    this.warnings.guard('the flush timer', () => {
      this.pendingSteps.settle();
      if (this.buffer.isEmpty()) return;
      if (this.exporter.isIdle()) {
        this.flushDue = false;
        this.drain();
      } else this.flushDue = true; // one request at a time: flush when this one is done
    });
  }

  warnTooManyClients(count: number): void {
    this.warnings.once(
      'many-clients',
      `${count} Flightlog clients are open at once (more than ${MANY_CLIENTS}): create one client per process and share it, or close() the ones you are done with. Each open client keeps a buffer, a timer and connections.`,
    );
  }

  /** The exporter has nothing in flight or waiting (called by it, guarded there). */
  private onIdle(): void {
    if (this.flushDue && this.closing === undefined && !this.buffer.isEmpty()) {
      this.flushDue = false;
      this.drain();
      return;
    }
    // Nothing buffered nor sending: the host's references alone decide this client's lifetime.
    if (this.buffer.isEmpty() && this.busy) {
      this.busy = false;
      markIdle(this);
    }
  }

  private markBusy(): void {
    this.busy = true;
    markBusy(this);
  }

  private drain(): void {
    // Before the buffer is taken: a session's snapshot would otherwise record the waiting steps
    // into the buffer while it is being taken (from inside a settle, this does nothing).
    this.pendingSteps.settle();
    const bytes = this.buffer.bytes;
    const items = this.buffer.drain();
    if (items.length > 0) void this.exporter.enqueue(items, bytes);
  }
}
