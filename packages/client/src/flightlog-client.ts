import {
  ClientCore,
  type ClientDependencies,
  type CompleteOutcome,
  type CompleteTraceOptions,
  type FlushResult,
  type PayloadMode,
} from './client-core.js';
import { emptyCounters, type ClientStats } from './client-stats.js';
import { UlidFactory } from './ids.js';
import { WARN_INTERVAL_MS, WarningChannel, createConsoleLogger } from './logger.js';
import { NoopSession } from './noop-session.js';
import type { FlightlogSession, SessionOptions } from './session-types.js';
import { resolveSettings, type FlightlogSettings } from './settings.js';
import { errorText } from './storable-text.js';

const disabledIds = new UlidFactory();

/** The trace id of a disabled client's session: the option when it is a string, else a ULID. */
function noopTraceId(options: unknown): string {
  try {
    if (typeof options === 'object' && options !== null) {
      const traceId: unknown = (options as { traceId?: unknown }).traceId;
      if (typeof traceId === 'string') return traceId;
    }
  } catch {
    // a getter that throws: the session gets a generated id
  }
  return disabledIds.next();
}

function idle(): ClientStats {
  return {
    ...emptyCounters(),
    bufferedEvents: 0,
    bufferedBytes: 0,
    queuedBatches: 0,
    queuedBytes: 0,
  };
}

/**
 * The Flightlog client an agent embeds. It records runs as traces of events and sends them to
 * the ingest service in the background: gzip batches every `flushIntervalMs`, when the buffer
 * fills, on `flush()` and on `close()`. It never throws into the host program (problems go to
 * `logger.warn`), never blocks its event loop noticeably, bounds its memory, and encrypts every
 * payload when `SERVICE_MASTER_KEY` is set.
 *
 * ```ts
 * const client = new FlightlogClient({ apiKey: process.env.FLIGHTLOG_API_KEY ?? '' });
 * const session = client.startSession({ inputSummary: 'Swap 1 SOL for USDC' });
 * session.toolCall({ name: 'jupiter.quote', input, output });
 * session.end({ outputSummary: 'Swapped' });
 * await client.close();
 * ```
 */
export class FlightlogClient {
  private readonly core: ClientCore | undefined;
  private readonly warnings: WarningChannel;

  /**
   * Never throws: a problem with the settings (or inside the client) is reported through the
   * logger and leaves a working, or disabled, client.
   *
   * @param settings See {@link FlightlogSettings}. Invalid values are reported and replaced by
   * their defaults; a missing, empty or unusable `apiKey`, an unusable `ingestUrl`, or
   * `enabled: false` makes the client a no-op.
   * @param dependencies Optional replaceable parts (default: none replaced), for tests and
   * benchmarks; see {@link ClientDependencies}. Not needed in normal use.
   */
  constructor(settings: FlightlogSettings, dependencies?: ClientDependencies) {
    let warnings = new WarningChannel(createConsoleLogger());
    let core: ClientCore | undefined;
    try {
      const resolution = resolveSettings(settings);
      const logger = resolution.kind === 'enabled' ? resolution.settings.logger : resolution.logger;
      warnings = new WarningChannel(logger);
      for (const warning of resolution.warnings) warnings.warn(warning);
      if (resolution.kind === 'enabled')
        core = new ClientCore(resolution.settings, warnings, dependencies);
    } catch (error) {
      warnings.warn('the client could not start and is disabled', { error: errorText(error, 500) });
      core = undefined;
    }
    this.core = core;
    this.warnings = warnings;
  }

  /** False when the client is disabled (`enabled: false`, no `apiKey`, unusable settings). */
  get enabled(): boolean {
    return this.core !== undefined;
  }

