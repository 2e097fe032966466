import { isIP } from 'node:net';
import { availableParallelism } from 'node:os';
import { parseEnvelopeKey } from '@flightlog/protocol';
import { readAnchorKeypair } from './anchoring/anchor-keypair.js';
import { DATA_DIR_DURABILITIES, type DataDirDurability } from './store/pglite-durability.js';
import { PGLITE_THREADS, type PgliteThread } from './store/sql-client.js';
import { LIVE_AGENT_BUFFER_MAX_BYTES } from './live/live-bus.js';
import { LOCAL_OPERATOR } from './first-run/local-secret.js';
import {
  LifecycleConfigError,
  lifecycleConfig,
  type LifecycleConfig,
} from './lifecycle/lifecycle-config.js';

/**
 * The heap may grow to twice what the last full collection kept (V8 would let it reach up to
 * four times): under ingest load V8's heap is mostly garbage waiting for that collection, and
 * the PostgreSQL server's peak RSS under the benchmark's load went from ~295 to ~220 MB for no
 * CPU the benchmark can tell (docs/performance.md, item 4).
 */
export const HEAP_GROWING_PERCENT = 100;

/**
 * Service configuration, read once from the environment at start-up, grouped by the part of the
 * service each setting belongs to: a module is handed its own group (`storeOptionsFrom(config.store)`,
 * `analyzerFromConfig(config.analysis)`), not the whole. docs/configuration.md lists the variables.
 */
export interface Config {
  http: HttpConfig;
  store: StoreConfig;
  auth: AuthConfig;
  admission: AdmissionConfig;
  live: LiveConfig;
  analysis: AnalysisConfig;
  /** Run timeouts, retention, deletion tombstones and the sweeper (lifecycle/lifecycle-config.ts). */
  lifecycle: LifecycleConfig;
  export: ExportConfig;
  /** Finished runs' fingerprints put on chain; off without `ANCHOR_KEYPAIR`. */
  anchoring: AnchoringConfig;
  process: ProcessConfig;
}

/** Where the service listens and what one request may be. */
export interface HttpConfig {
  port: number;
  host: string;
  /**
   * Where people reach this service (`PUBLIC_URL`), e.g. behind a proxy: the base of the
   * dashboard sign-in links the CLI prints. No query or fragment (the link adds its own).
   */
  publicUrl: string | undefined;
  /**
   * Which proxies in front of the service to believe about the client's address
   * (`TRUST_PROXY`): none (false), their addresses or CIDR ranges, or a number of hops.
   */
  trustProxy: false | number | string[];
  /** Largest request body, both as received and after gzip inflation. */
  maxBodyBytes: number;
  /**
   * Bodies of at least this many bytes (after inflation) are parsed and validated on worker
   * threads, taking turns by agent (`LARGE_BODY_BYTES`), so one agent's big bodies do not hold
   * the event loop everyone's requests are served on.
   */
  largeBodyBytes: number;
  /** Worker threads for large bodies (`LARGE_BODY_WORKERS`; 0 parses them in line). */
  largeBodyWorkers: number;
  /** Large bodies one agent may have waiting or parsing at once (`LARGE_BODY_MAX_PER_AGENT`). */
  largeBodyMaxPerAgent: number;
  requestTimeoutMs: number;
}

/** The storage engine: PGlite in `dataDir`, or PostgreSQL at `databaseUrl`. */
export interface StoreConfig {
  /** PGlite data directory, used when `databaseUrl` is absent. */
  dataDir: string;
  /** What an acknowledged batch in `dataDir` survives (`DATA_DIR_DURABILITY`). */
  dataDirDurability: DataDirDurability;
  /** Where PGlite runs (`PGLITE_THREAD`): on the event loop, or on a worker thread of its own. */
  pgliteThread: PgliteThread;
  databaseUrl: string | undefined;
  databaseSchema: string | undefined;
  /** PostgreSQL connections of a server (`DATABASE_POOL_SIZE`). */
  poolSize: number;
  /** PostgreSQL statement deadline (`DATABASE_STATEMENT_TIMEOUT_MS`); silence is given up 2 s later. */
  statementTimeoutMs: number;
  /**
   * Group commit (`INGEST_GROUP_MAX_BATCHES`, `INGEST_GROUP_CONCURRENCY`): batches that arrive
   * while `concurrency` batch statements are under way are written together, up to `maxBatches`
   * in one statement (1: each alone). Concurrency defaults to the engine's (see open-store.ts).
   */
  ingestGroup: { maxBatches: number; concurrency?: number };
}

