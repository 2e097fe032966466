// Who used the CPU during a measurement (Linux /proc; the machine may be shared): this benchmark
// and its children, PostgreSQL + Redis, and everything else.

import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { procPids } from '../support.mjs';
import { lifecycle } from './config.mjs';

const CLOCK_TICKS = 100; // USER_HZ, 100 on Linux
const INFRA = new Set(['postgres', 'redis-server']);

/**
 * Every process's CPU ticks so far, by pid, at `at` (performance.now()).
 * @typedef {{ at: number, byPid: Map<number, { comm: string, kernel: boolean, ticks: number }> }}
 *   CpuSnapshot
 */

/** @returns {CpuSnapshot | null} null where there is no /proc */
export function cpuSnapshot() {
  /** @type {CpuSnapshot['byPid']} */
  const byPid = new Map();
  const pids = procPids();
  if (!pids) return null;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const comm = stat.slice(stat.indexOf('(') + 1, close);
      const fields = stat.slice(close + 2).split(' ');
      const kernel = pid === 2 || fields[1] === '2'; // kthreadd and its children
      byPid.set(pid, { comm, kernel, ticks: Number(fields[11]) + Number(fields[12]) });
    } catch {
      // the process ended meanwhile
    }
  }
  return { at: performance.now(), byPid };
}

/**
 * CPU used during a measurement, in % of one core; `topOthers` names the busiest other processes.
 * @typedef {object} CpuUse
 * @property {number} seconds
 * @property {number} oursPercent this benchmark and its children
 * @property {number} postgresRedisPercent
 * @property {number} kernelThreadsPercent
 * @property {number} otherPercent
 * @property {string[]} topOthers
 */

/**
 * CPU used between two snapshots, in % of one core, by ours / postgres+redis / kernel threads /
 * other processes (processes that ended in between are missed).
 * @param {CpuSnapshot | null} a
 * @param {CpuSnapshot | null} b
 * @returns {CpuUse | null}
 */
export function cpuBetween(a, b) {
  if (!a || !b) return null;
  const ours = new Set([process.pid, ...[...lifecycle.children].map((c) => c.pid)]);
  const seconds = (b.at - a.at) / 1000;
  const used = { ours: 0, infra: 0, kernel: 0, other: 0 };
  /** @type {Record<string, number>} */
  const others = {};
  for (const [pid, p] of b.byPid) {
    const before = a.byPid.get(pid);
    const ticks = p.ticks - (before && before.comm === p.comm ? before.ticks : 0);
    if (ticks <= 0) continue;
    if (ours.has(pid)) used.ours += ticks;
    else if (INFRA.has(p.comm)) used.infra += ticks;
    else if (p.kernel) used.kernel += ticks;
    else {
      used.other += ticks;
      others[p.comm] = (others[p.comm] ?? 0) + ticks;
    }
  }
  const pct = (/** @type {number} */ ticks) => (ticks / CLOCK_TICKS / seconds) * 100;
  return {
    seconds,
    oursPercent: pct(used.ours),
    postgresRedisPercent: pct(used.infra),
    kernelThreadsPercent: pct(used.kernel),
    otherPercent: pct(used.other),
    topOthers: Object.entries(others)
      .sort((x, y) => y[1] - x[1])
      .slice(0, 3)
      .map(([comm, ticks]) => `${comm} ${pct(ticks).toFixed(0)}%`),
  };
}
export const fmtCpu = (/** @type {CpuUse | null} */ c) =>
  c
    ? `CPU (% of a core): bench+server ${c.oursPercent.toFixed(0)}, postgres+redis ${c.postgresRedisPercent.toFixed(0)}, kernel threads ${c.kernelThreadsPercent.toFixed(0)}, other processes ${c.otherPercent.toFixed(0)}` +
      (c.topOthers.length ? ` (${c.topOthers.join(', ')})` : '')
    : 'CPU n/a';
