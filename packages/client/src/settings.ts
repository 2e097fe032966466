import { createConsoleLogger, type FlightlogLogger } from './logger.js';
import { redactAddress, redactUrls } from './redact.js';
import { isStorableText } from './storable-text.js';

/** Chain environments the spec allows for the `environment` setting. */
export const ENVIRONMENTS = ['devnet', 'mainnet'] as const;
/** A chain environment: `devnet` or `mainnet`. */
export type Environment = (typeof ENVIRONMENTS)[number];

/** Retry schedule of requests that may succeed later (network errors, timeouts, 408, 429, 5xx). */
export interface RetrySettings {
  /** Delay before the first retry, in ms, before jitter (1 to 600000; more is clamped). Default 250. */
  initialDelayMs?: number;
  /**
   * Largest delay between two attempts, in ms; 1 to 3600000, more is clamped. Default 30000. A
   * server's `Retry-After` lengthens a delay up to this, never shortens it below the backoff.
   */
  maxDelayMs?: number;
  /** Attempts per request, the first included, before the batch is given up (1 to 1000). Default 10. */
  maxAttempts?: number;
}

/**
 * Settings of a {@link FlightlogClient}. The first nine are the spec's; the rest bound what the
 * client may cost its host. Wrong values never throw: each is reported through `logger.warn` and
 * replaced by its default (or, for `apiKey` and `ingestUrl`, the client disables itself).
 */
export interface FlightlogSettings {
  /**
   * Agent API key (`flk_…`), sent as `Authorization: Bearer`. Required, no default: an empty
   * string, or a key with a character other than visible ASCII (a pasted space, newline or
   * zero-width character), disables the client with one warning.
   */
  apiKey: string;
  /** Agent identifier put on every trace, and matched with `verifyToken`. Default `unknown`. */
  agentId?: string;
  /**
   * One-time onboarding token, sent together with `agentId` with the first batch, and with the
   * next ones until a batch carrying it is acknowledged (a batch lost on the way does not use it
   * up). Ignored, with a warning, when `agentId` is not set. Default: none.
   */
  verifyToken?: string;
  /**
   * Address of the ingest service (a path prefix is kept; an IPv6 literal is written in brackets,
   * `http://[::1]:8080`). One with credentials or a query is refused (the client disables itself)
   * and echoed in the warning without them. Default `http://localhost:8080`.
   */
  ingestUrl?: string;
  /**
   * Chain environment, `devnet` or `mainnet`; travels as the tag `env:<environment>` on every
   * trace. Any other value is reported and not sent. Default: none.
   */
  environment?: Environment | (string & Record<never, never>);
  /** `false` makes every call a cheap no-op and sends nothing. Default `true`. */
  enabled?: boolean;
  /**
   * Milliseconds between automatic flushes, 1 to 3600000 (one hour); a larger value, `Infinity`
   * included, is clamped to one hour with a warning. Default 250.
   */
  flushIntervalMs?: number;
  /**
   * Buffer size in bytes (estimated JSON: payloads by their characters as recorded, plus each
   * trace's snapshot), 1024 to 67108864; a flush happens before it would be exceeded. Default
   * 102400.
   */
  maxBufferBytes?: number;
  /**
   * Receives the client's warnings. Repeated conditions are throttled before they get here (one
   * line per kind per 10 s, the next carrying `repeatsSinceLastWarning`; `close()` names what is
   * still held back), and URLs in them never carry credentials. A `warn` that throws, or an async
   * one that rejects, is ignored. Default: `console.warn` with a `[flightlog]` prefix, at most 20
   * lines a minute.
   */
  logger?: FlightlogLogger;
  /** Time allowed for one HTTP request, in ms (1 to 600000; more is clamped). Default 10000. */
  requestTimeoutMs?: number;
  /**
   * Longest `flush()` and `close()` wait when called without a timeout, and longest the exit
   * flush (`flushOnExit`) keeps the process up, in ms (0 to 3600000; more is clamped).
   * Default 10000.
   */
  flushTimeoutMs?: number;
  /**
   * Bytes of flushed batches that may wait for the service (while it is slow or down). Past it the
   * oldest waiting batch is dropped and counted in `stats().droppedEvents`. 0 to 1 GiB, never
   * less than `maxBufferBytes`. Default 5242880 (5 MiB).
   */
  maxBacklogBytes?: number;
  /**
   * Largest payload of one event: the UTF-8 bytes of its JSON as sent, escapes included (a
   * control character's `\u00XX` counts 6), 1024 to 67108864. A larger payload is replaced by
   * a `{truncated: true, …}` marker with a warning. Default 1048576 (1 MiB).
   */
  maxEventBytes?: number;
  /** Retry schedule; see {@link RetrySettings}. */
  retry?: RetrySettings;
  /**
   * Send what is still buffered when the process is about to exit on its own (Node's
   * `beforeExit`), for programs that never call `close()`. While that delivery is pending (a
   * request, retries after a 429 or 503), the process is kept up for at most `flushTimeoutMs`;
   * then the request in flight is aborted, one warning says how many events were not delivered,
   * and the process exits. `false`: nothing of the client holds the process, not even a request
   * in flight. Default `true`.
   */
  flushOnExit?: boolean;
}

