import { describe, expect, it } from 'vitest';
import { ApiKeyResolver } from '../../src/auth/api-key-resolver.js';
import { hashSecret } from '../../src/auth/secrets.js';
import type { AgentStore } from '../../src/store/agent-store.js';

/** An in-memory key table standing in for the store (the real one is tested on both engines). */
function keyTable() {
  const keys = new Map<string, { agentId: string; keyId: string }>();
  let lookups = 0;
  const store = {
    async agentForKey(hash: string) {
      lookups++;
      return keys.get(hash);
    },
  } as unknown as AgentStore;
  return { keys, store, lookups: () => lookups };
}

describe('ApiKeyResolver', () => {
  it('reuses a lookup within the ttl and looks again after it (revocation delay = ttl)', async () => {
    let now = 1_000;
    const table = keyTable();
    table.keys.set(hashSecret('flk_a'), { agentId: 'agent-a', keyId: 'key_a' });
    const resolver = new ApiKeyResolver(table.store, {
      ttlMs: 2_000,
      maxEntries: 10,
      now: () => now,
    });
    expect(await resolver.resolve('flk_a')).toEqual({ agentId: 'agent-a', keyId: 'key_a' });
    table.keys.delete(hashSecret('flk_a')); // revoked elsewhere
    now += 1_999;
    expect(await resolver.resolve('flk_a')).toEqual({ agentId: 'agent-a', keyId: 'key_a' });
    now += 2;
    expect(await resolver.resolve('flk_a')).toBeUndefined();
    expect(table.lookups()).toBe(2);
  });

  it('caches unknown keys too, so guessing costs no database round trip within the ttl', async () => {
    const table = keyTable();
    const resolver = new ApiKeyResolver(table.store, {
      ttlMs: 2_000,
      maxEntries: 10,
      now: () => 0,
    });
    await resolver.resolve('flk_guess');
    await resolver.resolve('flk_guess');
    expect(table.lookups()).toBe(1);
  });

  it('shares one lookup between concurrent requests for the same key', async () => {
    const table = keyTable();
    table.keys.set(hashSecret('flk_b'), { agentId: 'b', keyId: 'key_b' });
    const resolver = new ApiKeyResolver(table.store, {
      ttlMs: 2_000,
      maxEntries: 10,
      now: () => 0,
    });
    await Promise.all([
      resolver.resolve('flk_b'),
      resolver.resolve('flk_b'),
      resolver.resolve('flk_b'),
    ]);
    expect(table.lookups()).toBe(1);
  });

  it('forgets a revoked key at once on this instance', async () => {
    const table = keyTable();
    table.keys.set(hashSecret('flk_c'), { agentId: 'c', keyId: 'key_c' });
    const resolver = new ApiKeyResolver(table.store, {
      ttlMs: 60_000,
      maxEntries: 10,
      now: () => 0,
    });
    await resolver.resolve('flk_c');
    table.keys.delete(hashSecret('flk_c'));
    resolver.forgetKey('key_c');
    expect(await resolver.resolve('flk_c')).toBeUndefined();
  });

  it('is bounded: the oldest entry goes first', async () => {
    const table = keyTable();
    const resolver = new ApiKeyResolver(table.store, {
      ttlMs: 60_000,
      maxEntries: 2,
      now: () => 0,
    });
    await resolver.resolve('k1');
    await resolver.resolve('k2');
    await resolver.resolve('k3'); // evicts k1
    await resolver.resolve('k2');
    expect(table.lookups()).toBe(3);
    await resolver.resolve('k1');
    expect(table.lookups()).toBe(4);
  });
});