/** Who may do what: the admin token, identity tokens, API keys and who creates agents. */
export interface AuthConfig {
  adminToken: string | undefined;
  /**
   * The admin token was derived from the local secret (zero-configuration mode), not configured:
   * the admin API then answers anyone without it as if it did not exist (design.md: it exists
   * only with ADMIN_TOKEN), and only the CLI beside the server, which reads the secret, uses it.
   */
  adminApiHidden?: boolean;
  jwtSecret: string | undefined;
  /**
   * SHARE_SECRET: what share links' tokens are sealed with, so that a run's team can be shown its
   * current link (the store keeps only the token's hash and its sealed copy); defaults to
   * JWT_SECRET. Every instance needs the same one.
   */
  shareSecret: string | undefined;
  jwtJwksUrl: string | undefined;
  jwtIssuer: string | undefined;
  jwtAudience: string | undefined;
  /**
   * The dashboard's public OpenID Connect client at the `JWT_ISSUER` provider
   * (`DASHBOARD_OIDC_CLIENT_ID`): with it the dashboard signs people in there (authorization
   * code with PKCE, in the browser) and sends the ID token it gets, whose `aud` is this client.
   */
  dashboardOidcClientId: string | undefined;
  apiKeyCacheMs: number;
  /** Failed API key authentications one client address may make per window before `429`. */
  apiKeyMaxFailures: number;
  /** The window of `apiKeyMaxFailures`, from an address's first failure. */
  apiKeyFailureWindowMs: number;
  /**
   * Users who may create agents from the dashboard (`AGENT_CREATORS`, comma-separated user ids),
   * each becoming the owner of the agents they create. Without any identity configuration (the
   * local secret is in use) it defaults to the local operator, who signs in through the link
   * `serve` prints; otherwise to nobody.
   */
  agentCreators: string[];
}

/**
 * Fair admission between tenants (agents, users, the admin token, client addresses): requests
 * worked on at once; past it they wait, served by tenant in turn.
 */
export interface AdmissionConfig {
  /** `ADMISSION_MAX_IN_FLIGHT` */
  maxInFlight: number;
  /** Requests one tenant may have waiting for a slot before `429` (`ADMISSION_MAX_QUEUED_PER_TENANT`). */
  maxQueuedPerTenant: number;
  /** Requests all tenants together may have waiting (`ADMISSION_MAX_QUEUED`). */
  maxQueued: number;
  /** Longest a request waits for a slot before `429` (`ADMISSION_MAX_WAIT_MS`). */
  maxWaitMs: number;
}

/** The live bus (in-process, or Redis at `redisUrl`) and the live streams it feeds. */
export interface LiveConfig {
  redisUrl: string | undefined;
  redisPrefix: string;
  /** Comment line sent on idle live streams so proxies keep them open. */
  heartbeatMs: number;
  maxStreamsPerUser: number;
  /** Bytes a live stream may have waiting for a slow client before it is disconnected. */
  maxQueueBytes: number;
  /** Bytes all the live streams of an instance may have waiting together, whatever their number. */
  maxTotalQueueBytes: number;
  /** How long a live stream waits for a client that stopped reading before it is disconnected. */
  stallTimeoutMs: number;
  /**
   * How often each instance checks that the users of its live streams still have a role
   * (at most 4 s, so a revocation made anywhere ends the streams within 5 s).
   */
  accessCheckMs: number;
  /** The SSE `retry:` hint. */
  retryMs: number;
  /** Longest a shutdown waits for live publishes in flight (requests never wait for them). */
  publishTimeoutMs: number;
  /** Bytes of batches the Redis bus keeps while Redis is unreachable, to deliver once it is back. */
  backlogMaxBytes: number;
  /** Bytes of batches the live bus (either engine) keeps across all agents. */
  bufferMaxBytes: number;
  /** Bytes of batches the live bus (either engine) keeps per agent. */
  agentBufferMaxBytes: number;
}

