import type { BufferBatchItem, TransportBatchPayload } from '@flightlog/protocol';
import { expect } from 'vitest';
import { compareMessageIds } from '../../src/live/live-bus.js';
import { postBatch } from '../harness/http.js';
import { SseClient } from '../harness/sse-client.js';
import type { TestAgent, TestServer } from '../harness/test-server.js';
import { newId, runBatch, traceSnapshot, type RunBatch } from '../fixtures/batches.js';

/** Shared by the live stream suites (live-stream*.test.ts). */

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export async function until(
  predicate: () => boolean,
  what: string,
  timeoutMs = 5_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** Rejects after `ms`, naming what did not happen in time. */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
    }),
  ]);
}

/** The items of a batch as the stream must show them: `trace.agentId` is the key's agent. */
export const asStored = (agent: TestAgent, body: TransportBatchPayload): BufferBatchItem[] =>
  body.items.map((item) => ({
    trace: { ...item.trace, agentId: agent.agentId },
    events: item.events,
  }));

/** A batch of `count` items (each a trace of its own), listed in descending trace id order. */
export function multiItemBatch(count: number): TransportBatchPayload {
  const items = Array.from({ length: count }, (_, i) => runBatch({ events: i }).body.items[0]!);
  return { batchId: newId(), items: items.reverse() };
}

/** A batch whose one event carries about `bytes` of model output. */
export function largeBatch(bytes: number): RunBatch {
  const batch = runBatch({ events: 1 });
  const event = batch.events[0]!;
  (event.payload as { output: { content: string } }).output.content = 'x'.repeat(bytes);
  return batch;
}

/** A BufferBatchItem as JSON, for filling an agent's buffer through the bus directly. */
export const fillerItem = (agentId: string, label: string) =>
  JSON.stringify({ trace: traceSnapshot({ agentId, inputSummary: label }), events: [] });

/** A message id: the buffer entry's id `<ms>-<seq>`, plus `-<k>` for item k >= 1 of a batch. */
export const STREAM_ID = /^\d+-\d+(-\d+)?$/;

export function expectStrictlyIncreasing(ids: (string | undefined)[]): void {
  for (const id of ids) expect(id, 'every message has an id').toMatch(STREAM_ID);
  for (let i = 1; i < ids.length; i++)
    expect(
      compareMessageIds(ids[i] as string, ids[i - 1] as string),
      `${ids[i]} after ${ids[i - 1]}`,
    ).toBeGreaterThan(0);
}

/** The problem document of a refused stream request. */
export function expectProblem(sse: SseClient, status: number): Record<string, unknown> {
  expect(sse.status).toBe(status);
  expect(sse.headers?.get('content-type') ?? '').toMatch(/^application\/problem\+json/);
  const problem = JSON.parse(sse.body) as Record<string, unknown>;
  expect(problem).toMatchObject({
    status,
    type: expect.any(String),
    title: expect.any(String),
    detail: expect.any(String),
  });
  return problem;
}

/** The `exp` claim of a JWT, in seconds. */
export const tokenExp = (token: string): number =>
  (
    JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString()) as {
      exp: number;
    }
  ).exp;

export const newUser = () => `user-${newId()}`;

export const liveUrl = (server: TestServer, agentId: string) =>
  `${server.url}/v1/agents/${encodeURIComponent(agentId)}/live`;

/** How many `trace` messages a client has (without parsing them: waitFor checks often). */
export const traceCount = (sse: SseClient) => sse.events.filter((e) => e.event === 'trace').length;

/** Whether a `trace` message of this trace (a unique ULID) has arrived. */
export const hasTrace = (sse: SseClient, traceId: string) =>
  sse.events.some((e) => e.event === 'trace' && e.data.includes(traceId));

/** Trace ids of the `trace` messages a client has, in order. */
export const traceIds = (sse: SseClient) => sse.traces().map((t) => t.item.trace.id as string);

export interface WatchOptions {
  headers?: Record<string, string>;
  role?: 'owner' | 'editor' | 'viewer';
  /** Open with this token instead of granting a fresh user `role`. */
  token?: string;
}

/**
 * Stream clients and batch posting against one server; `closeAll` (afterEach) closes every
 * client opened through it.
 */
export function liveDriver(server: () => TestServer) {
  const clients: SseClient[] = [];

  /** Opens a stream as a fresh user with `role` on the agent (or with `token` when given). */
  async function watch(agentId: string, options: WatchOptions = {}): Promise<SseClient> {
    const on = server();
    const token = options.token ?? (await on.userToken(newUser(), agentId, options.role));
    return open(agentId, token, options.headers);
  }

  /** Opens a stream with exactly this token (or none). */
  async function open(
    agentId: string,
    token: string | undefined,
    headers?: Record<string, string>,
  ): Promise<SseClient> {
    const sse = await SseClient.open(liveUrl(server(), agentId), token, headers);
    clients.push(sse);
    return sse;
  }

  async function post(agent: TestAgent, body: TransportBatchPayload) {
    const res = await postBatch(server().url, agent.apiKey, body);
    expect(res.status, res.text).toBe(202);
    return res;
  }

  /** Posts a marker batch and waits for it, so everything published before it has arrived. */
  async function settle(agent: TestAgent, ...streams: SseClient[]): Promise<string> {
    const marker = runBatch({ trace: { inputSummary: 'marker' } });
    await post(agent, marker.body);
    for (const sse of streams)
      await sse.waitFor((c) => hasTrace(c, marker.trace.id), 5_000, 'the marker');
    return marker.trace.id;
  }

  return {
    watch,
    open,
    post,
    settle,
    closeAll() {
      for (const client of clients.splice(0)) client.close();
    },
  };
}

/**
 * Streams that must end: the last thing they got is one `access-revoked` event (after any
 * `trace` messages), then the end of the response.
 */
export function expectAccessRevoked(sse: SseClient): void {
  expect(sse.isEnded).toBe(true);
  const last = sse.events.at(-1);
  expect(last?.event).toBe('access-revoked');
  expect(last?.id).toBeUndefined();
  expect(JSON.parse(last?.data ?? 'null')).toEqual({ message: expect.any(String) });
  expect(sse.events.filter((e) => e.event !== 'trace').length).toBe(1);
}
