// The servers an engine's sides are measured on, besides the service: the bare node:http server
// (a) and the naive server (d); what their /metrics and /proc say about them.

import { readFileSync, writeFileSync } from 'node:fs';
import { request, serverNodeArgs, startChildServer } from '../support.mjs';
import { BARE_SERVER, CFG, NAIVE_SERVER, ROOT, lifecycle } from './config.mjs';

/**
 * @typedef {import('../support.mjs').ServerHandle} ServerHandle
 * @typedef {import('../support.mjs').ChildServer} ChildServer
 */

/**
 * @param {ServerHandle} server
 * @returns {Promise<import('@flightlog/protocol').CreatedAgent>}
 */
export async function createAgent(server) {
  const { status, text } = await request('POST', `${server.base}/admin/v1/agents`, {
    headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
    body: '{}',
  });
  if (status !== 201) throw new Error(`agent creation answered ${status}: ${text}`);
  return JSON.parse(text);
}

/**
 * A server's batch counters and resident memory; none when /metrics does not answer 200.
 * @typedef {{ accepted?: number, duplicate?: number, rssBytes?: number }} ServerMetrics
 */

/**
 * @param {string} base
 * @returns {Promise<ServerMetrics>}
 */
export async function scrapeMetrics(base) {
  const { status, text } = await request('GET', `${base}/metrics`);
  if (status !== 200) return {};
  const value = (/** @type {RegExp} */ pattern) => {
    const match = text.match(pattern);
    return match ? Number(match[1]) : undefined;
  };
  return {
    accepted: value(/^flightlog_batches_total\{outcome="accepted"\} (\S+)$/m) ?? 0,
    duplicate: value(/^flightlog_batches_total\{outcome="duplicate"\} (\S+)$/m) ?? 0,
    rssBytes: value(/^process_resident_memory_bytes (\S+)$/m),
  };
}

/**
 * Peak resident memory of a process (Linux: VmHWM), reset by `resetPeakRss`; null elsewhere.
 * @param {number | undefined} pid
 * @returns {number | null}
 */
export function peakRss(pid) {
  try {
    const match = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : null;
  } catch {
    return null;
  }
}
/**
 * @param {number | undefined} pid
 * @returns {boolean}
 */
export function resetPeakRss(pid) {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/**
 * Baseline (d), PostgreSQL only: the naive node:http + pg server, writing to `schema`.

/**
 * Baseline (d), PostgreSQL only: the naive node:http + pg server, writing to `schema`.
 * @param {string} schema
 * @param {string} agentId
 * @returns {Promise<ChildServer>}
 */
export function startNaiveServer(schema, agentId) {
  return startChildServer(lifecycle, {
    cli: NAIVE_SERVER,
    cwd: ROOT,
    // the service's node flags (BENCH_SERVER_NODE_ARGS) for both, so that they compare
    nodeArgs: serverNodeArgs(),
    tag: 'naive-server',
    env: {
      NAIVE_DATABASE_URL: CFG.databaseUrl,
      NAIVE_SCHEMA: schema,
      NAIVE_AGENT_ID: agentId,
      NAIVE_POOL_SIZE: String(CFG.serverPoolSize ?? 10),
    },
  });
}

/**
 * Baseline (a): the bare node:http server.
 * @returns {Promise<ChildServer>}
 */
export function startBareServer() {
  return startChildServer(lifecycle, { cli: BARE_SERVER, cwd: ROOT, tag: 'bare-http' });
}
