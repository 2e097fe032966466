import type { LifecycleStore, AgentLifecycleRow } from '../store/lifecycle-store.js';
import type { LifecycleConfig } from './lifecycle-config.js';

/**
 * An agent's lifecycle settings as the admin API and the CLI show them: its own values (null:
 * the server's default; 0: never) and what is in force for it (null: never).
 */
export interface LifecycleSettings {
  agentId: string;
  runTimeoutMs: number | null;
  retentionDays: number | null;
  effective: {
    /** Milliseconds without a batch after which a running run becomes `timeout`; null: never. */
    runTimeoutMs: number | null;
    /** Days a run is kept after its start and its last batch; null: forever. */
    retentionDays: number | null;
  };
}

/** A change of settings: an absent field stays as it is, null returns to the default. */
export interface LifecycleSettingsChange {
  runTimeoutMs?: number | null;
  retentionDays?: number | null;
}

export type LifecycleDefaults = Pick<LifecycleConfig, 'runTimeoutMs' | 'retentionDays'>;

export function settingsView(
  row: AgentLifecycleRow,
  defaults: LifecycleDefaults,
): LifecycleSettings {
  const runTimeoutMs = row.runTimeoutMs ?? defaults.runTimeoutMs;
  const retentionDays = row.retentionDays ?? defaults.retentionDays ?? 0;
  return {
    agentId: row.agentId,
    runTimeoutMs: row.runTimeoutMs,
    retentionDays: row.retentionDays,
    effective: {
      runTimeoutMs: runTimeoutMs > 0 ? runTimeoutMs : null,
      retentionDays: retentionDays > 0 ? retentionDays : null,
    },
  };
}

/** The agent's settings; undefined when there is no such agent. */
export async function readLifecycleSettings(
  store: Pick<LifecycleStore, 'settings'>,
  defaults: LifecycleDefaults,
  agentId: string,
): Promise<LifecycleSettings | undefined> {
  const row = await store.settings(agentId);
  return row && settingsView(row, defaults);
}

/**
 * Applies `change` and returns the settings now, recording it in the audit log (in the same
 * transaction); undefined when there is no such agent.
 */
export async function changeLifecycleSettings(
  store: Pick<LifecycleStore, 'changeSettings'>,
  defaults: LifecycleDefaults,
  agentId: string,
  change: LifecycleSettingsChange,
  /** Who asks, for the audit log: `admin` or `cli`. */
  actor: string,
): Promise<LifecycleSettings | undefined> {
  const row = await store.changeSettings(agentId, change, actor);
  return row && settingsView(row, defaults);
}
