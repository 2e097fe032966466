import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyInstance } from 'fastify';
import { ApiKeyResolver } from './auth/api-key-resolver.js';
import { KeyGuessLimiter } from './auth/key-guess-limiter.js';
import { createIdentityVerifier, type IdentityVerifier } from './auth/identity.js';
import type { Config } from './config.js';
import { adminRoutes } from './http/admin-routes.js';
import { agentRoutes } from './http/agent-routes.js';
import { ingestRoutes } from './http/ingest-routes.js';
import { otlpRoutes } from './http/otlp-routes.js';
import { registerGracefulClose } from './http/graceful-close.js';
import { BodyParsePool } from './http/body-parse-pool.js';
import { dashboardAssetsDir, dashboardRoutes } from './http/dashboard-routes.js';
import { anchorAddressOf } from './anchoring/anchor-keypair.js';
import { shareRoutes, sharedRoutes } from './http/share-routes.js';
import { ShareLinks } from './sharing/share-links.js';
import { ShareTokenSeal } from './sharing/share-token.js';
import { dashboardSignIn } from './auth/dashboard-sign-in.js';
import { registerJsonBody } from './http/json-body.js';
import { boundedValidatorCompiler } from './http/schema-validator.js';
import { opsRoutes } from './http/ops-routes.js';
import { answerClientError, answerFrameworkError, registerProblemHandler } from './http/problem.js';
import { liveRoutes } from './http/live-routes.js';
import { readRoutes } from './http/read-routes.js';
import { AgentWriteTurns } from './ingest/agent-write-turns.js';
import { pooledUlids } from './ids/pooled-ulids.js';
import { KeyedTurns } from './ingest/keyed-turns.js';
import { RecentIds } from './ingest/recent-ids.js';
import { createInProcessBus } from './live/in-process-bus.js';
import type { LiveBus } from './live/live-bus.js';
import { LivePublisher } from './live/publish.js';
import { StreamAccessGuard } from './live/stream-access-guard.js';
import { QueueBudget } from './live/queue-budget.js';
import { StreamRegistry } from './live/stream-registry.js';
import { registerRequestMetrics } from './http/request-metrics.js';
import { LifecycleSweeper } from './lifecycle/sweeper.js';
import type { RunDeletionContext } from './lifecycle/run-deletion.js';
import { lifecycleRoutes } from './http/lifecycle-routes.js';
import { exportRoutes, type ExportStreaming } from './http/export-routes.js';
import { ExportSlots } from './lifecycle/export-slots.js';
import { FairAdmission } from './admission/fair-admission.js';
import { registerFairAdmission } from './http/fair-admission-hook.js';
import { serializeError } from './observability/log-error.js';
import { serializeRequest } from './observability/log-request.js';
import { Metrics } from './observability/metrics.js';
import type { Store } from './store/open-store.js';

export interface AppDependencies {
  config: Config;
  store: Store;
  /** The live bus (in-process when absent). */
  bus?: LiveBus;
  /** `false` silences logs; a destination receives the JSON log lines (default: stdout). */
  logger?: false | { destination: LogDestination };
  /** Close the store when the app closes (the server owns it; tests may share one). */
  closeStoreOnClose?: boolean;
  /** Told when a request queued an analysis runnable in `runnableInMs` (wakes a local worker). */
  onAnalysisQueued?: (runnableInMs: number) => void;
}

export interface FlightlogApp {
  app: FastifyInstance;
  metrics: Metrics;
  apiKeys: ApiKeyResolver;
  identity: IdentityVerifier;
  bus: LiveBus;
  streams: StreamRegistry;
  /** Ends the live streams of users who lost access (checks this instance's streams). */
  streamAccess: StreamAccessGuard;
  /** The data lifecycle's background sweeper (abandoned runs, retention); stopped on close. */
  lifecycle: LifecycleSweeper;
  /** The exports streaming on this instance, and their bounds. */
  exports: ExportStreaming;
}