/** Settings after defaults and validation. */
export interface ResolvedSettings {
  apiKey: string;
  agentId: string;
  /** True when `agentId` was given (the verify token needs it). */
  agentIdSet: boolean;
  verifyToken: string | undefined;
  ingestUrl: string;
  environment: Environment | undefined;
  flushIntervalMs: number;
  maxBufferBytes: number;
  logger: FlightlogLogger;
  requestTimeoutMs: number;
  flushTimeoutMs: number;
  maxBacklogBytes: number;
  maxEventBytes: number;
  retry: Required<RetrySettings>;
  flushOnExit: boolean;
}

/** Defaults of the settings that have one (see {@link FlightlogSettings}). */
export const DEFAULTS = {
  agentId: 'unknown',
  ingestUrl: 'http://localhost:8080',
  flushIntervalMs: 250,
  maxBufferBytes: 102_400,
  requestTimeoutMs: 10_000,
  flushTimeoutMs: 10_000,
  maxBacklogBytes: 5 * 1024 * 1024,
  maxEventBytes: 1024 * 1024,
  retry: { initialDelayMs: 250, maxDelayMs: 30_000, maxAttempts: 10 },
} as const;

/** The checked settings, or why the client is disabled; with the warnings to report either way. */
export type SettingsResolution =
  | { kind: 'enabled'; settings: ResolvedSettings; warnings: string[] }
  | { kind: 'disabled'; logger: FlightlogLogger; warnings: string[] };

const KNOWN = new Set<string>([
  'apiKey',
  'agentId',
  'verifyToken',
  'ingestUrl',
  'environment',
  'enabled',
  'flushIntervalMs',
  'maxBufferBytes',
  'logger',
  'requestTimeoutMs',
  'flushTimeoutMs',
  'maxBacklogBytes',
  'maxEventBytes',
  'retry',
  'flushOnExit',
]);

function isLogger(value: unknown): value is FlightlogLogger {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { warn?: unknown }).warn === 'function'
  );
}

/** How a numeric setting is checked. */
interface NumberRule {
  fallback: number;
  min: number;
  max: number;
  /** Whole numbers only (default true). */
  integer?: boolean;
  /**
   * A delay: past its maximum, `Infinity` included, it is reported and clamped to the maximum:
   * whoever asks for a very long interval wants a long one, and a timer given more than
   * 2^31 − 1 ms would fire after 1 ms instead, in a loop.
   */
  delay?: boolean;
}

const MIB = 1024 * 1024;

/** The numeric settings and their ranges. */
const NUMBER_RULES = {
  flushIntervalMs: {
    fallback: DEFAULTS.flushIntervalMs,
    min: 1,
    max: 3_600_000,
    integer: false,
    delay: true,
  },
  maxBufferBytes: { fallback: DEFAULTS.maxBufferBytes, min: 1_024, max: 64 * MIB },
  maxBacklogBytes: { fallback: DEFAULTS.maxBacklogBytes, min: 0, max: 1024 * MIB },
  requestTimeoutMs: { fallback: DEFAULTS.requestTimeoutMs, min: 1, max: 600_000, delay: true },
  flushTimeoutMs: { fallback: DEFAULTS.flushTimeoutMs, min: 0, max: 3_600_000, delay: true },
  maxEventBytes: { fallback: DEFAULTS.maxEventBytes, min: 1_024, max: 64 * MIB },
  'retry.initialDelayMs': {
    fallback: DEFAULTS.retry.initialDelayMs,
    min: 1,
    max: 600_000,
    delay: true,
  },
  'retry.maxDelayMs': { fallback: DEFAULTS.retry.maxDelayMs, min: 1, max: 3_600_000, delay: true },
  'retry.maxAttempts': { fallback: DEFAULTS.retry.maxAttempts, min: 1, max: 1_000 },
} satisfies Record<string, NumberRule>;

