import type { AgentStore } from '../store/agent-store.js';
import { hashSecret } from './secrets.js';

export interface ResolvedKey {
  agentId: string;
  keyId: string;
}

interface CacheEntry {
  value: ResolvedKey | undefined;
  expiresAt: number;
}

export interface ApiKeyResolverOptions {
  /** How long a lookup (found or not) is reused. Bounds how late a revocation takes effect. */
  ttlMs: number;
  /** Entries kept at most; the oldest are dropped first. */
  maxEntries: number;
  now?: () => number;
}

/**
 * Resolves API keys to agents through a short-lived cache, so the hot ingest path does not pay
 * a database round trip per request, while a revoked key stops working within `ttlMs`.
 */
export class ApiKeyResolver {
  private readonly cache = new Map<string, CacheEntry>();
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
    const cached = this.cache.get(hash);
    if (cached && cached.expiresAt > this.now()) return cached.value;
    const pending = this.inFlight.get(hash);
    if (pending) return pending;
    const lookup = this.agents
      .agentForKey(hash)
      .then((value) => {
        this.remember(hash, value);
        return value;
      })
      .finally(() => this.inFlight.delete(hash));
    this.inFlight.set(hash, lookup);
    return lookup;
  }

  /** Drops every cached entry of a key id (used right after a revocation on this instance). */
  forgetKey(keyId: string): void {
    for (const [hash, entry] of this.cache)
      if (entry.value?.keyId === keyId) this.cache.delete(hash);
  }

  private remember(hash: string, value: ResolvedKey | undefined): void {
    this.cache.delete(hash);
    if (this.cache.size >= this.options.maxEntries) {
      const oldest = this.cache.keys().next();
      if (!oldest.done) this.cache.delete(oldest.value);
    }
    this.cache.set(hash, { value, expiresAt: this.now() + this.options.ttlMs });
  }
}