/** The autopsy of finished runs: the queue, its worker and the analyzer. */
export interface AnalysisConfig {
  graceMs: number;
  /** Run an analysis worker inside the server process (`ANALYSIS_WORKER=on`). */
  worker: boolean;
  /** How long a worker holds a claimed job before another may take it. */
  leaseMs: number;
  /** Attempts of one job before it is marked failed. */
  maxAttempts: number;
  /** Longest idle sleep of a worker between looks at the queue. */
  pollMs: number;
  /** OpenAI-compatible endpoint of the LLM analyzer; with the model, or neither. */
  llmBaseUrl: string | undefined;
  llmModel: string | undefined;
  llmApiKey: string | undefined;
  /** Longest wait for the LLM endpoint; under the lease. */
  llmTimeoutMs: number;
  /** Whether facts read from decrypted payloads may be sent to the LLM endpoint. */
  llmSendDecrypted: boolean;
  /** SERVICE_MASTER_KEY (32 bytes): workers open encrypted payloads with it, for analysis only. */
  serviceMasterKey: Buffer | undefined;
}

/** Streaming exports (`GET /v1/agents/:id/export`). */
export interface ExportConfig {
  /** Exports one user (or the admin token) may run at once on an instance (`EXPORT_MAX_PER_USER`). */
  maxPerUser: number;
  /** Exports an instance runs at once (`EXPORT_MAX`). */
  max: number;
  /** An export whose client takes nothing for this long is disconnected (`EXPORT_STALL_TIMEOUT_MS`). */
  stallTimeoutMs: number;
}

/** The clusters anchoring writes to (`ANCHOR_CLUSTER`). */
export const ANCHOR_CLUSTERS = ['devnet', 'mainnet'] as const;
export type AnchorCluster = (typeof ANCHOR_CLUSTERS)[number];

/** The RPC each cluster is reached at unless `ANCHOR_RPC_URL` says otherwise. */
export const ANCHOR_DEFAULT_RPC: Record<AnchorCluster, string> = {
  devnet: 'https://api.devnet.solana.com',
  mainnet: 'https://api.mainnet-beta.solana.com',
};

/** Anchoring finished runs on Solana (anchoring/): on when `keypair` is set. */
export interface AnchoringConfig {
  /** `ANCHOR_KEYPAIR`: the keypair that signs and pays the memo transactions (64 bytes). */
  keypair: Uint8Array | undefined;
  /** `ANCHOR_CLUSTER`: required with the keypair — anchoring on mainnet spends real SOL. */
  cluster: AnchorCluster | undefined;
  /** `ANCHOR_RPC_URL`; defaults to the cluster's public RPC. */
  rpcUrl: string | undefined;
  /** `ANCHOR_INTERVAL_MS`: a tree is gathered at least this often while runs wait. */
  intervalMs: number;
  /** `ANCHOR_BATCH_RUNS`: runs per tree at most; this many waiting gathers a tree at once. */
  batchRuns: number;
  /** `ANCHOR_POLL_MS`: how often the anchorer looks at the store and at its transactions. */
  pollMs: number;
  /** `ANCHOR_LEASE_MS`: how long an instance holds the batch it works on. */
  leaseMs: number;
  /** `ANCHOR_BACKOFF_MS`: the first retry's delay after a failure, doubled up to 5 minutes. */
  backoffMs: number;
}

/** How the process runs: its logs, its shutdown, and what `serve` does at start-up. */
export interface ProcessConfig {
  logLevel: string;
  /**
   * How log lines look (`LOG_FORMAT`): `pretty` (one readable line each) or `json`; undefined
   * lets `serve` choose by whether stdout is a terminal.
   */
  logFormat: LogFormat | undefined;
  shutdownTimeoutMs: number;
  /** `NODE_ENV=production`: `serve` refuses the zero-configuration mode. */
  production: boolean;
  /**
   * Whether `serve` prints its start-up banner with the sign-in link (`FLIGHTLOG_BANNER`);
   * undefined: when stdout is a terminal.
   */
  startUpBanner: boolean | undefined;
  /**
   * How far V8 lets the heap grow past what the last full collection kept, in percent
   * (`HEAP_GROWING_PERCENT`; 0: V8's own choice, up to four times). See cli/heap-growth.ts.
   */
  heapGrowingPercent: number;
}

