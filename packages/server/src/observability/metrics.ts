import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** The service's Prometheus metrics, in a registry of their own (one per app instance). */
export class Metrics {
  readonly registry = new Registry();

  readonly httpRequests = new Counter({
    name: 'flightlog_http_requests_total',
    help: 'HTTP requests answered, by route and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });

  readonly httpDuration = new Histogram({
    name: 'flightlog_http_request_duration_seconds',
    help: 'Time to answer HTTP requests, by route',
    labelNames: ['method', 'route'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });

  readonly batches = new Counter({
    name: 'flightlog_batches_total',
    help: 'Batches answered with 202, by outcome (accepted, or duplicate batchId)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly events = new Counter({
    name: 'flightlog_events_total',
    help: 'Events stored from accepted batches',
    registers: [this.registry],
  });

  readonly lifecycleRuns = new Counter({
    name: 'flightlog_lifecycle_runs_total',
    help:
      'Runs the data lifecycle changed, by action: timeout (abandoned, ended by the sweeper), ' +
      'deleted (on request), expired (deleted by retention)',
    labelNames: ['action'] as const,
    registers: [this.registry],
  });

  readonly lifecycleSweepSeconds = new Counter({
    name: 'flightlog_lifecycle_sweep_seconds_total',
    help:
      "Time the lifecycle sweeper's passes took, by part: work (in statements) or elapsed " +
      '(with the pauses that keep it to LIFECYCLE_SWEEP_DUTY_PERCENT of the store)',
    labelNames: ['part'] as const,
    registers: [this.registry],
  });

  readonly otlpSpans = new Counter({
    name: 'flightlog_otlp_spans_total',
    help: 'Spans of OTLP exports, by outcome (accepted, duplicate: stored before, rejected)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly rejections = new Counter({
    name: 'flightlog_rejections_total',
    help: 'Requests refused, by problem code',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  readonly apiKeyLookups = new Counter({
    name: 'flightlog_api_key_lookups_total',
    help: 'API keys looked up in the store (not answered by the key cache), by result: found or unknown',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  readonly apiKeyGuessesRefused = new Counter({
    name: 'flightlog_api_key_guesses_refused_total',
    help:
      'Requests with an API key that is not valid refused with 429, without a store lookup, ' +
      'because their client address failed API key authentication too often',
    registers: [this.registry],
  });

  readonly adminTokenGuessesRefused = new Counter({
    name: 'flightlog_admin_token_guesses_refused_total',
    help:
      'Admin API requests refused with 429 before their token was compared, ' +
      'because their client address sent a wrong admin token too often',
    registers: [this.registry],
  });

  /** The fair admission gate's slots and line (see watchAdmission). */
  private admission: () => { active: number; waiting: number } = () => ({ active: 0, waiting: 0 });

  readonly admissionActive: Gauge = this.readGauge(
    'flightlog_admission_in_flight',
    'Requests being worked on, each holding one of ADMISSION_MAX_IN_FLIGHT slots',
    () => this.admission().active,
  );

  readonly admissionWaiting: Gauge = this.readGauge(
    'flightlog_admission_waiting',
    'Requests waiting for a slot, served by tenant in turn (bounded by ADMISSION_MAX_QUEUED)',
    () => this.admission().waiting,
  );

  /** A gauge set from `read` whenever the registry is collected. */
  private readGauge(name: string, help: string, read: () => number): Gauge {
    return new Gauge({
      name,
      help,
      registers: [this.registry],
      collect(this: Gauge) {
        this.set(read());
      },
    });
  }

  readonly admissionWait = new Histogram({
    name: 'flightlog_admission_wait_seconds',
    help: 'How long requests that had to wait for a slot waited (a millisecond or more)',
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  readonly admissionRefused = new Counter({
    name: 'flightlog_admission_refused_total',
    help:
      'Requests not admitted, by reason: tenant-queue-full or queue-full (429), wait-timeout ' +
      '(429), aborted (the client left while waiting), closed (shutting down)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  watchAdmission(source: () => { active: number; waiting: number }): void {
    this.admission = source;
  }

  readonly livePublishFailures = new Counter({
    name: 'flightlog_live_publish_failures_total',
    help:
      'Accepted batches lost to the live streams: dropped from a full backlog while Redis was ' +
      'unreachable, or refused by the bus (they are stored regardless)',
    registers: [this.registry],
  });

  /** What the live bus holds for Redis while it is unreachable (see watchLiveBacklog). */
  private liveBacklog: () => { batches: number; bytes: number } = () => ({ batches: 0, bytes: 0 });

  readonly liveBacklogBatches: Gauge = this.backlogGauge(
    'flightlog_live_backlog_batches',
    'Stored batches waiting for the live bus (Redis unreachable) to take them',
    (backlog) => backlog.batches,
  );

  readonly liveBacklogBytes: Gauge = this.backlogGauge(
    'flightlog_live_backlog_bytes',
    'Memory held by those batches (bounded by LIVE_BACKLOG_MAX_BYTES)',
    (backlog) => backlog.bytes,
  );

  private backlogGauge(
    name: string,
    help: string,
    pick: (backlog: { batches: number; bytes: number }) => number,
  ): Gauge {
    const read = () => pick(this.liveBacklog());
    return new Gauge({
      name,
      help,
      registers: [this.registry],
      collect(this: Gauge) {
        this.set(read());
      },
    });
  }

  watchLiveBacklog(source: () => { batches: number; bytes: number }): void {
    this.liveBacklog = source;
  }

  readonly liveStreamsRevoked = new Counter({
    name: 'flightlog_live_streams_revoked_total',
    help:
      'Live streams ended because their user lost access to the agent (member removed, agent ' +
      "deleted), by how: admin-api (this instance's admin API, at once), broadcast (another " +
      "instance's admin API or the CLI, told through Redis, at once) or access-check (the " +
      'periodic check, for removals made elsewhere)',
    labelNames: ['via'] as const,
    registers: [this.registry],
  });

  readonly liveAccessCheckFailures = new Counter({
    name: 'flightlog_live_access_check_failures_total',
    help: 'Live stream access checks the store could not answer (they end no stream)',
    registers: [this.registry],
  });

  readonly analysisJobs = new Counter({
    name: 'flightlog_analysis_jobs_total',
    help:
      'Analysis jobs by outcome: done, retried, failed, superseded, lost-lease (finished after ' +
      'another worker took it), lease-expired (taken back from a worker that stopped)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly analysisDuration = new Histogram({
    name: 'flightlog_analysis_duration_seconds',
    help: 'Time to analyse one run (load, analyse, store), by the analyzer that wrote it',
    labelNames: ['analyzer'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  readonly analysisDelay = new Histogram({
    name: 'flightlog_analysis_delay_seconds',
    help: 'From the moment a job became runnable (finalisation + grace) to its autopsy stored',
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
    registers: [this.registry],
  });

  readonly analysisFallbacks = new Counter({
    name: 'flightlog_analysis_llm_fallbacks_total',
    help: 'Autopsies written by the heuristic analyzer because the LLM endpoint failed',
    registers: [this.registry],
  });

  readonly anchorBatches = new Counter({
    name: 'flightlog_anchor_batches_total',
    help:
      'Trees of finished runs, by step: gathered, signed, anchored (their root on chain), ' +
      'resigned (the transaction expired or failed on chain and was signed anew)',
    labelNames: ['step'] as const,
    registers: [this.registry],
  });

  readonly anchoredRuns = new Counter({
    name: 'flightlog_anchored_runs_total',
    help: 'Runs whose fingerprint went on chain in an anchored tree',
    registers: [this.registry],
  });

  readonly anchorFailures = new Counter({
    name: 'flightlog_anchor_failures_total',
    help: 'Anchoring steps that failed and wait to be tried again (RPC down, no funds)',
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }
}