  /**
   * What happens to event payloads before they leave the process, decided when the client was
   * created from `SERVICE_MASTER_KEY`: `plain`, `encrypted`, or `withheld` (the key is set but
   * unusable, see {@link PayloadMode}); `disabled` when the client sends nothing at all.
   */
  get payloadMode(): PayloadMode | 'disabled' {
    return this.core?.payloadMode ?? 'disabled';
  }

  /**
   * Starts recording a run: one session is one trace. Never throws: unusable options (or getters
   * that throw) are reported and replaced by their defaults.
   */
  startSession(options: SessionOptions): FlightlogSession {
    try {
      if (this.core) return this.core.startSession(options);
    } catch (error) {
      this.internalError('startSession', error);
    }
    return new NoopSession(noopTraceId(options));
  }

  /**
   * Sends everything recorded so far, and resolves when it was delivered or given up on, or when
   * `timeoutMs` passed (default `flushTimeoutMs`, 10 s). For serverless functions: await it
   * before returning. Never rejects.
   */
  async flush(options?: { timeoutMs?: number }): Promise<FlushResult> {
    try {
      if (this.core) return await this.core.flush(this.timeout(options));
    } catch (error) {
      this.internalError('flush', error);
    }
    return { timedOut: false };
  }

  /**
   * Flushes, then stops the client: the timer stops, later calls are no-ops. Resolves when
   * everything was delivered or given up on, or after `timeoutMs` (default `flushTimeoutMs`),
   * when what is left is dropped and counted. Idempotent: every call returns the same promise.
   * Never rejects.
   */
  async close(options?: { timeoutMs?: number }): Promise<FlushResult> {
    try {
      if (this.core) return await this.core.close(this.timeout(options));
    } catch (error) {
      this.internalError('close', error);
    }
    return { timedOut: false };
  }

  /**
   * Finalises a trace through `POST /v1/traces/:id/complete` (e.g. a run recorded with a session
   * that was never ended, or finished by another process). Flushes first (waiting at most
   * `flushTimeoutMs`), so the batches that created the trace arrive before; retries on the
   * `retry` schedule, as batches do (at most `maxAttempts` requests). Until it settles it keeps
   * the process alive, retry waits included, so a host awaiting it is never cut short. With no
   * body the trace becomes `completed` at the server's current time. Never rejects: the outcome is
   * a value, and a failure is also logged. `close()` aborts calls still pending.
   */
  async completeTrace(traceId: string, body?: CompleteTraceOptions): Promise<CompleteOutcome> {
    try {
      if (this.core) return await this.core.completeTrace(traceId, body);
      return { kind: 'failed', status: null, detail: 'the client is disabled' };
    } catch (error) {
      this.internalError('completeTrace', error);
      return { kind: 'failed', status: null, detail: 'internal error' };
    }
  }

  /** Counters of what the client recorded, delivered and dropped; see {@link ClientStats}. */
  stats(): ClientStats {
    try {
      if (this.core) return this.core.stats();
    } catch (error) {
      this.internalError('stats', error);
    }
    return idle();
  }

  /**
   * The `timeoutMs` of a flush() or close() call, read once and safely: close() must close even
   * when its options are odd, so anything unusable (a getter that throws included) means the
   * default. Values past what a timer holds are clamped where the timer is set.
   */
  private timeout(options: { timeoutMs?: number } | undefined): number | undefined {
    let value: unknown;
    try {
      value = typeof options === 'object' && options !== null ? options.timeoutMs : undefined;
    } catch {
      value = null;
    }
    if (value === undefined) return undefined;
    if (typeof value === 'number' && value >= 0) return value; // NaN fails the comparison
    this.warnings.throttled(
      'timeout-ms',
      WARN_INTERVAL_MS,
      'timeoutMs must be a non-negative number; the default is used',
    );
    return undefined;
  }

  private internalError(where: string, error: unknown): void {
    this.warnings.throttled(
      `internal:${where}`,
      10_000,
      `internal error in ${where}; the call was ignored`,
      { error: errorText(error, 500) },
    );
  }
}