/** Where JSON log lines go (a pino destination). */
export interface LogDestination {
  write(line: string): void;
}

/** Request ids: ULIDs, incremented within a millisecond, random from the pool otherwise. */
const requestIds = pooledUlids();

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/** Trusts the nearest `hops` proxies' `X-Forwarded-For` entries (proxy-addr's hop index). */
function trustHops(hops: number): (address: string, hop: number) => boolean {
  return (_address, hop) => hop < hops;
}

/**
 * OTLP traces remembered as written by this process (about 1 MB): an export of one of them is
 * read before it is written, any other is first tried as a run's first export.
 */
const RECENT_OTLP_TRACES = 10_000;

/** Builds the service as a Fastify app made of plugins; it does not listen. */
export async function buildApp(deps: AppDependencies): Promise<FlightlogApp> {
  const { config, store } = deps;
  const app = Fastify({
    logger:
      deps.logger === false
        ? false
        : {
            level: config.process.logLevel,
            // Keys, tokens and payloads never reach the logs: requests are logged by method,
            // route and id only, and these are redacted should a serializer ever include them.
            redact: ['req.headers.authorization', 'req.headers.cookie', 'req.body', 'res.body'],
            serializers: { err: serializeError, req: serializeRequest },
            ...(deps.logger ? { stream: deps.logger.destination } : {}),
          },
    // Honour a caller's request id when it is sane, so logs can be joined across services.
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : requestIds();
    },
    requestTimeout: config.http.requestTimeoutMs,
    // request.ip: the connection's address unless TRUST_PROXY names the proxies in front
    trustProxy:
      typeof config.http.trustProxy === 'number'
        ? trustHops(config.http.trustProxy)
        : config.http.trustProxy,
    // Node looks for requests past their header or request timeout only this often (30 s by
    // default), which would let a slow-loris sender hold a connection far past the limits.
    http: { connectionsCheckingInterval: 1_000 },
    clientErrorHandler: answerClientError,
    frameworkErrors: answerFrameworkError,
    return503OnClosing: false,
  }).withTypeProvider<TypeBoxTypeProvider>();
  // Validation that stops: first error at once, all errors only for small bodies (issue 15).
  app.setValidatorCompiler(boundedValidatorCompiler());
  // Headers must arrive promptly even when the body may take longer (slow-loris senders).
  app.server.headersTimeout = Math.min(10_000, config.http.requestTimeoutMs);

  const metrics = new Metrics();
  const credentialGuesses = () =>
    new KeyGuessLimiter({
      maxFailures: config.auth.apiKeyMaxFailures,
      windowMs: config.auth.apiKeyFailureWindowMs,
      maxAddresses: 10_000,
    });
  const apiKeys = new ApiKeyResolver(store.agents, {
    ttlMs: config.auth.apiKeyCacheMs,
    maxEntries: 10_000,
    guesses: credentialGuesses(),
    onLookup: (found) => metrics.apiKeyLookups.inc({ result: found ? 'found' : 'unknown' }),
  });
  const identity = createIdentityVerifier({
    ...(config.auth.jwtSecret ? { secret: config.auth.jwtSecret } : {}),
    ...(config.auth.jwtJwksUrl ? { jwksUrl: config.auth.jwtJwksUrl } : {}),
    ...(config.auth.jwtIssuer ? { issuer: config.auth.jwtIssuer } : {}),
    ...(config.auth.jwtAudience ? { audience: config.auth.jwtAudience } : {}),
  });

  app.decorateRequest('agent', undefined);
  app.decorateRequest('userId', undefined);
  app.decorateRequest('userExpiresAt', undefined);
  app.decorateRequest('tenant', undefined);
  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  const inFlight = registerGracefulClose(app);
  registerProblemHandler(app, metrics);
  registerRequestMetrics(app, metrics);
  // Before the routes, so that every route's requests take their turn (issue 15).
  const admission = new FairAdmission(config.admission);
  registerFairAdmission(app, admission, metrics);
  const largeBodies =
    config.http.largeBodyWorkers > 0
      ? new BodyParsePool({
          workers: config.http.largeBodyWorkers,
          maxPerKey: config.http.largeBodyMaxPerAgent,
          // each waiting body is held in memory: at most this many times MAX_BODY_BYTES
          maxQueued: Math.max(config.http.largeBodyMaxPerAgent, 64),
        })
      : undefined;
  const bodyLimits = { maxBytes: config.http.maxBodyBytes };
  const largeBodyParsing = largeBodies
    ? { pool: largeBodies, minBytes: config.http.largeBodyBytes }
    : undefined;
  registerJsonBody(app, bodyLimits, largeBodyParsing);

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Flightlog',
        version: '1.0.0',
        description: 'Trace ingest service for software agents.',
      },
      components: {
        securitySchemes: {
          apiKey: { type: 'http', scheme: 'bearer', description: 'Agent API key' },
          identity: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
          admin: { type: 'http', scheme: 'bearer', description: 'ADMIN_TOKEN' },
        },
      },
    },
  });

  const bus =
    deps.bus ??
    createInProcessBus({
      maxBytes: config.live.bufferMaxBytes,
      agentMaxBytes: config.live.agentBufferMaxBytes,
    });
  const streams = new StreamRegistry(config.live.maxStreamsPerUser);
  metrics.watchLiveBacklog(() => bus.backlog());

  const streamAccess = new StreamAccessGuard(streams, store.agents, {
    intervalMs: config.live.accessCheckMs,
    logger: app.log,
    onRevoked: (count, via) => metrics.liveStreamsRevoked.inc({ via }, count),
    onCheckFailed: () => metrics.liveAccessCheckFailures.inc(),
    bus,
  });
  const onAnalysisQueued = deps.onAnalysisQueued;
  const live = new LivePublisher(bus, config.live.publishTimeoutMs, (error: unknown) => {
    metrics.livePublishFailures.inc();
    app.log.warn({ err: error }, 'live publish failed');
  });
  const ingest = {
    traces: store.traces,
    analysisGraceMs: config.analysis.graceMs,
    ...(onAnalysisQueued
      ? { onAnalysisQueued: () => onAnalysisQueued(config.analysis.graceMs) }
      : {}),
    live,
    largeWrites: {
      turns: new AgentWriteTurns(config.http.largeBodyMaxPerAgent),
      minBytes: config.http.largeBodyBytes,
    },
    traceTurns: new KeyedTurns(),
    recentOtlpTraces: new RecentIds(RECENT_OTLP_TRACES),
  };
  const lifecycle = new LifecycleSweeper({
    store: store.lifecycle,
    config: config.lifecycle,
    live,
    bus,
    log: app.log,
    engine: store.engine,
    onTimedOut: (count) => metrics.lifecycleRuns.inc({ action: 'timeout' }, count),
    onExpired: async (sweep) => {
      metrics.lifecycleRuns.inc({ action: 'expired' }, sweep.runs);
      await store.audit.record({
        actor: 'system',
        action: 'runs.expired',
        agentId: sweep.agentId,
        details: { runs: sweep.runs, events: sweep.events, retentionDays: sweep.days },
      });
    },
    onPass: (report) => {
      metrics.lifecycleSweepSeconds.inc({ part: 'work' }, report.workMs / 1000);
      metrics.lifecycleSweepSeconds.inc({ part: 'elapsed' }, report.elapsedMs / 1000);
    },
  });
  const deletion: RunDeletionContext = {
    store: store.lifecycle,
    bus,
    tombstoneMs: config.lifecycle.tombstoneMs,
    rowsPerStatement: config.lifecycle.sweepRows,
  };
  const onRunDeleted = () => metrics.lifecycleRuns.inc({ action: 'deleted' });
  await app.register(lifecycleRoutes, { identity, deletion, onRunDeleted });
  const exports: ExportStreaming = {
    slots: new ExportSlots({ maxPerTenant: config.export.maxPerUser, maxTotal: config.export.max }),
    stallTimeoutMs: config.export.stallTimeoutMs,
  };
  await app.register(exportRoutes, { store, identity, streaming: exports });
  await app.register(ingestRoutes, { ingest, apiKeys, metrics });
  await app.register(otlpRoutes, {
    ingest,
    apiKeys,
    metrics,
    limits: bodyLimits,
    largeBodies: largeBodyParsing,
  });
  const shareSecret = config.auth.shareSecret ?? config.auth.jwtSecret;
  const shareLinks = new ShareLinks({
    store,
    seal: shareSecret === undefined ? undefined : new ShareTokenSeal(shareSecret),
    guesses: credentialGuesses(),
  });
  await app.register(readRoutes, { store, identity, shareLinks });
  await app.register(shareRoutes, { identity, shares: shareLinks });
  await app.register(sharedRoutes, { shares: shareLinks });
  await app.register(agentRoutes, {
    store,
    identity,
    agentCreators: config.auth.agentCreators,
    apiKeys,
    streamAccess,
  });
  await app.register(liveRoutes, {
    store,
    identity,
    bus,
    streams,
    heartbeatMs: config.live.heartbeatMs,
    maxQueueBytes: config.live.maxQueueBytes,
    queueBudget: new QueueBudget(config.live.maxTotalQueueBytes),
    retryMs: config.live.retryMs,
    stallTimeoutMs: config.live.stallTimeoutMs,
  });
  if (config.auth.adminToken)
    await app.register(adminRoutes, {
      store,
      adminToken: config.auth.adminToken,
      hidden: config.auth.adminApiHidden === true,
      apiKeys,
      streamAccess,
      bus,
      tokenGuesses: credentialGuesses(),
      onGuessRefused: () => metrics.adminTokenGuessesRefused.inc(),
      lifecycle: { defaults: config.lifecycle, deletion, onRunDeleted, exports },
      shares: shareLinks,
    });
  await app.register(opsRoutes, { store, metrics, readyTimeoutMs: 2_000 });
  const dashboardAssets = dashboardAssetsDir();
  if (dashboardAssets)
    await app.register(dashboardRoutes, {
      assetsDir: dashboardAssets,
      signIn: dashboardSignIn(config.auth),
      anchoring:
        config.anchoring.keypair !== undefined && config.anchoring.cluster !== undefined
          ? {
              cluster: config.anchoring.cluster,
              address: anchorAddressOf(config.anchoring.keypair),
            }
          : null,
    });
  else app.log.warn('the dashboard is not built (npm run build): / answers 404');

  // Requests still in flight when closing began finish before the store goes away (the caller
  // bounds the wait with its shutdown deadline).
  // Live streams never end by themselves: end them when closing begins, so the requests in
  // flight can drain.
  let accessStopped: Promise<void> | undefined;
  let lifecycleStopped: Promise<void> | undefined;
  app.addHook('preClose', async () => {
    // the pass in progress ends after its current statement, before the store goes away
    lifecycleStopped = lifecycle.stop();
    // requests waiting for a slot are answered 503 now, so the ones in flight can drain
    admission.close();
    accessStopped = streamAccess.stop();
    streams.endAll();
    // exports stop before their next read (their clients resume from their last line's cursor)
    exports.slots.closeAll();
  });
  app.addHook('onClose', async () => {
    await inFlight.drained();
    await largeBodies?.close();
    // a check in flight finishes before the store goes away
    await (accessStopped ?? streamAccess.stop());
    await (lifecycleStopped ?? lifecycle.stop());
    // an export's read in flight finishes before the store goes away
    await exports.slots.drained();
    // batches answered just before closing still reach their streams (each bounded by the
    // publish timeout)
    await live.drained();
    await bus.close();
    if (deps.closeStoreOnClose !== false) await store.close();
  });
  streamAccess.start();
  lifecycle.start();
  return { app, metrics, apiKeys, identity, bus, streams, streamAccess, lifecycle, exports };
}
