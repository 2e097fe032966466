import { TEXT_MAX_LENGTH, isIdentifier } from '@flightlog/protocol';
import type { TraceIdentity } from './active-session.js';
import { INSTANT_RANGE, dateMs } from './instants.js';
import type { SessionOptions } from './session-types.js';
import type { Environment } from './settings.js';
import { errorText, isStorableText, storableText } from './storable-text.js';

/*
 * What the host passes per run — startSession's options and completeTrace's body — cleaned the
 * way resolveSettings cleans the client's settings: never a throw, each unusable value reported
 * and replaced by its default.
 */

const TAG_MAX = 256;
const MAX_TAGS = 256;

/** What a session falls back on: the client's settings and its id source. */
export interface SessionDefaults {
  agentId: string;
  environment: Environment | undefined;
  ids: { next(): string };
}

/** One property of the host's object, or what its getter threw. */
function readProperty(
  object: object,
  key: string,
): { kind: 'read'; value: unknown } | { kind: 'threw'; error: unknown } {
  try {
    return { kind: 'read', value: (object as Record<string, unknown>)[key] };
  } catch (error) {
    return { kind: 'threw', error };
  }
}

/**
 * completeTrace's body as sent: dates as ISO text, texts cut to what the service stores. What
 * cannot be read is sent as a body the service refuses, so the call fails with its 400.
 */
export function completeBodyFrom(options: unknown): Record<string, unknown> {
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object') return { invalid: options };
  let body: Record<string, unknown>;
  try {
    body = { ...(options as Record<string, unknown>) };
  } catch (error) {
    // A getter that throws: the body is refused like any other invalid one.
    return { unreadable: errorText(error, 200) };
  }
  if (typeof body.endedAt === 'object' && body.endedAt !== null) {
    // A Date the service cannot store (or a Proxy, or a subclass's odd getTime) is sent as text
    // the service refuses, so the call fails with its 400 instead of throwing here.
    const ms = dateMs(body.endedAt);
    body.endedAt = ms === undefined ? 'invalid date' : new Date(ms).toISOString();
  }
  for (const key of ['outputSummary', 'errorMessage'])
    if (typeof body[key] === 'string')
      body[key] = storableText(body[key] as string, TEXT_MAX_LENGTH);
  return body;
}

/**
 * Checks the session options; anything unusable is reported and replaced by its default. Each
 * option is read once, and a getter that throws counts as an unusable value, so options the host
 * built oddly cost a warning, never the session.
 */
export function sessionIdentityFrom(
  input: unknown,
  defaults: SessionDefaults,
  warn: (message: string) => void,
): TraceIdentity {
  const isObject = typeof input === 'object' && input !== null;
  if (!isObject) warn('options must be an object');
  const read = (key: keyof SessionOptions): unknown => {
    if (!isObject) return undefined;
    const outcome = readProperty(input, key);
    if (outcome.kind === 'read') return outcome.value;
    warn(`reading ${key} threw (${errorText(outcome.error, 200)}); it is ignored`);
    return undefined;
  };
  const options = {
    traceId: read('traceId'),
    inputSummary: read('inputSummary'),
    agentId: read('agentId'),
    startedAt: read('startedAt'),
    tags: read('tags'),
  };

  let traceId: string;
  if (typeof options.traceId === 'string' && isIdentifier(options.traceId))
    traceId = options.traceId;
  else {
    if (options.traceId !== undefined)
      warn('traceId must be 1–128 characters of A–Z a–z 0–9 . _ : ~ -; a ULID is used');
    traceId = defaults.ids.next();
  }

  let inputSummary: string;
  if (typeof options.inputSummary === 'string') {
    inputSummary = storableText(options.inputSummary, TEXT_MAX_LENGTH);
    if (options.inputSummary.length > TEXT_MAX_LENGTH)
      warn('inputSummary is cut to 65,536 UTF-16 code units');
  } else {
    warn('inputSummary is required');
    inputSummary = '(no inputSummary)';
  }

  let agentId = defaults.agentId;
  if (options.agentId !== undefined) {
    if (isStorableText(options.agentId, 128)) agentId = options.agentId;
    else warn(`agentId must be 1–128 characters of text; "${agentId}" is used`);
  }

  let startedAtMs = Date.now();
  if (options.startedAt !== undefined) {
    const ms = dateMs(options.startedAt);
    if (ms !== undefined) startedAtMs = ms;
    else warn(`startedAt must be a valid Date (${INSTANT_RANGE}); now is used`);
  }

  return {
    traceId,
    agentId,
    inputSummary,
    tags: tagsFrom(options.tags, defaults.environment, warn),
    startedAtMs,
  };
}

/**
 * The trace's tags: `env:<environment>` first when set, then the host's, cleaned, de-duplicated
 * (a Set: linear, whatever the host passes) and capped at 256 — the walk stops at the first tag
 * past the cap, so a huge array costs no more than its first few hundred distinct tags.
 */
function tagsFrom(
  input: unknown,
  environment: Environment | undefined,
  warn: (message: string) => void,
): string[] {
  const tags: string[] = [];
  const seen = new Set<string>();
  if (environment !== undefined) {
    const env = `env:${environment}`;
    tags.push(env);
    seen.add(env);
  }
  if (input === undefined) return tags;
  if (!Array.isArray(input)) {
    warn('tags must be an array of strings');
    return tags;
  }
  let nonString = false;
  try {
    const list = input as unknown[];
    for (let i = 0; i < list.length; i++) {
      const tag = list[i];
      if (typeof tag !== 'string') {
        nonString = true;
        continue;
      }
      const text = storableText(tag, TAG_MAX);
      if (seen.has(text)) continue;
      if (tags.length >= MAX_TAGS) {
        warn(`at most ${MAX_TAGS} tags are kept; the rest are left out`);
        break;
      }
      seen.add(text);
      tags.push(text);
    }
  } catch (error) {
    warn(`tags could not be read (${errorText(error, 200)}); the ones read so far are kept`);
  }
  if (nonString) warn('tags must be strings; a non-string tag is left out');
  return tags;
}
