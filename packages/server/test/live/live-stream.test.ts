import http from 'node:http';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { mintDevToken } from '../../src/auth/dev-token.js';
import { LIVE_BUFFER } from '../../src/live/live-bus.js';
import { describeBuses, type BusName } from '../harness/engines.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import type { SseClient } from '../harness/sse-client.js';
import { startTestServer, type TestServer } from '../harness/test-server.js';
import { llmCallEvent, newId, runBatch, traceSnapshot } from '../fixtures/batches.js';
import {
  STREAM_ID,
  asStored,
  expectProblem,
  expectStrictlyIncreasing,
  fillerItem,
  liveDriver,
  liveUrl,
  multiItemBatch,
  newUser,
  sleep,
  tokenExp,
  traceCount,
  traceIds,
  hasTrace,
  until,
  within,
} from './live-helpers.js';

/**
 * GET /v1/agents/:id/live over real sockets, on each live bus: headers, replay and live
 * delivery, resumption, the hand-off, authentication and access, the per-user cap, heartbeats
 * and token expiry. Slow clients and shutdown: live-stream-limits.test.ts.
 */
describeBuses('GET /v1/agents/:id/live [%s]', (bus: BusName) => {
  /** Heartbeats every 200 ms; two streams per user (the cap test); the rest as configured. */
  let server: TestServer;
  const { watch, open, post, settle, closeAll } = liveDriver(() => server);

  beforeAll(async () => {
    server = await startTestServer(
      'pglite',
      { live: { heartbeatMs: 200, maxStreamsPerUser: 2 } },
      { bus },
    );
  });
  afterEach(closeAll);
  afterAll(async () => {
    // fetch opens a spare connection after each aborted stream, and closing waits for those
    // until the client drops them (4 s): not what this suite is about (shutdown is tested in
    // live-stream-limits.test.ts)
    server?.app.server.closeAllConnections();
    await server?.close();
  });

  it('answers 200 with the SSE headers, uncompressed, opening with ": connected" and one retry hint', async () => {
    const agent = await server.createAgent();
    const token = await server.userToken(newUser(), agent.agentId);
    const response = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const request = http.get(
        liveUrl(server, agent.agentId),
        {
          headers: {
            authorization: `Bearer ${token}`,
            accept: 'text/event-stream',
            'accept-encoding': 'gzip, deflate, br',
          },
        },
        resolve,
      );
      request.on('error', reject);
    });
    let body = '';
    response.setEncoding('utf8');
    response.on('data', (chunk: string) => (body += chunk));
    try {
      expect(response.statusCode).toBe(200);
      expect(response.headers['content-type']).toBe('text/event-stream; charset=utf-8');
      expect(response.headers['cache-control']).toBe('no-cache, no-transform');
      expect(response.headers.connection).toBe('keep-alive');
      expect(response.headers['x-accel-buffering']).toBe('no');
      expect(response.headers['content-encoding']).toBeUndefined();

      const batch = runBatch();
      await post(agent, batch.body);
      await until(() => body.includes(batch.trace.id), 'the batch on the stream');
      await until(() => body.split(': heartbeat\n').length > 3, 'some heartbeats');
      // plain text, comment first
      expect(body.startsWith(': connected\n')).toBe(true);
      const retries = body.split('\n').filter((line) => line.startsWith('retry:'));
      expect(retries).toEqual([`retry: ${server.config.live.retryMs}`]);
    } finally {
      response.destroy();
    }

    const sse = await watch(agent.agentId);
    await sse.waitFor((c) => traceCount(c) === 1, 5_000, 'the replay');
    expect(sse.comments[0]).toBe('connected');
    expect(sse.retry).toBe(server.config.live.retryMs);
  });

  it('replays what was stored, oldest first, then delivers new batches: one message per item, as stored', async () => {
    const agent = await server.createAgent();
    const first = runBatch({ events: 2 });
    const multi = multiItemBatch(3);
    await post(agent, first.body);
    await post(agent, multi);
    const expectedReplay = [...asStored(agent, first.body), ...asStored(agent, multi)];

    const sse = await watch(agent.agentId);
    await sse.waitFor((c) => traceCount(c) === 4, 5_000, 'the replay');
    expect(sse.traces().map((t) => t.item)).toEqual(expectedReplay);
    // the agent is the API key's, whatever the client sent
    expect(first.body.items[0]?.trace.agentId).toBe('sent-by-client');
    expect(sse.traces().every((t) => t.item.trace.agentId === agent.agentId)).toBe(true);

    const live = multiItemBatch(2);
    const last = runBatch({ events: 3 });
    await post(agent, live);
    await post(agent, last.body);
    await sse.waitFor((c) => traceCount(c) === 7, 5_000, 'the live batches');
    expect(sse.traces().map((t) => t.item)).toEqual([
      ...expectedReplay,
      ...asStored(agent, live),
      ...asStored(agent, last.body),
    ]);
    expect(sse.events.every((e) => e.event === 'trace')).toBe(true);
    expectStrictlyIncreasing(sse.events.map((e) => e.id));

    // what the stream showed is what the store holds
    const token = await server.userToken(newUser(), agent.agentId);
    const stored = await send(server.url, `/v1/traces/${last.trace.id}`, undefined, { token });
    expect(stored.status).toBe(200);
    expect(sse.traces().at(-1)?.item.trace).toEqual(stored.body.trace);
    expect(sse.traces().at(-1)?.item.events).toEqual(stored.body.events);
    expect(sse.isEnded).toBe(false);
  });

  it('a repeated batchId and refused batches (400, 409) put nothing on the stream', async () => {
    const agent = await server.createAgent();
    const other = await server.createAgent();
    const sse = await watch(agent.agentId);
    await sse.waitFor((c) => c.comments.includes('connected'), 5_000, 'the stream');

    const accepted = runBatch();
    await post(agent, accepted.body);
    const again = await postBatch(server.url, agent.apiKey, accepted.body);
    expect(again.status).toBe(202);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    // the same batch id with other content is still the same batch
    const sameId = runBatch({ batch: { batchId: accepted.body.batchId } });
    expect((await postBatch(server.url, agent.apiKey, sameId.body)).status).toBe(202);

    const invalid = runBatch();
    invalid.body.items[0]!.events[0]!.traceId = newId();
    expect(isProblem(await postBatch(server.url, agent.apiKey, invalid.body), 400)).toBe(true);
    const empty = { batchId: newId(), items: [] };
    expect(isProblem(await postBatch(server.url, agent.apiKey, empty), 400)).toBe(true);

    // a trace id of another agent, and an event id already used by another trace
    const foreign = runBatch();
    await post(other, foreign.body);
    const takenTrace = runBatch({ trace: { id: foreign.trace.id } });
    expect(isProblem(await postBatch(server.url, agent.apiKey, takenTrace.body), 409)).toBe(true);
    const takenEvent = runBatch();
    takenEvent.body.items[0]!.events[0]!.id = accepted.events[0]!.id;
    expect(isProblem(await postBatch(server.url, agent.apiKey, takenEvent.body), 409)).toBe(true);

    const marker = await settle(agent, sse);
    expect(traceIds(sse)).toEqual([accepted.trace.id, marker]);
    // nor in the replay of a client connecting now
    const late = await watch(agent.agentId);
    await late.waitFor((c) => traceCount(c) >= 2, 5_000, 'the replay');
    await settle(agent, late);
    expect(traceIds(late).slice(0, 2)).toEqual([accepted.trace.id, marker]);
    expect(traceIds(late)).toHaveLength(3);
  });

  it('completing a trace sends its new snapshot (completed, endedAt set) with no events', async () => {
    const agent = await server.createAgent();
    const sse = await watch(agent.agentId);
    const run = runBatch({
      events: 2,
      trace: { startedAt: new Date(Date.now() - 5_000).toISOString() },
    });
    await post(agent, run.body);
    await sse.waitFor((c) => traceCount(c) === 1, 5_000, 'the running trace');
    expect(sse.traces()[0]?.item.trace.status).toBe('running');

    const done = await send(server.url, `/v1/traces/${run.trace.id}/complete`, undefined, {
      method: 'POST',
      token: agent.apiKey,
    });
    expect(done.status).toBe(200);
    await sse.waitFor((c) => traceCount(c) === 2, 5_000, 'the completion');
    const message = sse.traces()[1]!;
    expect(message.id).toMatch(STREAM_ID);
    expect(message.item.events).toEqual([]);
    expect(message.item.trace).toMatchObject({
      id: run.trace.id,
      agentId: agent.agentId,
      status: 'completed',
      endedAt: expect.any(String),
      durationMs: expect.any(Number),
      eventCount: 2,
    });
    expect(Date.parse(message.item.trace.endedAt)).toBeGreaterThan(Date.parse(run.trace.startedAt));
    const token = await server.userToken(newUser(), agent.agentId);
    const stored = await send(server.url, `/v1/traces/${run.trace.id}`, undefined, { token });
    expect(message.item.trace).toEqual(stored.body.trace);

    // with a body: the given status and fields
    await send(
      server.url,
      `/v1/traces/${run.trace.id}/complete`,
      { status: 'errored', errorMessage: 'RPC 429' },
      { method: 'POST', token: agent.apiKey },
    );
    await sse.waitFor((c) => traceCount(c) === 3, 5_000, 'the second completion');
    expect(sse.traces()[2]?.item).toMatchObject({
      trace: { id: run.trace.id, status: 'errored', errorMessage: 'RPC 429' },
      events: [],
    });
    // a refused completion sends nothing
    const missing = await send(server.url, `/v1/traces/${newId()}/complete`, undefined, {
      method: 'POST',
      token: agent.apiKey,
    });
    expect(isProblem(missing, 404)).toBe(true);
    const marker = await settle(agent, sse);
    expect(traceIds(sse)).toEqual([run.trace.id, run.trace.id, run.trace.id, marker]);
  });

  it('Last-Event-ID resumes after that message; an unknown or garbage id gets the full replay', async () => {
    const agent = await server.createAgent();
    const batches = Array.from({ length: 5 }, () => runBatch());
    for (const batch of batches) await post(agent, batch.body);
    const all = batches.map((b) => b.trace.id);

    const first = await watch(agent.agentId);
    await first.waitFor((c) => traceCount(c) === 5, 5_000, 'the replay');
    const ids = first.traces().map((t) => t.id as string);
    expect(traceIds(first)).toEqual(all);
    first.close();

    const afterThird = await watch(agent.agentId, { headers: { 'last-event-id': ids[2]! } });
    const afterLast = await watch(agent.agentId, { headers: { 'last-event-id': ids[4]! } });
    const unknownIds = ['garbage', '', '42', '0-0', `${Number(ids[0]!.split('-')[0]) - 60_000}-0`];
    const fresh: SseClient[] = [];
    for (const id of unknownIds)
      fresh.push(await watch(agent.agentId, { headers: { 'last-event-id': id } }));
    for (const sse of [afterThird, afterLast, ...fresh]) expect(sse.status).toBe(200);
    const marker = await settle(agent, afterThird, afterLast, ...fresh);

    expect(traceIds(afterThird)).toEqual([all[3], all[4], marker]);
    expect(afterThird.traces()[0]?.id).toBe(ids[3]);
    expect(traceIds(afterLast)).toEqual([marker]);
    fresh.forEach((sse, i) => {
      expect(traceIds(sse), `Last-Event-ID: ${JSON.stringify(unknownIds[i])}`).toEqual([
        ...all,
        marker,
      ]);
      expect(sse.traces()[0]?.id).toBe(ids[0]);
      expect(sse.events.filter((e) => e.event === 'warning')).toEqual([]);
    });
  });

  it('a Last-Event-ID of the id form but too large for any stream gets the full replay, no warning', async () => {
    // 20 digits each, as the stream id check allows, but past 2^64 - 1: no Redis stream id
    const agent = await server.createAgent();
    const batches = [runBatch(), runBatch()];
    for (const batch of batches) await post(agent, batch.body);
    const sse = await watch(agent.agentId, {
      headers: { 'last-event-id': '99999999999999999999-99999999999999999999' },
    });
    expect(sse.status).toBe(200);
    const marker = await settle(agent, sse);
    expect(traceIds(sse)).toEqual([...batches.map((b) => b.trace.id), marker]);
    expect(sse.events.filter((e) => e.event === 'warning')).toEqual([]);
  });

  it('a Last-Event-ID that is not an id gets the full replay however long it is, never a 400', async () => {
    const agent = await server.createAgent();
    const batches = [runBatch(), runBatch()];
    for (const batch of batches) await post(agent, batch.body);
    const values = ['x'.repeat(100), '1-'.repeat(50), `${'9'.repeat(60)}-${'9'.repeat(39)}`];
    const streams: SseClient[] = [];
    for (const value of values) {
      expect(value.length).toBeGreaterThanOrEqual(100);
      const sse = await watch(agent.agentId, { headers: { 'last-event-id': value } });
      expect(sse.status, sse.body).toBe(200);
      streams.push(sse);
    }
    const marker = await settle(agent, ...streams);
    for (const sse of streams) {
      expect(traceIds(sse)).toEqual([...batches.map((b) => b.trace.id), marker]);
      expect(sse.events.filter((e) => e.event === 'warning')).toEqual([]);
    }
  });

  it('a resumed stream of multi-item batches continues after exactly that item', async () => {
    const agent = await server.createAgent();
    const multi = multiItemBatch(3);
    const after = runBatch();
    await post(agent, multi);
    await post(agent, after.body);
    const first = await watch(agent.agentId);
    await first.waitFor((c) => traceCount(c) === 4, 5_000, 'the replay');
    const ids = first.traces().map((t) => t.id as string);
    // one entry per batch: its items are E, E-1, E-2
    expect(ids.slice(0, 3)).toEqual([ids[0], `${ids[0]}-1`, `${ids[0]}-2`]);
    expect(ids[3]).toMatch(/^\d+-\d+$/);
    first.close();

    const resumed = await watch(agent.agentId, { headers: { 'last-event-id': ids[1]! } });
    const marker = await settle(agent, resumed);
    expect(resumed.traces().map((t) => t.id)).toEqual([ids[2], ids[3], expect.any(String)]);
    expect(traceIds(resumed)).toEqual([multi.items[2]!.trace.id, after.trace.id, marker]);
  });

  it('no gap and no duplicate across the replay to live hand-off while batches keep coming', async () => {
    const agent = await server.createAgent();
    // ten clients connect at different moments, each a hand-off under load
    const thresholds = [5, 14, 23, 32, 41, 50, 59, 68, 77, 86];
    const tokens = await Promise.all(
      thresholds.map(() => server.userToken(newUser(), agent.agentId)),
    );
    const posted: string[] = [];
    const poster = async () => {
      for (let i = 0; i < 25; i++) {
        const batch = runBatch();
        await post(agent, batch.body);
        posted.push(batch.trace.id);
      }
    };
    const watchers: SseClient[] = [];
    const connect = async () => {
      for (const [i, at] of thresholds.entries()) {
        await until(() => posted.length >= at, `${at} batches`, 20_000);
        watchers.push(await watch(agent.agentId, { token: tokens[i] }));
      }
    };
    await Promise.all([poster(), poster(), poster(), poster(), connect()]);
    expect(posted).toHaveLength(100);

    const marker = await settle(agent, ...watchers);
    const reference = traceIds(watchers[0]!);
    expect(reference).toHaveLength(101);
    expect(new Set(reference)).toEqual(new Set([...posted, marker]));
    expect(reference.at(-1)).toBe(marker);
    for (const sse of watchers) {
      // every batch exactly once, in the one order of the agent's stream
      expect(traceIds(sse)).toEqual(reference);
      expectStrictlyIncreasing(sse.events.map((e) => e.id));
    }
    const after = await watch(agent.agentId);
    await after.waitFor((c) => traceCount(c) === 101, 5_000, 'the replay');
    expect(traceIds(after)).toEqual(reference);
  });

  it('401 problem for a missing, malformed, expired or wrongly signed token', async () => {
    const agent = await server.createAgent();
    const user = newUser();
    await server.userToken(user, agent.agentId, 'owner');
    const otherSecret = randomBytes(32).toString('hex');
    const cases: [string, string | undefined][] = [
      ['missing', undefined],
      ['malformed', 'not-a-jwt'],
      ['three dots of nothing', 'a.b.c'],
      ['expired', await mintDevToken(server.jwtSecret, user, -3_600)],
      ['wrongly signed', await mintDevToken(otherSecret, user)],
    ];
    for (const [what, token] of cases) {
      const sse = await open(agent.agentId, token);
      expect(sse.status, what).toBe(401);
      expectProblem(sse, 401);
      expect(sse.headers?.get('www-authenticate'), what).toMatch(/^Bearer/);
    }
  });

  it('403 problem without a role on the agent, or for an agent that does not exist; 200 for viewer, editor and owner', async () => {
    const agent = await server.createAgent();
    const stranger = await mintDevToken(server.jwtSecret, newUser());
    const noRole = await open(agent.agentId, stranger);
    const noRoleProblem = expectProblem(noRole, 403);

    const member = await server.userToken(newUser(), agent.agentId, 'owner');
    const nowhere = await open(`no-such-agent-${newId()}`, member);
    const nowhereProblem = expectProblem(nowhere, 403);
    // existence is not revealed
    expect(nowhereProblem.detail).toBe(noRoleProblem.detail);

    // a role on another agent grants nothing here
    const other = await server.createAgent();
    const elsewhere = await open(other.agentId, member);
    expectProblem(elsewhere, 403);

    const batch = runBatch();
    await post(agent, batch.body);
    for (const role of ['viewer', 'editor', 'owner'] as const) {
      const sse = await watch(agent.agentId, { role });
      expect(sse.status, role).toBe(200);
      await sse.waitFor((c) => traceCount(c) === 1, 5_000, `the replay as ${role}`);
      expect(traceIds(sse)).toEqual([batch.trace.id]);
    }
  });

  it('429 problem past LIVE_MAX_STREAMS_PER_USER, and a new stream once one closes', async () => {
    const agent = await server.createAgent();
    const user = newUser();
    const token = await server.userToken(user, agent.agentId);
    const one = await watch(agent.agentId, { token });
    const two = await watch(agent.agentId, { token });
    expect([one.status, two.status]).toEqual([200, 200]);

    const three = await watch(agent.agentId, { token });
    expectProblem(three, 429);
    expect(Number(three.headers?.get('retry-after'))).toBeGreaterThan(0);
    // the cap is per user: someone else still gets in
    const someoneElse = await watch(agent.agentId);
    expect(someoneElse.status).toBe(200);

    one.close();
    let again: SseClient | undefined;
    const deadline = Date.now() + 3_000;
    while (Date.now() < deadline) {
      again = await watch(agent.agentId, { token });
      if (again.status !== 429) break;
      await sleep(50);
    }
    expect(again?.status).toBe(200);
    const batch = runBatch();
    await post(agent, batch.body);
    await again!.waitFor((c) => hasTrace(c, batch.trace.id), 5_000, 'delivery');
    await two.waitFor((c) => hasTrace(c, batch.trace.id), 5_000, 'delivery');
  });

  it('a client that goes away before its stream is set up leaves no stream slot behind', async () => {
    const agent = await server.createAgent();
    const tokens = await Promise.all(
      Array.from({ length: 8 }, () => server.userToken(newUser(), agent.agentId)),
    );
    await until(() => server.streams.size === 0, 'the streams of earlier tests to be released');
    // each user fills their two slots with requests that are gone while the token is checked
    // and the role looked up (whether one is gone before or after the stream is set up varies)
    for (const token of tokens)
      for (let i = 0; i < 2; i++) {
        const socket = net.connect(Number(new URL(server.url).port), '127.0.0.1');
        socket.on('error', () => {});
        await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
        socket.write(
          `GET /v1/agents/${agent.agentId}/live HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
            `Authorization: Bearer ${token}\r\nAccept: text/event-stream\r\n\r\n`,
        );
        socket.destroy();
      }
    await until(() => server.streams.size === 0, 'every abandoned stream to be released', 2_000);
    // and each of those users gets a stream at once
    for (const token of tokens) {
      const sse = await watch(agent.agentId, { token });
      expect(sse.status, sse.body).toBe(200);
    }
    const batch = runBatch();
    await post(agent, batch.body);
    const last = await watch(agent.agentId, { token: tokens[0]! });
    await last.waitFor((c) => hasTrace(c, batch.trace.id), 5_000, 'the replay');
  });

  it('sends heartbeat comments on an idle stream', async () => {
    const agent = await server.createAgent();
    const opened = Date.now();
    const sse = await watch(agent.agentId);
    const heartbeats = () => sse.comments.filter((c) => c === 'heartbeat').length;
    await sse.waitFor(() => heartbeats() >= 3, 3_000, 'three heartbeats');
    // about every 200 ms, not in a burst
    expect(Date.now() - opened).toBeGreaterThanOrEqual(3 * 200 - 50);
    expect(sse.events).toEqual([]);
    expect(sse.isEnded).toBe(false);
  });

  it('ends the stream when the identity JWT expires', async () => {
    const agent = await server.createAgent();
    const user = newUser();
    await server.userToken(user, agent.agentId);
    const token = await mintDevToken(server.jwtSecret, user, 2);
    const expiresAt = tokenExp(token) * 1000;
    const sse = await watch(agent.agentId, { token });
    expect(sse.status).toBe(200);
    const batch = runBatch();
    await post(agent, batch.body);
    await sse.waitFor((c) => traceCount(c) === 1, 5_000, 'delivery before expiry');
    expect(sse.isEnded).toBe(false);

    await within(sse.ended, 5_000, 'the end of the stream');
    const endedAt = Date.now();
    expect(endedAt).toBeGreaterThanOrEqual(expiresAt - 50);
    expect(endedAt).toBeLessThan(expiresAt + 1_500);
  });

  it(`replays only the newest ${LIVE_BUFFER} batches; an evicted Last-Event-ID gets them all`, async () => {
    const agent = await server.createAgent();
    const oldest = runBatch();
    await post(agent, oldest.body);
    const early = await watch(agent.agentId);
    await early.waitFor((c) => traceCount(c) === 1, 5_000, 'the first batch');
    const oldestId = early.traces()[0]!.id as string;

    // fill the buffer quickly through the bus, then the newest batch over HTTP
    const fillers = Array.from({ length: LIVE_BUFFER - 1 }, (_, i) =>
      fillerItem(agent.agentId, `filler ${i}`),
    );
    // one batch each: the buffer counts batches
    const fillerIds: string[] = [];
    for (const filler of fillers)
      fillerIds.push(...(await server.bus.publish(agent.agentId, [filler])));
    const newest = runBatch();
    await post(agent, newest.body);

    // a stream that was open sees all 1001, in order
    await early.waitFor((c) => traceCount(c) === LIVE_BUFFER + 1, 10_000, 'every batch');
    expect(early.traces().map((t) => t.id)).toEqual([
      oldestId,
      ...fillerIds,
      early.traces().at(-1)!.id,
    ]);
    expect(traceIds(early).at(-1)).toBe(newest.trace.id);

    const fresh = await watch(agent.agentId);
    const evicted = await watch(agent.agentId, { headers: { 'last-event-id': oldestId } });
    const resumed = await watch(agent.agentId, {
      headers: { 'last-event-id': fillerIds[499]! },
    });
    for (const sse of [fresh, evicted])
      await sse.waitFor((c) => traceCount(c) >= LIVE_BUFFER, 10_000, 'the full replay');
    await resumed.waitFor((c) => traceCount(c) >= 500, 10_000, 'the resumed replay');
    const marker = await settle(agent, fresh, evicted, resumed);

    for (const sse of [fresh, evicted]) {
      expect(sse.traces()).toHaveLength(LIVE_BUFFER + 1);
      expect(sse.traces()[0]?.id).toBe(fillerIds[0]);
      expect(traceIds(sse)).not.toContain(oldest.trace.id);
      expect(traceIds(sse).slice(-2)).toEqual([newest.trace.id, marker]);
      expect(sse.traces().at(-2)?.item).toEqual(asStored(agent, newest.body)[0]);
      expectStrictlyIncreasing(sse.events.map((e) => e.id));
    }
    expect(
      resumed
        .traces()
        .map((t) => t.id)
        .slice(0, 499),
    ).toEqual(fillerIds.slice(500));
    expect(traceIds(resumed).slice(499)).toEqual([newest.trace.id, marker]);
  });

  it('a client that keeps up receives a full replay of realistic batches without being cut off', async () => {
    // 1000 batches of about 2.5 KB (a trace and three model calls): about 2.5 MB to replay,
    // more than LIVE_MAX_QUEUE_BYTES (1 MB) but read as fast as it is sent
    expect(server.config.live.maxQueueBytes).toBe(1024 * 1024);
    const agent = await server.createAgent();
    const items = Array.from({ length: LIVE_BUFFER }, () => {
      const trace = traceSnapshot({ agentId: agent.agentId, eventCount: 3 });
      return JSON.stringify({
        trace,
        events: [0, 1, 2].map((i) => llmCallEvent(trace.id, i)),
      });
    });
    expect(items.join('').length).toBeGreaterThan(2 * server.config.live.maxQueueBytes);
    for (const item of items) await server.bus.publish(agent.agentId, [item]);

    const sse = await watch(agent.agentId);
    await sse.waitFor((c) => traceCount(c) === LIVE_BUFFER, 10_000, 'the full replay');
    const marker = await settle(agent, sse);
    expect(traceIds(sse).at(-1)).toBe(marker);
    expect(sse.isEnded).toBe(false);
  });
});