/** Changes to some settings of some groups (a command's, a test's): the rest as configured. */
export type ConfigChanges = { [Group in keyof Config]?: Partial<Config[Group]> };

/** `config` with `changes` applied, group by group. */
export function changeConfig(config: Config, changes: ConfigChanges): Config {
  return {
    http: { ...config.http, ...changes.http },
    store: { ...config.store, ...changes.store },
    auth: { ...config.auth, ...changes.auth },
    admission: { ...config.admission, ...changes.admission },
    live: { ...config.live, ...changes.live },
    analysis: { ...config.analysis, ...changes.analysis },
    lifecycle: { ...config.lifecycle, ...changes.lifecycle },
    export: { ...config.export, ...changes.export },
    anchoring: { ...config.anchoring, ...changes.anchoring },
    process: { ...config.process, ...changes.process },
  };
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export type Env = Record<string, string | undefined>;

/** pino's levels. */
export const LOG_FORMATS = ['pretty', 'json'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/**
 * Neither `JWT_SECRET` nor `JWT_JWKS_URL`: the zero-configuration mode, where `serve` makes (or
 * reuses) a secret in the data directory, signs the local operator in, and listens on loopback.
 */
export function usesLocalSecret(env: Env): boolean {
  return text(env, 'JWT_SECRET') === undefined && text(env, 'JWT_JWKS_URL') === undefined;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function text(env: Env, name: string): string | undefined {
  const value = env[name]?.trim();
  return value ? value : undefined;
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = text(env, name);
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max)
    throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`);
  return value;
}

/**
 * `TRUST_PROXY`: unset or `false` trusts no proxy (the connection's address is the client's);
 * a whole number trusts that many hops of `X-Forwarded-For`; otherwise a comma-separated list
 * of proxy addresses or CIDR ranges. `true` (trust anyone) is refused: any client could then
 * pick its own address, and with it a fresh key-guessing budget.
 */
function trustProxy(env: Env): false | number | string[] {
  const raw = text(env, 'TRUST_PROXY');
  if (raw === undefined || raw.toLowerCase() === 'false') return false;
  if (/^\d+$/.test(raw)) return integer(env, 'TRUST_PROXY', 0, 1, 32);
  const entries = raw.split(',').map((entry) => entry.trim());
  for (const entry of entries) {
    const [address = '', bits, ...rest] = entry.split('/');
    const family = isIP(address);
    const maxBits = family === 6 ? 128 : 32;
    if (
      family === 0 ||
      rest.length > 0 ||
      (bits !== undefined && (!/^\d+$/.test(bits) || Number(bits) > maxBits))
    )
      throw new ConfigError(
        `TRUST_PROXY must be false, a number of hops, or proxy addresses / CIDR ranges separated by commas; "${entry}" is none of these`,
      );
  }
  return entries;
}

/**
 * `AGENT_CREATORS`: user ids (the identity JWT's `sub`) separated by commas; blanks are ignored,
 * and set but empty means nobody. Unset, it is the local operator in the zero-configuration mode
 * (the generated secret), and nobody otherwise.
 */
function agentCreators(env: Env): string[] {
  if (env.AGENT_CREATORS === undefined) return usesLocalSecret(env) ? [LOCAL_OPERATOR] : [];
  const raw = text(env, 'AGENT_CREATORS');
  if (raw === undefined) return [];
  const ids = raw
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  for (const id of ids)
    if (id.length > 256 || [...id].some((c) => c.charCodeAt(0) < 0x20))
      throw new ConfigError(
        `AGENT_CREATORS must be user ids separated by commas; "${id}" is not one`,
      );
  return [...new Set(ids)];
}

function url(env: Env, name: string, protocols: string[]): string | undefined {
  const raw = text(env, name);
  if (raw === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} is not a valid URL`);
  }
  if (!protocols.includes(parsed.protocol))
    throw new ConfigError(`${name} must use ${protocols.join(' or ')}`);
  return raw;
}

function onOff(env: Env, name: string, fallback: boolean): boolean {
  const raw = text(env, name);
  if (raw === undefined) return fallback;
  if (raw !== 'on' && raw !== 'off')
    throw new ConfigError(`${name} must be on or off, got "${raw}"`);
  return raw === 'on';
}

