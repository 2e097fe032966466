// SSE client over node:http: the stream's messages with the time their last byte arrived.

import http from 'node:http';
import { performance } from 'node:perf_hooks';

/**
 * One SSE message as dispatched (`event` defaults to "message").
 * @typedef {{ id: string | undefined, event: string, data: string }} SseMessage
 */

/** @typedef {(message: SseMessage, now: number) => void} OnSseMessage */

/**
 * An open SSE stream: what arrived on it and how it ended.
 * @typedef {object} SseStream
 * @property {number | undefined} status
 * @property {boolean} ended
 * @property {number | undefined} endedAt
 * @property {number} comments
 * @property {number} warnings `warning` messages (the server's, e.g. a client too slow)
 * @property {number} bytes
 * @property {boolean} [closing] set by close(): an end we caused is not the server's
 * @property {Error} [error] the request's error, when it ended the stream
 * @property {() => void} [onEnd] called once when the stream ends, however it ends
 * @property {() => void} close
 */

/**
 * Opens a stream; resolves once the answer is 200, rejects on another status or no answer.
 * @param {string} url
 * @param {Record<string, string>} headers
 * @param {{ agent: http.Agent, onMessage: OnSseMessage, timeoutMs?: number }} options
 * @returns {Promise<SseStream>}
 */
export function openSse(url, headers, { agent, onMessage, timeoutMs = 15_000 }) {
  return new Promise((resolve, reject) => {
    /** @type {SseStream} */
    const stream = {
      status: undefined,
      ended: false,
      endedAt: undefined,
      comments: 0,
      warnings: 0,
      bytes: 0,
      close() {
        stream.closing = true;
        req.destroy();
      },
    };
    const req = http.request(url, {
      method: 'GET',
      agent,
      headers: { accept: 'text/event-stream', ...headers },
    });
    let settled = false;
    const timer = setTimeout(
      () => req.destroy(new Error(`no answer in ${timeoutMs} ms`)),
      timeoutMs,
    );
    const dispatch = (/** @type {string} */ block, /** @type {number} */ now) => {
      /** @type {string | undefined} */
      let id;
      let event = 'message';
      /** @type {string | undefined} */
      let data;
      for (const line of block.split('\n')) {
        if (line === '') continue;
        if (line.charCodeAt(0) === 58 /* ':' */) {
          stream.comments++;
          continue;
        }
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? '' : line.slice(colon + 1);
        if (value.charCodeAt(0) === 32) value = value.slice(1);
        if (field === 'data') data = data === undefined ? value : `${data}\n${value}`;
        else if (field === 'event') event = value;
        else if (field === 'id') id = value;
      }
      if (data === undefined) return;
      if (event === 'warning') stream.warnings++;
      onMessage({ id, event, data }, now);
    };
    req.on('response', (res) => {
      clearTimeout(timer);
      stream.status = res.statusCode;
      if (res.statusCode !== 200) {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (body += c));
        res.on('end', () => {
          settled = true;
          reject(new Error(`GET ${new URL(url).pathname} answered ${res.statusCode}: ${body}`));
        });
        return;
      }
      res.setEncoding('utf8');
      let buffer = '';
      res.on('data', (chunk) => {
        const now = performance.now();
        stream.bytes += chunk.length;
        buffer += chunk;
        let at;
        while ((at = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, at);
          buffer = buffer.slice(at + 2);
          dispatch(block, now);
        }
      });
      const ended = () => {
        if (stream.ended) return;
        stream.ended = true;
        stream.endedAt = performance.now();
        stream.onEnd?.();
      };
      res.on('end', ended);
      res.on('close', ended);
      res.on('error', ended);
      settled = true;
      resolve(stream);
    });
    req.on('error', (error) => {
      clearTimeout(timer);
      if (!settled) {
        settled = true;
        reject(error);
      } else if (!stream.ended) {
        stream.ended = true;
        stream.endedAt = performance.now();
        stream.error = error;
        stream.onEnd?.();
      }
    });
    req.end();
  });
}