/**
 * A numeric setting: its fallback when absent; checked against its range (and wholeness). A
 * wrong value is reported and replaced by the fallback, except a delay past its maximum (see
 * NumberRule.delay).
 */
function number(warnings: string[], name: keyof typeof NUMBER_RULES, value: unknown): number {
  const rule: NumberRule = NUMBER_RULES[name];
  const { fallback, min, max } = rule;
  const integer = rule.integer ?? true;
  if (value === undefined) return fallback;
  if (rule.delay === true && typeof value === 'number' && value > max) {
    warnings.push(`${name} must be at most ${max}; got ${describe(value)}, using ${max}`);
    return max;
  }
  const ok =
    typeof value === 'number' &&
    Number.isFinite(value) &&
    value >= min &&
    value <= max &&
    (!integer || Number.isInteger(value));
  if (ok) return value;
  warnings.push(
    `${name} must be ${integer ? 'a whole number' : 'a number'} from ${min} to ${max}; got ${describe(value)}, using ${fallback}`,
  );
  return fallback;
}

/**
 * A wrong value as a warning shows it: text cut to `maxLength` characters, URL credentials
 * removed first (a cut after them could leave half a password in the line).
 */
function describe(value: unknown, maxLength = 40, redact = redactUrls): string {
  if (typeof value === 'string') return JSON.stringify(redact(value).slice(0, maxLength));
  if (typeof value === 'object') return value === null ? 'null' : 'an object';
  return String(value);
}

/** Resolves a URL against which `/v1/...` paths are appended; undefined when it is unusable. */
function baseUrl(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  if (url.search || url.hash || url.username || url.password) return undefined;
  return url.href.replace(/\/+$/, '');
}

/** Characters an API key may hold: visible ASCII, what an `Authorization` header carries as is. */
const KEY_CHARACTER = /^[\x21-\x7e]$/;

/**
 * Why `apiKey` cannot go into an `Authorization: Bearer` header, or undefined when it can. Keys
 * are visible ASCII; anything else (a zero-width space or a non-breaking space pasted with the
 * key, a trailing newline, a letter outside ASCII) would make every request fail, so it is
 * refused up front, naming the character.
 */
function apiKeyProblem(apiKey: string): string | undefined {
  if (apiKey.length > 1024) return 'is longer than 1024 characters';
  for (let i = 0; i < apiKey.length; i++) {
    const character = apiKey.charAt(i);
    if (!KEY_CHARACTER.test(character)) {
      const code = apiKey.codePointAt(i) ?? 0;
      const name = `U+${code.toString(16).toUpperCase().padStart(4, '0')}`;
      return `holds a character HTTP headers cannot carry (${name} at position ${i + 1}; keys are visible ASCII, check for pasted spaces or invisible characters)`;
    }
  }
  return undefined;
}

/** The logger setting, or the console's (with a warning when the given one is unusable). */
function resolveLogger(value: unknown, warnings: string[]): FlightlogLogger {
  if (value === undefined) return createConsoleLogger();
  if (isLogger(value)) return value;
  warnings.push('logger must have a warn(message, context) method; using console.warn');
  return createConsoleLogger();
}

/** Where and with which key the client sends; undefined (with a warning) disables it. */
function resolveConnection(
  raw: Record<string, unknown>,
  warnings: string[],
): { apiKey: string; ingestUrl: string } | undefined {
  const apiKey = raw.apiKey;
  if (typeof apiKey !== 'string' || apiKey.trim() === '') {
    warnings.push(
      typeof apiKey === 'string'
        ? 'apiKey is empty; the client is disabled and sends nothing'
        : 'apiKey is missing; the client is disabled and sends nothing',
    );
    return undefined;
  }
  const keyProblem = apiKeyProblem(apiKey);
  if (keyProblem !== undefined) {
    warnings.push(`apiKey ${keyProblem}; the client is disabled and sends nothing`);
    return undefined;
  }
  if (raw.ingestUrl === undefined) return { apiKey, ingestUrl: DEFAULTS.ingestUrl };
  const ingestUrl = typeof raw.ingestUrl === 'string' ? baseUrl(raw.ingestUrl) : undefined;
  if (ingestUrl === undefined) {
    warnings.push(
      `ingestUrl must be an http(s) URL without query or credentials; got ${describe(raw.ingestUrl, 200, redactAddress)}; the client is disabled`,
    );
    return undefined;
  }
  return { apiKey, ingestUrl };
}

