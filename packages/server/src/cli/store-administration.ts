import {
  createAgent,
  createKey,
  deleteAgent,
  grantMember,
  revokeKey,
  revokeMember,
} from '../agents/agent-admin.js';
import type { Config } from '../config.js';
import { changeLifecycleSettings, readLifecycleSettings } from '../lifecycle/agent-settings.js';
import type { LiveBus } from '../live/live-bus.js';
import { createRedisBus } from '../live/redis-bus.js';
import { announceRevocation, type AccessRevocation } from '../live/stream-access-guard.js';
import type { Store } from '../store/open-store.js';
import { KeyGuessLimiter } from '../auth/key-guess-limiter.js';
import { readLocalSecret } from '../first-run/local-secret.js';
import { ShareLinks } from '../sharing/share-links.js';
import { ShareTokenSeal } from '../sharing/share-token.js';
import type { Administration } from './administration.js';

/**
 * The shared live bus (Redis, when REDIS_URL is set) for the length of `work`, so that a command
 * changing access or deleting an agent reaches running servers at once; undefined without it.
 */
async function withLiveBus<T>(
  config: Config,
  warn: (message: string) => void,
  work: (bus: LiveBus | undefined) => Promise<T>,
): Promise<T> {
  if (!config.live.redisUrl) return work(undefined);
  const bus = createRedisBus({
    url: config.live.redisUrl,
    keyPrefix: config.live.redisPrefix,
    totalMaxBytes: config.live.bufferMaxBytes,
    agentMaxBytes: config.live.agentBufferMaxBytes,
  });
  try {
    if (!(await bus.ready(2_000)))
      warn('Redis is unreachable: running servers see this change at their next check (5 s)');
    return await work(bus);
  } finally {
    await bus.close();
  }
}

/**
 * Administration on a store this process opened (no server holds it: a bootstrap, or
 * PostgreSQL beside running servers). Running servers learn of removed access through the
 * shared bus when there is one; a failure there only makes them wait for their next check.
 */
export function storeAdministration(
  store: Store,
  config: Config,
  warn: (message: string) => void,
): Administration {
  // made when a command shares: the secret file is read only by the commands that need it
  const shareLinks = () => {
    // the secret a server on this store seals links with: SHARE_SECRET, JWT_SECRET or the local one
    const shareSecret =
      config.auth.shareSecret ??
      config.auth.jwtSecret ??
      (config.auth.jwtJwksUrl === undefined ? readLocalSecret(config.store.dataDir) : undefined);
    return new ShareLinks({
      store,
      seal: shareSecret === undefined ? undefined : new ShareTokenSeal(shareSecret),
      // a command presents no tokens: nothing to limit
      guesses: new KeyGuessLimiter({ maxFailures: 1, windowMs: 1_000, maxAddresses: 1 }),
    });
  };
  const announce = (bus: LiveBus, revocation: AccessRevocation) =>
    announceRevocation(bus, revocation).catch((error: unknown) =>
      warn(`running servers see this change at their next check: ${(error as Error).message}`),
    );
  return {
    createAgent: (request) => createAgent(store.agents, request),
    // Running servers sharing a Redis bus end the agent's live streams at once (and its buffer
    // there goes now); otherwise at their next access check, and they refuse its keys once
    // their key cache expires (within 5 s either way). An in-process bus of a running server
    // keeps the buffer until it restarts.
    deleteAgent: (agentId) =>
      withLiveBus(config, warn, async (bus) => {
        const deleted = await deleteAgent(store.agents, agentId, {
          actor: 'cli',
          ...(bus ? { bus } : {}),
          onBusError: (error) => warn(`live buffer kept: ${(error as Error).message}`),
        });
        if (deleted && bus) await announce(bus, { agentId });
        return deleted;
      }),
    createKey: (agentId) => createKey(store.agents, agentId),
    revokeKey: (keyId) => revokeKey(store.agents, keyId),
    grantMember: (agentId, userId, role) => grantMember(store.agents, agentId, userId, role),
    // servers sharing a Redis bus end the member's streams at once, the others within 5 s
    revokeMember: async (agentId, userId) => {
      const removed = await revokeMember(store.agents, agentId, userId);
      if (removed)
        await withLiveBus(config, warn, async (bus) => {
          if (bus) await announce(bus, { agentId, userId });
        });
      return removed;
    },
    shareRun: async (traceId) => {
      const outcome = await shareLinks().share({ kind: 'admin' }, traceId);
      return outcome.kind === 'forbidden' ? { kind: 'not-found' } : outcome;
    },
    unshareRun: async (traceId) =>
      (await shareLinks().unshare({ kind: 'admin' }, traceId)).kind === 'unshared',
    lifecycle: (agentId, change) =>
      Object.keys(change).length === 0
        ? readLifecycleSettings(store.lifecycle, config.lifecycle, agentId)
        : changeLifecycleSettings(store.lifecycle, config.lifecycle, agentId, change, 'cli'),
  };
}