/**
 * `DATA_DIR_DURABILITY`: `power-loss` (the default) or `process-crash`, the faster mode that
 * gives up surviving a power cut. It is refused with `DATABASE_URL`, where it would change
 * nothing: PostgreSQL's durability is its own `fsync` and `synchronous_commit`.
 */
function dataDirDurability(env: Env): DataDirDurability {
  const value = oneOf(
    env,
    'DATA_DIR_DURABILITY',
    DATA_DIR_DURABILITIES,
    'power-loss (an acknowledged batch is on disk) or process-crash (it survives a crash of the process, not of the machine)',
  );
  if (value === 'process-crash' && text(env, 'DATABASE_URL') !== undefined)
    throw new ConfigError(
      "DATA_DIR_DURABILITY applies to the embedded engine only; with DATABASE_URL, durability is PostgreSQL's own fsync and synchronous_commit",
    );
  return value;
}

/**
 * One of `known` (the first is the default when `name` is unset); `told` says what each means,
 * in the error that names any other value.
 */
function oneOf<T extends string>(env: Env, name: string, known: readonly T[], told: string): T {
  const raw = text(env, name);
  if (raw === undefined) return known[0] as T;
  const value = known.find((candidate) => candidate === raw);
  if (value === undefined) throw new ConfigError(`${name} must be ${told}, got "${raw}"`);
  return value;
}

/**
 * `PGLITE_THREAD`: `main` (the default), the embedded engine on the event loop with the
 * requests, or `worker`, on a thread of its own (see store/pglite-thread-client.ts; not the
 * default until it measures better than the event loop: docs/performance.md).
 */
function pgliteThread(env: Env): PgliteThread {
  return oneOf(
    env,
    'PGLITE_THREAD',
    PGLITE_THREADS,
    'main (the embedded engine on the event loop) or worker (on a thread of its own)',
  );
}

/** The analysis settings, checked together (some only make sense with others). */
function analysisSettings(env: Env): AnalysisConfig {
  const analysisLeaseMs = integer(env, 'ANALYSIS_LEASE_MS', 60_000, 1_000, 3_600_000);
  const analysisLlmBaseUrl = url(env, 'ANALYSIS_LLM_BASE_URL', ['https:', 'http:']);
  const analysisLlmModel = text(env, 'ANALYSIS_LLM_MODEL');
  const analysisLlmApiKey = text(env, 'ANALYSIS_LLM_API_KEY');
  if (analysisLlmBaseUrl !== undefined && analysisLlmModel === undefined)
    throw new ConfigError('ANALYSIS_LLM_MODEL is required with ANALYSIS_LLM_BASE_URL');
  if (analysisLlmBaseUrl === undefined && analysisLlmModel !== undefined)
    throw new ConfigError('ANALYSIS_LLM_BASE_URL is required with ANALYSIS_LLM_MODEL');
  if (analysisLlmBaseUrl === undefined && analysisLlmApiKey !== undefined)
    throw new ConfigError('ANALYSIS_LLM_API_KEY is set, but ANALYSIS_LLM_BASE_URL is not');
  const analysisLlmTimeoutMs = integer(env, 'ANALYSIS_LLM_TIMEOUT_MS', 20_000, 100, 600_000);
  // A job still waiting for the model when its lease ends would be analysed a second time.
  if (analysisLlmBaseUrl !== undefined && analysisLlmTimeoutMs >= analysisLeaseMs)
    throw new ConfigError(
      `ANALYSIS_LLM_TIMEOUT_MS (${analysisLlmTimeoutMs}) must be less than ANALYSIS_LEASE_MS (${analysisLeaseMs})`,
    );
  const rawKey = env.SERVICE_MASTER_KEY;
  let serviceMasterKey: Buffer | undefined;
  if (rawKey !== undefined) {
    const parsed = parseEnvelopeKey(rawKey);
    // never echo the value: it is a secret, even when it is a wrong one
    if (parsed.kind === 'invalid')
      throw new ConfigError(
        `SERVICE_MASTER_KEY must be 32 random bytes in base64, but ${parsed.reason}`,
      );
    serviceMasterKey = parsed.key;
  }
  return {
    graceMs: integer(env, 'ANALYSIS_GRACE_MS', 2_000, 0, 3_600_000),
    worker: onOff(env, 'ANALYSIS_WORKER', true),
    leaseMs: analysisLeaseMs,
    maxAttempts: integer(env, 'ANALYSIS_MAX_ATTEMPTS', 5, 1, 100),
    pollMs: integer(env, 'ANALYSIS_POLL_MS', 500, 10, 60_000),
    llmBaseUrl: analysisLlmBaseUrl,
    llmModel: analysisLlmModel,
    llmApiKey: analysisLlmApiKey,
    llmTimeoutMs: analysisLlmTimeoutMs,
    llmSendDecrypted: onOff(env, 'ANALYSIS_LLM_SEND_DECRYPTED', false),
    serviceMasterKey,
  };
}

