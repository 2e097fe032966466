// Shared by the benchmarks (ingest.mjs, live.mjs): synthetic batches, loopback helpers, stats.

import net from 'node:net';

/** A whole number from the environment, within [min, max], else `fallback`. */
export function envNumber(name, fallback, min, max) {
  const raw = process.env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min || value > max) {
    console.error(`${name} must be a number between ${min} and ${max}, got "${raw}"`);
    process.exit(2);
  }
  return value;
}

// ---------------------------------------------------------------------------------------------
// Synthetic data: 1 trace + N llm_call events per batch, texts drawn from a fixed pool, seeded so
// every run sends the same mix.

let seed = 0x2545f491;
function rand() {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 4294967296;
}
const pick = (array) => array[Math.floor(rand() * array.length)];

const LETTERS = 'etaoinshrdlcumwfgypbvkjxqz';
const WORDS = Array.from({ length: 600 }, () => {
  const length = 2 + Math.floor(rand() * 9);
  let word = '';
  for (let i = 0; i < length; i++) word += LETTERS[Math.floor(rand() ** 1.6 * LETTERS.length)];
  return word;
});

function sentence(chars) {
  let text = '';
  while (text.length < chars) {
    const word = pick(WORDS);
    text += text.length === 0 ? word[0].toUpperCase() + word.slice(1) : ` ${word}`;
    if (rand() < 0.08) text += '.';
  }
  return `${text.slice(0, chars - 1)}.`;
}
const TEXTS = Array.from({ length: 2048 }, () => sentence(380 + Math.floor(rand() * 40)));
const MODELS = ['gpt-4o-mini', 'gpt-4o', 'claude-sonnet-4', 'llama-3.1-70b'];

/** Makes `makeItem(agentId)`: one BufferBatchItem with `eventsPerBatch` llm_call events. */
export function createItemFactory({ ulid, eventsPerBatch }) {
  return function makeItem(agentId) {
    const traceId = ulid();
    const t0 = Date.now() - 60_000;
    const events = [];
    let totalTokens = 0;
    let totalCost = 0;
    for (let sequence = 0; sequence < eventsPerBatch; sequence++) {
      const inputTokens = 80 + Math.floor(rand() * 400);
      const outputTokens = 20 + Math.floor(rand() * 200);
      const costUsd = Math.round(inputTokens * 0.15 + outputTokens * 0.6) / 1e6;
      totalTokens += inputTokens + outputTokens;
      totalCost += costUsd;
      const start = t0 + sequence * 1_000;
      const durationMs = 200 + Math.floor(rand() * 700);
      events.push({
        id: ulid(),
        traceId,
        sequence,
        type: 'llm_call',
        startedAt: new Date(start).toISOString(),
        endedAt: new Date(start + durationMs).toISOString(),
        durationMs,
        status: 'ok',
        payloadEncrypted: false,
        parentEventId: null,
        errorMessage: null,
        payload: {
          provider: 'openai',
          model: pick(MODELS),
          input: { messages: [{ role: 'user', content: pick(TEXTS) }] },
          output: { content: pick(TEXTS).slice(0, 80), finishReason: 'stop' },
          usage: { inputTokens, outputTokens, totalTokens: inputTokens + outputTokens },
          costUsd,
          streamed: false,
        },
      });
    }
    const trace = {
      id: traceId,
      agentId,
      status: 'running',
      startedAt: new Date(t0).toISOString(),
      inputSummary: pick(TEXTS).slice(0, 160),
      endedAt: null,
      durationMs: null,
      outputSummary: null,
      errorMessage: null,
      tags: [],
      eventCount: events.length,
      totalTokens,
      totalCostUsd: totalCost.toFixed(6),
      totalLamports: '0',
      chainTxCount: 0,
      toolsCalled: [],
    };
    return { trace, events };
  };
}

// ---------------------------------------------------------------------------------------------
// Loopback helpers

export async function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

export async function reachable(host, port, timeoutMs = 2_000) {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

export async function request(method, url, { headers = {}, body, timeoutMs = 10_000 } = {}) {
  const response = await globalThis.fetch(url, {
    method,
    headers,
    body,
    signal: globalThis.AbortSignal.timeout(timeoutMs),
  });
  return { status: response.status, text: await response.text() };
}

export function percentiles(values) {
  if (values.length === 0) return { p50: null, p99: null, max: null, min: null };
  const sorted = Float64Array.from(values).sort();
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
  return { p50: at(0.5), p99: at(0.99), max: sorted[sorted.length - 1], min: sorted[0] };
}

/** Variables of this shell that must not leak into a benchmarked server. */
export const SERVER_ENV_DROPPED = [
  'PORT',
  'HOST',
  'DATA_DIR',
  'DATABASE_URL',
  'DATABASE_SCHEMA',
  'DATABASE_POOL_SIZE',
  'REDIS_URL',
  'ADMIN_TOKEN',
  'JWT_SECRET',
  'JWT_JWKS_URL',
  'JWT_ISSUER',
  'JWT_AUDIENCE',
  'LOG_LEVEL',
  'NODE_OPTIONS',
];