/** Who the traces are from: the agent, its verification token, its environment. */
function resolveIdentity(
  raw: Record<string, unknown>,
  warnings: string[],
): Pick<ResolvedSettings, 'agentId' | 'agentIdSet' | 'verifyToken' | 'environment'> {
  let agentId: string = DEFAULTS.agentId;
  let agentIdSet = false;
  if (raw.agentId !== undefined) {
    if (isStorableText(raw.agentId, 128)) {
      agentId = raw.agentId;
      agentIdSet = true;
    } else
      warnings.push(
        `agentId must be 1 to 128 characters of text; got ${describe(raw.agentId)}, using "unknown"`,
      );
  }

  let verifyToken: string | undefined;
  if (raw.verifyToken !== undefined) {
    if (typeof raw.verifyToken !== 'string' || raw.verifyToken === '')
      warnings.push('verifyToken must be a non-empty string; it is ignored');
    else if (raw.verifyToken.length > 1024)
      warnings.push('verifyToken is longer than 1024 characters; it is ignored');
    else if (!agentIdSet)
      warnings.push('verifyToken is ignored because agentId is not set (the token needs it)');
    else verifyToken = raw.verifyToken;
  }

  let environment: Environment | undefined;
  if (raw.environment !== undefined) {
    if ((ENVIRONMENTS as readonly unknown[]).includes(raw.environment))
      environment = raw.environment as Environment;
    else
      warnings.push(
        `environment must be "devnet" or "mainnet"; got ${describe(raw.environment)}, not sent`,
      );
  }
  return { agentId, agentIdSet, verifyToken, environment };
}

/** The retry schedule (its maximum delay never under its first). */
function resolveRetry(value: unknown, warnings: string[]): Required<RetrySettings> {
  const retry: Record<string, unknown> =
    typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
  if (value !== undefined && retry !== value)
    warnings.push('retry must be an object; using the default schedule');
  const initialDelayMs = number(warnings, 'retry.initialDelayMs', retry.initialDelayMs);
  return {
    initialDelayMs,
    maxDelayMs: Math.max(initialDelayMs, number(warnings, 'retry.maxDelayMs', retry.maxDelayMs)),
    maxAttempts: number(warnings, 'retry.maxAttempts', retry.maxAttempts),
  };
}

/**
 * Applies defaults and checks every setting. Never throws: `settings` may be anything a
 * JavaScript caller passes. Returns the warnings to report (each once).
 */
export function resolveSettings(input: unknown): SettingsResolution {
  const warnings: string[] = [];
  const raw: Record<string, unknown> =
    typeof input === 'object' && input !== null ? (input as Record<string, unknown>) : {};
  if (raw !== input) warnings.push('settings must be an object; the client is disabled');
  const logger = resolveLogger(raw.logger, warnings);
  if (raw !== input) return { kind: 'disabled', logger, warnings };

  for (const key of Object.keys(raw))
    if (!KNOWN.has(key)) warnings.push(`unknown setting "${key}" is ignored`);

  if (raw.enabled !== undefined && typeof raw.enabled !== 'boolean')
    warnings.push(`enabled must be a boolean; got ${describe(raw.enabled)}, using true`);
  if (raw.enabled === false) return { kind: 'disabled', logger, warnings };

  const connection = resolveConnection(raw, warnings);
  if (connection === undefined) return { kind: 'disabled', logger, warnings };
  const identity = resolveIdentity(raw, warnings);

  if (raw.flushOnExit !== undefined && typeof raw.flushOnExit !== 'boolean')
    warnings.push(`flushOnExit must be a boolean; got ${describe(raw.flushOnExit)}, using true`);
  const flushIntervalMs = number(warnings, 'flushIntervalMs', raw.flushIntervalMs);
  const maxBufferBytes = number(warnings, 'maxBufferBytes', raw.maxBufferBytes);
  const maxBacklogBytes = Math.max(
    maxBufferBytes,
    number(warnings, 'maxBacklogBytes', raw.maxBacklogBytes),
  );
  const retry = resolveRetry(raw.retry, warnings);
  return {
    kind: 'enabled',
    warnings,
    settings: {
      ...connection,
      ...identity,
      flushIntervalMs,
      maxBufferBytes,
      logger,
      requestTimeoutMs: number(warnings, 'requestTimeoutMs', raw.requestTimeoutMs),
      flushTimeoutMs: number(warnings, 'flushTimeoutMs', raw.flushTimeoutMs),
      maxBacklogBytes,
      maxEventBytes: number(warnings, 'maxEventBytes', raw.maxEventBytes),
      retry,
      flushOnExit: raw.flushOnExit !== false,
    },
  };
}
