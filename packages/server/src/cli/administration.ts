import type { CreateAgentOutcome } from '../agents/agent-admin.js';
import type { LifecycleSettings, LifecycleSettingsChange } from '../lifecycle/agent-settings.js';
import type { MemberRole } from '../store/agent-store.js';

/**
 * What the CLI's agent, key and member commands do, whichever way they reach the store: opened
 * directly (no server holds it), or through the admin API of the server that holds `DATA_DIR`.
 * Both give the same outcomes, so a command prints the same either way.
 */
export interface Administration {
  createAgent(request: {
    id?: string | undefined;
    name?: string | undefined;
  }): Promise<CreateAgentOutcome>;
  /** False when there was no such agent. */
  deleteAgent(agentId: string): Promise<boolean>;
  /** Undefined when there is no such agent. */
  createKey(agentId: string): Promise<{ keyId: string; apiKey: string } | undefined>;
  /** False when there was no such key. */
  revokeKey(keyId: string): Promise<boolean>;
  /** False when there is no such agent. */
  grantMember(agentId: string, userId: string, role: MemberRole): Promise<boolean>;
  /** False when the user had no role on the agent (or there is no such agent). */
  revokeMember(agentId: string, userId: string): Promise<boolean>;
  /**
   * The agent's lifecycle settings once `change` is applied (an empty one only reads them);
   * undefined when there is no such agent.
   */
  lifecycle(
    agentId: string,
    change: LifecycleSettingsChange,
  ): Promise<LifecycleSettings | undefined>;
  /** Shares any agent's run: its public link (a new one, or its current one). */
  shareRun(traceId: string): Promise<RunShareOutcome>;
  /** Ends a run's public link; false when there is no such run. */
  unshareRun(traceId: string): Promise<boolean>;
}

/** What sharing a run from the CLI did. */
export type RunShareOutcome =
  | { kind: 'shared'; shareToken: string; path: string; created: boolean }
  | { kind: 'not-found' }
  /** No secret to seal share links with (SHARE_SECRET, JWT_SECRET or the local secret). */
  | { kind: 'unavailable' };
