import type { AgentStats, StatsWindow } from '@flightlog/protocol';
import type { Store } from '../store/open-store.js';

export const DEFAULT_STATS_WINDOW: StatsWindow = '24h';

export type StatsOutcome = { kind: 'stats'; stats: AgentStats } | { kind: 'not-found' };

/**
 * The chart of an agent's recent runs (see AgentStatsSchema), for a user with any role on it;
 * "not found" for agents the user cannot see, as every read.
 */
export async function readAgentStats(
  store: Store,
  userId: string,
  agentId: string,
  window: StatsWindow = DEFAULT_STATS_WINDOW,
): Promise<StatsOutcome> {
  if ((await store.agents.roleOf(userId, agentId)) === undefined) return { kind: 'not-found' };
  return { kind: 'stats', stats: await store.stats.agentStats(agentId, window) };
}
