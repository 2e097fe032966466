// HTTP load shared by the benchmarks: a POST that never rejects, an evenly paced open-loop
// sender and a bounded pool of workers.

import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * How a send ended: `status` 202 is accepted, 0 a failure (`error`); `tReply` is when the answer
 * (or the failure) arrived, on performance.now()'s clock.
 * @typedef {{ status: number, tReply: number, error?: unknown }} SendResult
 */

/**
 * POST over node:http (keep-alive agent); resolves when the whole answer is in, never rejects.
 * @param {string} url
 * @param {Buffer} body
 * @param {Record<string, string>} headers
 * @param {http.Agent} agent
 * @returns {Promise<SendResult>}
 */
export function post(url, body, headers, agent) {
  return new Promise((resolve) => {
    const req = http.request(
      url,
      { method: 'POST', agent, headers: { ...headers, 'content-length': body.length } },
      (res) => {
        res.resume();
        res.on('end', () =>
          // statusCode is always set on a client's response (only a server's request lacks it)
          resolve({ status: /** @type {number} */ (res.statusCode), tReply: performance.now() }),
        );
        res.on('error', (error) => resolve({ status: 0, error, tReply: performance.now() }));
      },
    );
    req.setTimeout(10_000, () => req.destroy(new Error('timeout')));
    req.on('error', (error) => resolve({ status: 0, error, tReply: performance.now() }));
    req.end(body);
  });
}

/**
 * Runs `fire(i, due)` for i = 0..count-1, request i due at start + i / rate (open loop).
 * @param {number} rate per second
 * @param {number} count
 * @param {(i: number, due: number) => void} fire
 * @returns {Promise<number>} the start, on performance.now()'s clock
 */
export async function paced(rate, count, fire) {
  const interval = 1000 / rate;
  const start = performance.now();
  let i = 0;
  while (i < count) {
    const now = performance.now();
    while (i < count && start + i * interval <= now) {
      fire(i, start + i * interval);
      i++;
    }
    if (i >= count) break;
    await sleep(Math.max(0, start + i * interval - performance.now()));
  }
  return start;
}

/**
 * Runs `task(i)` for i = 0..count-1 with at most `concurrency` at a time.
 * @param {number} count
 * @param {number} concurrency
 * @param {(i: number) => Promise<void>} task
 */
export async function pool(count, concurrency, task) {
  let next = 0;
  const worker = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
}
