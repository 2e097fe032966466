// Memory per idle stream: streams opened over raw TCP sockets (no client-side HTTP objects, so
// this process's own cost stays out of the way), server RSS after - before, per stream.

import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { pool } from '../load.mjs';
import { CFG } from './config.mjs';
import { settledMemory } from './servers.mjs';

/**
 * @typedef {import('../support.mjs').ServerHandle} ServerHandle
 * @typedef {import('./servers.mjs').BareServer} BareServer
 * @typedef {import('./servers.mjs').CreatedAgent} CreatedAgent
 * @typedef {import('./servers.mjs').MemoryFigures} MemoryFigures
 */

/**
 * An idle stream's socket; `closedByUs` tells our own closes from the server's.
 * @typedef {net.Socket & { closedByUs?: boolean }} RawSocket
 */

/** @type {Set<RawSocket>} */
const openSockets = new Set();

/** Destroys every idle socket still open (a cleanup of the run). */
export function destroyOpenSockets() {
  for (const socket of openSockets) socket.destroy();
  openSockets.clear();
}

/**
 * Streams the server closed, of those one measureIdle() opened.
 * @typedef {{ closedByServer: number }} IdleTally
 */

/**
 * An idle stream over a raw TCP socket (no client-side HTTP objects): resolves once the answer
 * is 200 and `: connected` has arrived; later data (heartbeats) is read and dropped.
 * @param {number} port
 * @param {string} path
 * @param {Record<string, string>} headers
 * @param {IdleTally} tally
 * @returns {Promise<RawSocket>}
 */
function openRawStream(port, path, headers, tally) {
  return new Promise((resolve, reject) => {
    /** @type {RawSocket} */
    const socket = net.connect({ host: '127.0.0.1', port });
    openSockets.add(socket);
    let head = '';
    let settled = false;
    const fail = (/** @type {Error} */ error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      openSockets.delete(socket);
      reject(error);
    };
    const timer = setTimeout(() => fail(new Error(`GET ${path}: no answer in 15 s`)), 15_000);
    socket.on('connect', () => {
      let text = `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAccept: text/event-stream\r\n`;
      for (const [name, value] of Object.entries(headers)) text += `${name}: ${value}\r\n`;
      socket.write(`${text}\r\n`);
    });
    socket.on('data', (chunk) => {
      if (settled) return;
      head += chunk.toString('latin1');
      if (!head.startsWith('HTTP/1.1 200')) {
        const end = head.indexOf('\r\n\r\n');
        if (end >= 0 && head.length > end + 4)
          fail(
            new Error(
              `GET ${path}: ${head.slice(0, head.indexOf('\r\n'))} ${head.slice(end + 4, end + 300)}`,
            ),
          );
        return;
      }
      if (head.includes(': connected')) {
        settled = true;
        clearTimeout(timer);
        resolve(socket);
      }
    });
    socket.on('error', (error) => fail(error));
    socket.on('close', () => {
      openSockets.delete(socket);
      if (!settled) fail(new Error(`GET ${path}: closed before the stream opened`));
      else if (!socket.closedByUs) tally.closedByServer++;
    });
  });
}

/** @param {Iterable<RawSocket>} sockets */
function closeRaw(sockets) {
  for (const socket of sockets) {
    socket.closedByUs = true;
    socket.destroy();
    openSockets.delete(socket);
  }
}

/**
 * Where measureIdle() opens stream i, as whom, and whose memory it reads.
 * @typedef {object} IdleTarget
 * @property {number} port
 * @property {string} metricsUrl
 * @property {(i: number) => string} pathFor
 * @property {(i: number) => Record<string, string>} headersFor
 */

/**
 * One server's idle-stream figures: memory before and after opening `streams`.
 * @typedef {object} IdleResult
 * @property {number} streams
 * @property {number} openSeconds
 * @property {number} opensPerSec
 * @property {MemoryFigures} before
 * @property {MemoryFigures} after
 * @property {number} kibPerStream RSS
 * @property {number} heapKibPerStream
 * @property {number} closedByServer streams the server closed while they were held
 */

