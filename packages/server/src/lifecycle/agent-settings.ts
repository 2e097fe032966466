import type { LifecycleStore, AgentLifecycleRow } from '../store/lifecycle-store.js';
import type { LifecycleConfig } from './lifecycle-config.js';

/**
 * An agent's lifecycle settings as the admin API and the CLI show them: its own values (null:
 * the server's default; 0: never) and what is in force for it (null: never).
 */
export interface LifecycleSettings {
  agentId: string;
  runTimeoutMs: number | null;
  effective: {
    /** Milliseconds without a batch after which a running run becomes `timeout`; null: never. */
    runTimeoutMs: number | null;
  };
}

/** A change of settings: an absent field stays as it is, null returns to the default. */
export interface LifecycleSettingsChange {
  runTimeoutMs?: number | null;
}

export type LifecycleDefaults = Pick<LifecycleConfig, 'runTimeoutMs'>;

export function settingsView(
  row: AgentLifecycleRow,
  defaults: LifecycleDefaults,
): LifecycleSettings {
  const runTimeoutMs = row.runTimeoutMs ?? defaults.runTimeoutMs;
  return {
    agentId: row.agentId,
    runTimeoutMs: row.runTimeoutMs,
    effective: { runTimeoutMs: runTimeoutMs > 0 ? runTimeoutMs : null },
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

/** Applies `change` and returns the settings now; undefined when there is no such agent. */
export async function changeLifecycleSettings(
  store: Pick<LifecycleStore, 'changeSettings'>,
  defaults: LifecycleDefaults,
  agentId: string,
  change: LifecycleSettingsChange,
): Promise<LifecycleSettings | undefined> {
  const row = await store.changeSettings(agentId, change);
  return row && settingsView(row, defaults);
}
