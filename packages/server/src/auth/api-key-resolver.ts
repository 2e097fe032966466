import type { AgentStore } from '../store/agent-store.js';
import type { KeyGuessLimiter } from './key-guess-limiter.js';
import { hashSecret } from './secrets.js';

export interface ResolvedKey {
  agentId: string;
  keyId: string;
}

/** The outcome of authenticating one request's API key. */
export type KeyCheck =
  | { kind: 'valid'; key: ResolvedKey }
  /** An unknown, revoked or malformed key. */
  | { kind: 'refused'; reason: 'unknown' }
  /** The client address failed too often: a key that is not valid is refused unexamined. */
  | { kind: 'refused'; reason: 'too-many-failures'; retryAfterSeconds: number };

interface CacheEntry {
  value: ResolvedKey;
  expiresAt: number;
}

export interface ApiKeyResolverOptions {
  /** How long a lookup (found or not) is reused. Bounds how late a revocation takes effect. */
  ttlMs: number;
  /** Entries kept at most, of found keys and of unknown ones each; the oldest are dropped first. */
  maxEntries: number;
  now?: () => number;
  /** Limits failed authentications per client address in `authenticate` (no limit without). */
  guesses?: KeyGuessLimiter;
  /** Told after every lookup in the store whether it found the key. */
  onLookup?: (found: boolean) => void;
}

/** The only shape of an API key (`flk_` + 256 random bits in base64url); nothing else is looked up. */
const API_KEY = /^flk_[A-Za-z0-9_-]{43}$/;

const UNKNOWN: KeyCheck = { kind: 'refused', reason: 'unknown' };

/**
 * Resolves API keys to agents through a short-lived cache, so the hot ingest path does not pay
 * a database round trip per request, while a revoked key stops working within `ttlMs`. Found
 * and unknown keys are cached apart, so a flood of wrong keys never pushes a valid one out.
 */
export class ApiKeyResolver {
  private readonly found = new Map<string, CacheEntry>();
  /** Hashes of keys the store did not know, with when that answer expires. */
  private readonly missed = new Map<string, number>();
  private readonly inFlight = new Map<string, Promise<ResolvedKey | undefined>>();
  private readonly now: () => number;

  constructor(
    private readonly agents: AgentStore,
    private readonly options: ApiKeyResolverOptions,
  ) {
    this.now = options.now ?? Date.now;
  }

  async resolve(apiKey: string): Promise<ResolvedKey | undefined> {
    const hash = hashSecret(apiKey);
    const now = this.now();
    const found = this.found.get(hash);
    if (found && found.expiresAt > now) return found.value;
    if ((this.missed.get(hash) ?? 0) > now) return undefined;
    return this.lookUp(hash);
  }

  /**
   * Authenticates the API key of a request from `address` (the credential as sent; an empty
   * string for an `Authorization` header without one). A key found valid within `ttlMs` passes
   * at once, whatever the address: one hash and one map lookup. Anything else counts as a
   * failure of the address unless the store finds the key valid. An address past its limit gets
   * `too-many-failures` without the store being asked, except for a key this instance has found
   * valid before, which is looked up again (it is no guess: only its revocation is in question),
   * so an agent behind the same address as a guesser keeps working.
   */
  async authenticate(credential: string, address: string): Promise<KeyCheck> {
    const hash = hashSecret(credential);
    const now = this.now();
    const found = this.found.get(hash);
    if (found && found.expiresAt > now) return { kind: 'valid', key: found.value };
    const limiter = this.options.guesses;
    const blocked = limiter?.retryAfterSeconds(address) ?? 0;
    if (blocked > 0 && !found)
      return { kind: 'refused', reason: 'too-many-failures', retryAfterSeconds: blocked };
    if (!API_KEY.test(credential) || (this.missed.get(hash) ?? 0) > now) {
      limiter?.recordFailure(address);
      return UNKNOWN;
    }
    // Counted before the lookup, so that concurrent guesses cannot outrun the limit; once per
    // key: requests that join a lookup of the same key under way guess nothing more (an agent's
    // first batches sent at once while the store is slow are one key, not a guessing spree).
    const counted = !found && !this.inFlight.has(hash);
    if (counted) limiter?.recordFailure(address);
    let value: ResolvedKey | undefined;
    try {
      value = await this.lookUp(hash);
    } catch (error) {
      if (counted) limiter?.withdrawFailure(address); // the store failed, not the key
      throw error;
    }
    if (value) {
      if (counted) limiter?.withdrawFailure(address);
      return { kind: 'valid', key: value };
    }
    if (!limiter) return UNKNOWN;
    if (found) limiter.recordFailure(address); // revoked since this instance last saw it
    const retryAfterSeconds = blocked > 0 ? limiter.retryAfterSeconds(address) : 0;
    return retryAfterSeconds > 0
      ? { kind: 'refused', reason: 'too-many-failures', retryAfterSeconds }
      : UNKNOWN;
  }

  /** Drops every cached entry of a key id (used right after a revocation on this instance). */
  forgetKey(keyId: string): void {
    for (const [hash, entry] of this.found)
      if (entry.value.keyId === keyId) this.found.delete(hash);
  }

  /** Drops every cached key of an agent (used right after deleting it on this instance). */
  forgetAgent(agentId: string): void {
    for (const [hash, entry] of this.found)
      if (entry.value.agentId === agentId) this.found.delete(hash);
  }

  private lookUp(hash: string): Promise<ResolvedKey | undefined> {
    const pending = this.inFlight.get(hash);
    if (pending) return pending;
    const lookup = this.agents
      .agentForKey(hash)
      .then((value) => {
        this.options.onLookup?.(value !== undefined);
        this.remember(hash, value);
        return value;
      })
      .finally(() => this.inFlight.delete(hash));
    this.inFlight.set(hash, lookup);
    return lookup;
  }

  private remember(hash: string, value: ResolvedKey | undefined): void {
    const expiresAt = this.now() + this.options.ttlMs;
    if (value) {
      this.missed.delete(hash);
      setBounded(this.found, hash, { value, expiresAt }, this.options.maxEntries);
    } else {
      this.found.delete(hash);
      setBounded(this.missed, hash, expiresAt, this.options.maxEntries);
    }
  }
}

/** Sets `key` as the newest entry of `map`, dropping the oldest when `map` is full. */
function setBounded<V>(map: Map<string, V>, key: string, value: V, maxEntries: number): void {
  map.delete(key);
  if (map.size >= maxEntries) {
    const oldest = map.keys().next();
    if (!oldest.done) map.delete(oldest.value);
  }
  map.set(key, value);
}