/** The anchoring settings: all of them only with ANCHOR_KEYPAIR. */
function anchoringSettings(env: Env): AnchoringConfig {
  const keypairSetting = text(env, 'ANCHOR_KEYPAIR');
  const clusterSetting = text(env, 'ANCHOR_CLUSTER');
  const rpcUrl = url(env, 'ANCHOR_RPC_URL', ['https:', 'http:']);
  let keypair: Uint8Array | undefined;
  let cluster: AnchorCluster | undefined;
  if (keypairSetting !== undefined) {
    const read = readAnchorKeypair(keypairSetting);
    if (typeof read === 'string') throw new ConfigError(`ANCHOR_KEYPAIR: ${read}`);
    keypair = read;
    if (clusterSetting === undefined)
      throw new ConfigError(
        `ANCHOR_CLUSTER is required with ANCHOR_KEYPAIR: one of ${ANCHOR_CLUSTERS.join(', ')}`,
      );
  } else if (clusterSetting !== undefined || rpcUrl !== undefined)
    throw new ConfigError(
      `${clusterSetting !== undefined ? 'ANCHOR_CLUSTER' : 'ANCHOR_RPC_URL'} is set, but ANCHOR_KEYPAIR (which turns anchoring on) is not`,
    );
  if (clusterSetting !== undefined) {
    if (!(ANCHOR_CLUSTERS as readonly string[]).includes(clusterSetting))
      throw new ConfigError(
        `ANCHOR_CLUSTER must be one of ${ANCHOR_CLUSTERS.join(', ')}, got "${clusterSetting}"`,
      );
    cluster = clusterSetting as AnchorCluster;
  }
  return {
    keypair,
    cluster,
    rpcUrl,
    intervalMs: integer(env, 'ANCHOR_INTERVAL_MS', 60_000, 100, 86_400_000),
    batchRuns: integer(env, 'ANCHOR_BATCH_RUNS', 1_000, 1, 10_000),
    pollMs: integer(env, 'ANCHOR_POLL_MS', 1_000, 10, 60_000),
    leaseMs: integer(env, 'ANCHOR_LEASE_MS', 60_000, 100, 3_600_000),
    backoffMs: integer(env, 'ANCHOR_BACKOFF_MS', 1_000, 10, 300_000),
  };
}

function lifecycleSettings(env: Env): LifecycleConfig {
  try {
    return lifecycleConfig(env);
  } catch (error) {
    if (error instanceof LifecycleConfigError) throw new ConfigError(error.message);
    throw error;
  }
}