/**
 * Idle streams: server RSS after - before, per stream.
 * @param {string} label
 * @param {IdleTarget} target
 * @returns {Promise<IdleResult>}
 */
export async function measureIdle(label, { port, metricsUrl, pathFor, headersFor }) {
  /** @type {IdleTally} */
  const tally = { closedByServer: 0 };
  const openMany = async (/** @type {number} */ n) => {
    // every slot is filled once no open failed (else the open ones are closed, and it throws)
    /** @type {RawSocket[]} */
    const sockets = new Array(n);
    /** @type {Error[]} openRawStream() rejects with Errors only */
    const errors = [];
    await pool(n, 64, async (i) => {
      try {
        sockets[i] = await openRawStream(port, pathFor(i), headersFor(i), tally);
      } catch (error) {
        errors.push(/** @type {Error} */ (error));
      }
    });
    if (errors.length > 0) {
      closeRaw(sockets.filter(Boolean));
      throw new Error(
        `${errors.length} of ${n} idle streams failed to open; first: ${
          /** @type {Error} */ (errors[0]).message
        }`,
      );
    }
    return sockets;
  };
  closeRaw(await openMany(CFG.idleWarmup));
  await sleep(500);
  const before = await settledMemory(metricsUrl);
  const t0 = performance.now();
  const sockets = await openMany(CFG.idleStreams);
  const openSeconds = (performance.now() - t0) / 1000;
  const after = await settledMemory(metricsUrl);
  const closedByServer = tally.closedByServer;
  closeRaw(sockets);
  await sleep(500);
  const n = CFG.idleStreams;
  const result = {
    streams: n,
    openSeconds,
    opensPerSec: n / openSeconds,
    before,
    after,
    kibPerStream: (after.rss - before.rss) / n / 1024,
    heapKibPerStream: (after.heapUsed - before.heapUsed) / n / 1024,
    closedByServer,
  };
  console.log(
    `   idle ${label.padEnd(30)} ${result.kibPerStream.toFixed(1).padStart(6)} KiB/stream RSS ` +
      `(heap ${result.heapKibPerStream.toFixed(1)} KiB), RSS ${mib(before.rss)} -> ${mib(after.rss)} MiB, ` +
      `${Math.round(result.opensPerSec)} opens/s` +
      (closedByServer ? `  !!! ${closedByServer} streams closed by the server` : ''),
  );
  return result;
}
export const mib = (/** @type {number} */ bytes) => (bytes / 2 ** 20).toFixed(0);

/**
 * The idle comparison of one bus: service and bare baseline, and their ratio.
 * @typedef {{ service: IdleResult, baseline: IdleResult, baselineKind: string, ratio?: number }}
 *   IdleComparison
 */

/**
 * The service's idle streams spread over `idleTokens`' users x `idleAgents`, then the bare
 * server's (first, on a server that has done nothing else yet but the set-up).
 * @param {ServerHandle} server
 * @param {BareServer} bare
 * @param {CreatedAgent[]} idleAgents
 * @param {string[]} idleTokens
 * @returns {Promise<IdleComparison>}
 */
export async function compareIdle(server, bare, idleAgents, idleTokens) {
  const idleFor = (/** @type {number} */ i) => ({
    user: i % CFG.idleUsers,
    agent: Math.floor(i / CFG.idleUsers) % CFG.idleAgents,
  });
  /** @type {IdleComparison} */
  const idle = {
    service: await measureIdle('service', {
      port: server.port,
      metricsUrl: `${server.base}/metrics`,
      pathFor: (i) =>
        `/v1/agents/${/** @type {CreatedAgent} */ (idleAgents[idleFor(i).agent]).agentId}/live`,
      headersFor: (i) => ({ authorization: `Bearer ${idleTokens[idleFor(i).user]}` }),
    }),
    baseline: await measureIdle('bare node:http', {
      port: bare.port,
      metricsUrl: `${bare.base}/metrics`,
      pathFor: (i) => `/idle/${i % CFG.idleAgents}`,
      headersFor: () => ({}),
    }),
    baselineKind: 'bare node:http server holding idle SSE responses (child process)',
  };
  idle.ratio = idle.service.kibPerStream / idle.baseline.kibPerStream;
  return idle;
}
