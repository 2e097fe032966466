import { describe, expect, it } from 'vitest';
import { ApiKeyResolver } from '../../src/auth/api-key-resolver.js';
import { KeyGuessLimiter } from '../../src/auth/key-guess-limiter.js';
import { generateApiKey, hashSecret } from '../../src/auth/secrets.js';
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

  it('forgets every key of a deleted agent at once, and only those', async () => {
    const table = keyTable();
    table.keys.set(hashSecret('flk_d1'), { agentId: 'd', keyId: 'key_d1' });
    table.keys.set(hashSecret('flk_d2'), { agentId: 'd', keyId: 'key_d2' });
    table.keys.set(hashSecret('flk_e'), { agentId: 'e', keyId: 'key_e' });
    const resolver = new ApiKeyResolver(table.store, {
      ttlMs: 60_000,
      maxEntries: 10,
      now: () => 0,
    });
    for (const key of ['flk_d1', 'flk_d2', 'flk_e']) await resolver.resolve(key);
    table.keys.delete(hashSecret('flk_d1'));
    table.keys.delete(hashSecret('flk_d2'));
    resolver.forgetAgent('d');
    expect(await resolver.resolve('flk_d1')).toBeUndefined();
    expect(await resolver.resolve('flk_d2')).toBeUndefined();
    const lookups = table.lookups();
    expect(await resolver.resolve('flk_e')).toEqual({ agentId: 'e', keyId: 'key_e' });
    expect(table.lookups(), "the other agent's key is still cached").toBe(lookups);
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

/** A resolver with a guess limiter (3 failures per 60 s), both on a clock moved by hand. */
function guarded(table: ReturnType<typeof keyTable>, maxEntries = 100) {
  const clock = { now: 1_000 };
  const now = () => clock.now;
  const resolver = new ApiKeyResolver(table.store, {
    ttlMs: 2_000,
    maxEntries,
    now,
    guesses: new KeyGuessLimiter({ maxFailures: 3, windowMs: 60_000, maxAddresses: 100, now }),
  });
  return { resolver, clock };
}

const ADDRESS = '203.0.113.5';

describe('ApiKeyResolver.authenticate', () => {
  it('refuses an address past its failures without asking the store, but lets known valid keys through', async () => {
    const table = keyTable();
    const valid = generateApiKey();
    table.keys.set(hashSecret(valid), { agentId: 'a', keyId: 'key_a' });
    const { resolver, clock } = guarded(table);
    expect(await resolver.authenticate(valid, ADDRESS)).toMatchObject({ kind: 'valid' });
    for (let i = 0; i < 3; i++)
      expect(await resolver.authenticate(generateApiKey(), ADDRESS)).toEqual({
        kind: 'refused',
        reason: 'unknown',
      });
    const lookups = table.lookups();
    expect(await resolver.authenticate(generateApiKey(), ADDRESS)).toEqual({
      kind: 'refused',
      reason: 'too-many-failures',
      retryAfterSeconds: 60,
    });
    expect(table.lookups()).toBe(lookups);
    // another address is not concerned
    expect(await resolver.authenticate(generateApiKey(), '203.0.113.6')).toMatchObject({
      reason: 'unknown',
    });
    // a valid key passes from the refused address, from the cache...
    expect(await resolver.authenticate(valid, ADDRESS)).toMatchObject({ kind: 'valid' });
    // ...and once its cache entry expired too: a key seen valid is no guess
    clock.now += 2_000;
    expect(await resolver.authenticate(valid, ADDRESS)).toMatchObject({ kind: 'valid' });
    // a valid key this instance never saw is indistinguishable from a guess: it waits
    const unseen = generateApiKey();
    table.keys.set(hashSecret(unseen), { agentId: 'a', keyId: 'key_b' });
    expect(await resolver.authenticate(unseen, ADDRESS)).toMatchObject({
      reason: 'too-many-failures',
      retryAfterSeconds: 58,
    });
    clock.now += 58_000; // the window (from the first failure) has ended
    expect(await resolver.authenticate(generateApiKey(), ADDRESS)).toMatchObject({
      reason: 'unknown',
    });
    expect(await resolver.authenticate(unseen, ADDRESS)).toMatchObject({ kind: 'valid' });
  });

  it('counts malformed keys and cached misses without a lookup', async () => {
    const table = keyTable();
    const { resolver } = guarded(table);
    const wrong = generateApiKey();
    expect(await resolver.authenticate('', ADDRESS)).toMatchObject({ reason: 'unknown' });
    expect(await resolver.authenticate('flk_short', ADDRESS)).toMatchObject({ reason: 'unknown' });
    expect(await resolver.authenticate(wrong, ADDRESS)).toMatchObject({ reason: 'unknown' });
    expect(table.lookups()).toBe(1);
    expect(await resolver.authenticate(wrong, ADDRESS)).toMatchObject({
      reason: 'too-many-failures',
    });
    expect(table.lookups()).toBe(1);
  });

  it('lets no more lookups through than the limit, however many guesses arrive at once', async () => {
    const table = keyTable();
    const { resolver } = guarded(table);
    const results = await Promise.all(
      Array.from({ length: 50 }, () => resolver.authenticate(generateApiKey(), ADDRESS)),
    );
    expect(table.lookups()).toBe(3);
    expect(results.filter((r) => r.kind === 'refused' && r.reason === 'unknown')).toHaveLength(3);
    expect(
      results.filter((r) => r.kind === 'refused' && r.reason === 'too-many-failures'),
    ).toHaveLength(47);
  });

  it('counts one key sent many times at once as one attempt: a valid key waiting on a slow store is never refused', async () => {
    const table = keyTable();
    const valid = generateApiKey();
    table.keys.set(hashSecret(valid), { agentId: 'agent-a', keyId: 'key_a' });
    let release!: () => void;
    const slow = new Promise<void>((resolve) => (release = resolve));
    const agentForKey = table.store.agentForKey.bind(table.store);
    table.store.agentForKey = async (hash: string) => {
      await slow;
      return agentForKey(hash);
    };
    const { resolver } = guarded(table);
    const wrong = generateApiKey();
    const checks = Promise.all([
      ...Array.from({ length: 20 }, () => resolver.authenticate(valid, ADDRESS)),
      ...Array.from({ length: 20 }, () => resolver.authenticate(wrong, ADDRESS)),
    ]);
    release();
    const results = await checks;
    expect(results.slice(0, 20).every((r) => r.kind === 'valid')).toBe(true);
    expect(results.slice(20).every((r) => r.kind === 'refused' && r.reason === 'unknown')).toBe(
      true,
    );
    expect(table.lookups()).toBe(2);
    // the wrong key counted once: two more distinct guesses reach the limit, not zero
    expect((await resolver.authenticate(generateApiKey(), ADDRESS)).kind).toBe('refused');
    const third = await resolver.authenticate(generateApiKey(), ADDRESS);
    expect(third).toMatchObject({ kind: 'refused', reason: 'unknown' });
    const fourth = await resolver.authenticate(generateApiKey(), ADDRESS);
    expect(fourth).toMatchObject({ kind: 'refused', reason: 'too-many-failures' });
  });

  it('counts a key revoked since it was cached, and not a lookup the store failed', async () => {
    const table = keyTable();
    const valid = generateApiKey();
    table.keys.set(hashSecret(valid), { agentId: 'a', keyId: 'key_a' });
    const { resolver, clock } = guarded(table);
    await resolver.authenticate(valid, ADDRESS);
    const agentForKey = table.store.agentForKey.bind(table.store);
    table.store.agentForKey = async () => {
      throw new Error('store down');
    };
    for (let i = 0; i < 5; i++)
      await expect(resolver.authenticate(generateApiKey(), ADDRESS)).rejects.toThrow('store down');
    table.store.agentForKey = agentForKey;
    expect(await resolver.authenticate(generateApiKey(), ADDRESS)).toMatchObject({
      reason: 'unknown',
    });
    table.keys.delete(hashSecret(valid)); // revoked elsewhere
    clock.now += 2_000;
    expect(await resolver.authenticate(valid, ADDRESS)).toMatchObject({ reason: 'unknown' });
    expect(await resolver.authenticate(valid, ADDRESS)).toMatchObject({ reason: 'unknown' });
    expect(await resolver.authenticate(valid, ADDRESS)).toMatchObject({
      reason: 'too-many-failures',
    });
  });

  it('keeps valid keys cached however many wrong keys come (misses are cached apart)', async () => {
    const table = keyTable();
    const valid = generateApiKey();
    table.keys.set(hashSecret(valid), { agentId: 'a', keyId: 'key_a' });
    const { resolver } = guarded(table, 2);
    await resolver.authenticate(valid, ADDRESS);
    for (let i = 0; i < 10; i++) await resolver.authenticate(generateApiKey(), `198.51.100.${i}`);
    const lookups = table.lookups();
    expect(await resolver.authenticate(valid, ADDRESS)).toMatchObject({ kind: 'valid' });
    expect(table.lookups()).toBe(lookups);
  });
});