/** Reads and checks every setting; throws ConfigError naming the variable that is wrong. */
export function loadConfig(env: Env = process.env): Config {
  const jwtSecret = text(env, 'JWT_SECRET');
  if (jwtSecret !== undefined && jwtSecret.length < 32)
    throw new ConfigError('JWT_SECRET must be at least 32 characters');
  const shareSecret = text(env, 'SHARE_SECRET');
  if (shareSecret !== undefined && shareSecret.length < 32)
    throw new ConfigError('SHARE_SECRET must be at least 32 characters');
  const adminToken = text(env, 'ADMIN_TOKEN');
  if (adminToken !== undefined && adminToken.length < 16)
    throw new ConfigError('ADMIN_TOKEN must be at least 16 characters');
  const jwtJwksUrl = url(env, 'JWT_JWKS_URL', ['https:', 'http:']);
  // Without both, any token the identity provider signs for any of its applications would do.
  if (jwtJwksUrl !== undefined)
    for (const name of ['JWT_ISSUER', 'JWT_AUDIENCE'])
      if (text(env, name) === undefined)
        throw new ConfigError(`${name} is required with JWT_JWKS_URL`);
  const dashboardOidcClientId = text(env, 'DASHBOARD_OIDC_CLIENT_ID');
  if (dashboardOidcClientId !== undefined) {
    if (jwtJwksUrl === undefined)
      throw new ConfigError('DASHBOARD_OIDC_CLIENT_ID needs JWT_JWKS_URL (the provider to trust)');
    // the dashboard finds the provider's endpoints from it, and allows requests to its origin
    url(env, 'JWT_ISSUER', ['https:', 'http:']);
    // the dashboard sends the ID token, issued to this client: any other audience refuses it
    if (text(env, 'JWT_AUDIENCE') !== dashboardOidcClientId)
      throw new ConfigError(
        'DASHBOARD_OIDC_CLIENT_ID must equal JWT_AUDIENCE (the dashboard sends ID tokens, whose audience is its client id)',
      );
  }
  const publicUrl = url(env, 'PUBLIC_URL', ['https:', 'http:']);
  if (publicUrl !== undefined && /[?#]/.test(publicUrl))
    throw new ConfigError('PUBLIC_URL must not have a query or a fragment');
  const logLevel = text(env, 'LOG_LEVEL') ?? 'info';
  if (!LOG_LEVELS.includes(logLevel))
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`);
  const logFormat = text(env, 'LOG_FORMAT');
  if (logFormat !== undefined && !(LOG_FORMATS as readonly string[]).includes(logFormat))
    throw new ConfigError(`LOG_FORMAT must be pretty or json, got "${logFormat}"`);
  const schema = text(env, 'DATABASE_SCHEMA');
  if (schema !== undefined && !/^[a-z_][a-z0-9_]{0,62}$/.test(schema))
    throw new ConfigError('DATABASE_SCHEMA must be a lower-case SQL identifier');
  return {
    http: {
      port: integer(env, 'PORT', 8080, 0, 65_535),
      // With the local secret, the service is one person's on one machine, not yet meant for the
      // network: loopback until HOST says otherwise.
      host: text(env, 'HOST') ?? (usesLocalSecret(env) ? '127.0.0.1' : '0.0.0.0'),
      publicUrl,
      trustProxy: trustProxy(env),
      maxBodyBytes: integer(env, 'MAX_BODY_BYTES', 5 * 1024 * 1024, 1_024, 1024 * 1024 * 1024),
      largeBodyBytes: integer(env, 'LARGE_BODY_BYTES', 256 * 1024, 1_024, 1024 * 1024 * 1024),
      // one core is the event loop's
      largeBodyWorkers: integer(
        env,
        'LARGE_BODY_WORKERS',
        Math.min(4, Math.max(1, availableParallelism() - 1)),
        0,
        64,
      ),
      largeBodyMaxPerAgent: integer(env, 'LARGE_BODY_MAX_PER_AGENT', 16, 1, 1_000),
      requestTimeoutMs: integer(env, 'REQUEST_TIMEOUT_MS', 30_000, 1_000, 600_000),
    },
    store: {
      dataDir: text(env, 'DATA_DIR') ?? './.flightlog',
      dataDirDurability: dataDirDurability(env),
      pgliteThread: pgliteThread(env),
      databaseUrl: url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']),
      databaseSchema: schema,
      poolSize: integer(env, 'DATABASE_POOL_SIZE', 10, 1, 1_000),
      statementTimeoutMs: integer(env, 'DATABASE_STATEMENT_TIMEOUT_MS', 10_000, 100, 600_000),
      ingestGroup: {
        maxBatches: integer(env, 'INGEST_GROUP_MAX_BATCHES', 32, 1, 1_000),
        ...(text(env, 'INGEST_GROUP_CONCURRENCY') === undefined
          ? {}
          : { concurrency: integer(env, 'INGEST_GROUP_CONCURRENCY', 1, 1, 1_000) }),
      },
    },
    auth: {
      adminToken,
      jwtSecret,
      shareSecret,
      jwtJwksUrl,
      jwtIssuer: text(env, 'JWT_ISSUER'),
      jwtAudience: text(env, 'JWT_AUDIENCE'),
      dashboardOidcClientId,
      apiKeyCacheMs: integer(env, 'API_KEY_CACHE_MS', 2_000, 0, 5_000),
      apiKeyMaxFailures: integer(env, 'API_KEY_MAX_FAILURES', 20, 1, 1_000_000),
      apiKeyFailureWindowMs: integer(env, 'API_KEY_FAILURE_WINDOW_MS', 60_000, 1_000, 86_400_000),
      agentCreators: agentCreators(env),
    },
    admission: {
      maxInFlight: integer(env, 'ADMISSION_MAX_IN_FLIGHT', 16, 1, 100_000),
      maxQueuedPerTenant: integer(env, 'ADMISSION_MAX_QUEUED_PER_TENANT', 32, 1, 1_000_000),
      maxQueued: integer(env, 'ADMISSION_MAX_QUEUED', 256, 1, 1_000_000),
      maxWaitMs: integer(env, 'ADMISSION_MAX_WAIT_MS', 10_000, 10, 600_000),
    },
    live: {
      redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
      redisPrefix: text(env, 'LIVE_REDIS_PREFIX') ?? 'flightlog:live:',
      heartbeatMs: integer(env, 'LIVE_HEARTBEAT_MS', 15_000, 100, 300_000),
      maxStreamsPerUser: integer(env, 'LIVE_MAX_STREAMS_PER_USER', 20, 1, 100_000),
      maxQueueBytes: integer(env, 'LIVE_MAX_QUEUE_BYTES', 1024 * 1024, 1_024, 1024 * 1024 * 1024),
      maxTotalQueueBytes: integer(
        env,
        'LIVE_MAX_TOTAL_QUEUE_BYTES',
        128 * 1024 * 1024,
        64 * 1024,
        64 * 1024 * 1024 * 1024,
      ),
      stallTimeoutMs: integer(env, 'LIVE_STALL_TIMEOUT_MS', 10_000, 100, 600_000),
      accessCheckMs: integer(env, 'LIVE_ACCESS_CHECK_MS', 2_000, 100, 4_000),
      retryMs: integer(env, 'LIVE_RETRY_MS', 3_000, 0, 600_000),
      publishTimeoutMs: integer(env, 'LIVE_PUBLISH_TIMEOUT_MS', 250, 1, 60_000),
      backlogMaxBytes: integer(
        env,
        'LIVE_BACKLOG_MAX_BYTES',
        64 * 1024 * 1024,
        1024,
        16 * 1024 * 1024 * 1024,
      ),
      bufferMaxBytes: integer(
        env,
        'LIVE_BUFFER_MAX_BYTES',
        256 * 1024 * 1024,
        1024 * 1024,
        64 * 1024 * 1024 * 1024,
      ),
      agentBufferMaxBytes: integer(
        env,
        'LIVE_AGENT_BUFFER_MAX_BYTES',
        LIVE_AGENT_BUFFER_MAX_BYTES,
        64 * 1024,
        64 * 1024 * 1024 * 1024,
      ),
    },
    analysis: analysisSettings(env),
    lifecycle: lifecycleSettings(env),
    anchoring: anchoringSettings(env),
    export: {
      maxPerUser: integer(env, 'EXPORT_MAX_PER_USER', 2, 1, 1_000),
      max: integer(env, 'EXPORT_MAX', 16, 1, 10_000),
      stallTimeoutMs: integer(env, 'EXPORT_STALL_TIMEOUT_MS', 60_000, 100, 3_600_000),
    },
    process: {
      logLevel,
      logFormat: logFormat as LogFormat | undefined,
      shutdownTimeoutMs: integer(env, 'SHUTDOWN_TIMEOUT_MS', 10_000, 100, 600_000),
      production: text(env, 'NODE_ENV') === 'production',
      startUpBanner:
        text(env, 'FLIGHTLOG_BANNER') === undefined
          ? undefined
          : onOff(env, 'FLIGHTLOG_BANNER', true),
      heapGrowingPercent: integer(env, 'HEAP_GROWING_PERCENT', HEAP_GROWING_PERCENT, 0, 300),
    },
  };
}
