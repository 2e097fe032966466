import http from 'node:http';
import net from 'node:net';
import { traceHashOf, type Event, type Trace } from '@flightlog/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { at, llmCallEvent, newId, runBatch, traceSnapshot } from '../fixtures/batches.js';
import { newMasterKey, seal } from '../fixtures/runs.js';
import {
  STAGED_COST_USD,
  STAGED_LAMPORTS,
  stageRuns,
  stagedRunId,
} from '../fixtures/staged-runs.js';
import { describeEngines } from '../harness/engines.js';
import { isProblem, postBatch, send, type HttpResult } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { waitFor } from '../harness/wait.js';
import { EXPORT_TRACES_PER_PAGE } from '../../src/lifecycle/export.js';

/** One line of an export. */
interface Line {
  trace: Trace;
  events: Event[];
  cursor: string;
}

/** The lines of a whole NDJSON answer (each ends with a newline, the last one included). */
function linesOf(text: string): Line[] {
  expect(text === '' || text.endsWith('\n'), 'the answer ends with a whole line').toBe(true);
  return text
    .split('\n')
    .slice(0, -1)
    .map((line) => JSON.parse(line) as Line);
}

describeEngines('export [%s]', (engine) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(engine, {
      export: {
        // a reader that takes nothing for this long is cut (the stall test)
        stallTimeoutMs: 3_000,
        maxPerUser: 2,
      },
    });
  });
  afterAll(() => server.close());

  const exportOf = (agentId: string, token: string, query = ''): Promise<HttpResult> =>
    send(server.url, `/v1/agents/${encodeURIComponent(agentId)}/export${query}`, undefined, {
      token,
    });
  const exported = async (agentId: string, token: string, query = ''): Promise<Line[]> => {
    const res = await exportOf(agentId, token, query);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/x-ndjson; charset=utf-8');
    return linesOf(res.text);
  };

  /** A trace and every one of its events through the read API, page after page. */
  async function readWhole(
    traceId: string,
    token: string,
  ): Promise<{ trace: Trace; events: Event[] }> {
    const events: Event[] = [];
    let cursor: string | null = null;
    let trace: Trace | undefined;
    do {
      const query: string = cursor === null ? '?limit=1000' : `?limit=1000&cursor=${cursor}`;
      const res = await send(server.url, `/v1/traces/${traceId}${query}`, undefined, { token });
      expect(res.status, res.text).toBe(200);
      trace = res.body.trace as Trace;
      events.push(...(res.body.events as Event[]));
      cursor = res.body.nextCursor as string | null;
    } while (cursor !== null);
    return { trace, events };
  }

  async function agentWith(role: 'owner' | 'editor' | 'viewer' = 'viewer') {
    const agent = await server.createAgent();
    const token = await server.userToken(`${role}-${newId()}`, agent.agentId, role);
    return { agent, token };
  }

  const post = async (agent: TestAgent, body: unknown) => {
    const res = await postBatch(server.url, agent.apiKey, body);
    expect(res.status, res.text).toBe(202);
  };

  it('round-trips every field exactly: decimals, lamports above 2^64, encrypted envelopes, nested payloads', async () => {
    const { agent, token } = await agentWith('viewer');
    const key = newMasterKey();
    const trace = traceSnapshot({
      status: 'errored',
      startedAt: at(0),
      endedAt: at(4_321),
      durationMs: 4_321.5,
      inputSummary: 'Swap 1 SOL → USDC\nat the "best" price \\ café ✓ 😀',
      outputSummary: 'Swapped at 0.10',
      errorMessage: 'slippage 1.5% > 1%',
      tags: ['café ✓', 'a"b', 'back\\slash', ''],
      eventCount: 5,
      totalTokens: 9_007_199_254_740_991,
      totalCostUsd: '0.10',
      totalLamports: '123456789012345678901234567890',
      chainTxCount: 1,
      toolsCalled: ['swap.quote', 'wallet.balance'],
      anchorSignature:
        '5VERv8NMvzbJMEkV8xnrLkEaWRtSz9CosKDYjCJjBRnbJLgp8uirBgmQpjKhoR4tjF3ZpRzrFmBV6UjKdiSZkQUW',
      anchorSlot: '18446744073709551617',
      merkleProof: '["ab","cd"]',
      traceHash: 'f'.repeat(64),
    });
    const llm = llmCallEvent(trace.id, 0);
    const envelope = seal({ name: 'vault.lookup', input: { seedHint: 'SECRET-1' } }, key);
    const events: Event[] = [
      llm,
      {
        ...llmCallEvent(trace.id, 1),
        type: 'tool_call',
        payloadEncrypted: true,
        payload: envelope,
        parentEventId: llm.id,
      },
      {
        ...llmCallEvent(trace.id, 2),
        type: 'chain_tx',
        status: 'error',
        errorMessage: 'blockhash not found',
        payload: {
          signature: null,
          lamports: '340282366920938463463374607431768211456',
          feeLamports: '18446744073709551616',
          slot: '18446744073709551617',
          network: 'devnet',
        },
      },
      {
        ...llmCallEvent(trace.id, 3),
        type: 'custom',
        endedAt: null,
        durationMs: null,
        payload: {
          name: 'metadata',
          data: {
            nested: { deeper: [1, -0.5, 1e21, 1.7976931348623157e308, true, null, { a: [] }] },
            text: 'nul \u0000, lone \ud800, emoji 😀, quote " and \\',
            '2': 'integer-like key',
            empty: {},
          },
        },
      },
      {
        ...llmCallEvent(trace.id, 4),
        type: 'x402_payment',
        payload: { resource: 'https://x', amount: '0.000001', asset: 'USDC' },
      },
    ];
    const empty = traceSnapshot({ startedAt: at(10_000), tags: [] });
    await post(agent, { batchId: newId(), items: [{ trace, events: events.slice(0, 2) }] });
    await post(agent, { batchId: newId(), items: [{ trace, events: events.slice(2) }] });
    await post(agent, { batchId: newId(), items: [{ trace: empty, events: [] }] });

    const res = await exportOf(agent.agentId, token);
    expect(res.status, res.text).toBe(200);
    const lines = linesOf(res.text);
    expect(lines.map((line) => line.trace.id)).toEqual([trace.id, empty.id]);
    const [first, second] = lines as [Line, Line];
    // exactly what was sent (the agent id is the key's; every timestamp was sent in milliseconds)
    // the proof fields are the server's: the client's are not kept, and the fingerprint is null
    // until the worker computed it, then the hash of the run as exported
    const { traceHash, ...stored } = first.trace;
    expect(stored).toEqual({
      ...trace,
      agentId: agent.agentId,
      anchorSignature: null,
      anchorSlot: null,
      merkleProof: null,
      traceHash: undefined,
      shareToken: null,
    });
    expect([null, traceHashOf(first.trace, first.events)]).toContain(traceHash);
    expect(first.events).toEqual(events);
    expect(first.events[1]?.payload).toEqual(envelope);
    expect(second).toMatchObject({ trace: { ...empty, agentId: agent.agentId }, events: [] });
    // decimals stay strings, never numbers
    const raw = res.text.split('\n')[0] as string;
    expect(raw).toContain('"totalCostUsd":"0.10"');
    expect(raw).toContain('"totalLamports":"123456789012345678901234567890"');
    expect(raw).toContain('"lamports":"340282366920938463463374607431768211456"');
    expect(raw).toContain(String.raw`nul \u0000, lone \ud800`);
    // and what the read API answers for the same trace, field for field
    for (const line of lines) {
      const { cursor, ...rest } = line;
      expect(rest).toEqual(await readWhole(line.trace.id, token));
      expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    }
  });

  it('since is inclusive and until exclusive, on startedAt; runs come oldest first', async () => {
    const { agent, token } = await agentWith('viewer');
    const starts = [at(3_000), at(0), at(2_000), '2026-11-01T12:00:01.000500Z', at(1_000)];
    const traces = starts.map((startedAt) => traceSnapshot({ startedAt }));
    for (const trace of traces)
      await post(agent, { batchId: newId(), items: [{ trace, events: [] }] });
    const ids = (lines: Line[]) => lines.map((line) => line.trace.startedAt);

    expect(ids(await exported(agent.agentId, token))).toEqual([
      at(0),
      at(1_000),
      at(1_000), // 12:00:01.000500, shown to the millisecond
      at(2_000),
      at(3_000),
    ]);
    const within = await exported(agent.agentId, token, `?since=${at(1_000)}&until=${at(3_000)}`);
    expect(within.map((line) => line.trace.id)).toEqual([
      traces[4]!.id,
      traces[3]!.id,
      traces[2]!.id,
    ]);
    // microseconds count: since 12:00:01.0001 leaves out 12:00:01.000
    const fine = await exported(agent.agentId, token, '?since=2026-11-01T12:00:01.0001Z');
    expect(fine.map((line) => line.trace.id)).toEqual([
      traces[3]!.id,
      traces[2]!.id,
      traces[0]!.id,
    ]);
    expect(await exported(agent.agentId, token, `?until=${at(0)}`)).toEqual([]);
    expect(await exported(agent.agentId, token, `?since=${at(5_000)}`)).toEqual([]);
    // a time zone other than Z names the same instant
    const offset = await exported(agent.agentId, token, '?since=2026-11-01T13:00:02%2B01:00');
    expect(offset.map((line) => line.trace.id)).toEqual([traces[2]!.id, traces[0]!.id]);
  });

  it('a resumed export neither repeats nor skips a run, whichever line it resumes after', async () => {
    const { agent, token } = await agentWith('viewer');
    const runs = 2 * EXPORT_TRACES_PER_PAGE + 17;
    await stageRuns(server.store.sql, agent.agentId, { prefix: newId(), runs, stepMs: 0 });
    // runs started at the same microsecond are ordered by id; these three differ by microseconds
    const close = ['.000001', '.000002', '.000003'].map((micros) =>
      traceSnapshot({ startedAt: `2026-01-01T00:00:00${micros}Z` }),
    );
    for (const trace of [...close].reverse())
      await post(agent, { batchId: newId(), items: [{ trace, events: [] }] });

    const all = await exported(agent.agentId, token);
    expect(all).toHaveLength(runs + 3);
    expect(new Set(all.map((line) => line.trace.id)).size).toBe(runs + 3);
    // the staged runs all started at the first instant, before the three that follow
    expect(all.slice(-3).map((line) => line.trace.id)).toEqual(close.map((t) => t.id));

    for (const after of [
      1,
      EXPORT_TRACES_PER_PAGE - 1,
      EXPORT_TRACES_PER_PAGE,
      77,
      runs,
      runs + 2,
    ]) {
      const cursor = all[after - 1]!.cursor;
      const rest = await exported(agent.agentId, token, `?cursor=${cursor}`);
      expect(
        [...all.slice(0, after), ...rest].map((line) => line.trace.id),
        `resumed after line ${after}`,
      ).toEqual(all.map((line) => line.trace.id));
    }
    // the last line's cursor: nothing after it, until a later run arrives
    const last = all[all.length - 1]!.cursor;
    expect(await exported(agent.agentId, token, `?cursor=${last}`)).toEqual([]);
    const later = traceSnapshot({ startedAt: '2026-06-01T00:00:00.000Z' });
    await post(agent, { batchId: newId(), items: [{ trace: later, events: [] }] });
    expect(
      (await exported(agent.agentId, token, `?cursor=${last}`)).map((l) => l.trace.id),
    ).toEqual([later.id]);
  });

  it('a client that received some lines and went away resumes from the last whole one', async () => {
    const { agent, token } = await agentWith('editor');
    const prefix = newId();
    await stageRuns(server.store.sql, agent.agentId, { prefix, runs: 400, payloadBytes: 1_000 });
    // read the stream until 150 whole lines came, then hang up mid-line
    const received = await new Promise<string>((resolve, reject) => {
      let text = '';
      const request = http.get(
        `${server.url}/v1/agents/${agent.agentId}/export`,
        { headers: { authorization: `Bearer ${token}` } },
        (res) => {
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            text += chunk;
            if (text.split('\n').length > 151) {
              request.destroy();
              resolve(text);
            }
          });
          res.on('error', () => {});
        },
      );
      request.on('error', () => {});
      request.on('close', () => resolve(text));
      setTimeout(() => reject(new Error('no 150 lines')), 20_000).unref();
    });
    const whole = received.slice(0, received.lastIndexOf('\n') + 1);
    const got = linesOf(whole);
    expect(got.length).toBeGreaterThanOrEqual(150);
    const rest = await exported(agent.agentId, token, `?cursor=${got[got.length - 1]!.cursor}`);
    expect([...got, ...rest].map((line) => line.trace.id)).toEqual(
      Array.from({ length: 400 }, (_, i) => stagedRunId(prefix, i + 1)),
    );
    const staged = rest[0]!;
    expect(staged.trace).toMatchObject({
      totalCostUsd: STAGED_COST_USD,
      totalLamports: STAGED_LAMPORTS,
      tags: ['staged', 'export'],
    });
    expect(staged.events.map((e) => e.sequence)).toEqual([0, 1, 2]);
  });

  it('any role exports; a stranger and an unknown agent get the read API’s 404; no token 401', async () => {
    const { agent, token: viewer } = await agentWith('viewer');
    const editor = await server.userToken(`editor-${newId()}`, agent.agentId, 'editor');
    const owner = await server.userToken(`owner-${newId()}`, agent.agentId, 'owner');
    const run = runBatch({ events: 3 });
    await post(agent, run.body);
    const other = await agentWith('owner');
    const stranger = other.token;

    const answers = await Promise.all(
      [viewer, editor, owner].map((t) => exported(agent.agentId, t)),
    );
    for (const lines of answers) expect(lines.map((l) => l.trace.id)).toEqual([run.trace.id]);

    const foreign = await exportOf(agent.agentId, stranger);
    const unknown = await exportOf(`no-such-${newId()}`, viewer);
    const listed = await send(server.url, `/v1/agents/${agent.agentId}/traces`, undefined, {
      token: stranger,
    });
    for (const res of [foreign, unknown]) {
      expect(isProblem(res, 404), res.text).toBe(true);
      expect(res.body.detail).toBe(listed.body.detail);
      expect(res.body.title).toBe(listed.body.title);
      expect(res.text).not.toContain(run.trace.id);
    }
    // with a cursor from the agent's own export: still nothing
    const cursor = answers[0]![0]!.cursor;
    expect(isProblem(await exportOf(agent.agentId, stranger, `?cursor=${cursor}`), 404)).toBe(true);
    const anonymous = await send(server.url, `/v1/agents/${agent.agentId}/export`);
    expect(isProblem(anonymous, 401)).toBe(true);
    expect(isProblem(await exportOf(agent.agentId, 'not-a-token'), 401)).toBe(true);
  });

  it('a query that is not valid is a 400 problem naming the field', async () => {
    const { agent, token } = await agentWith('viewer');
    const cases: [string, string][] = [
      ['?since=yesterday', '/querystring/since'],
      ['?since=2026-11-01', '/querystring/since'],
      ['?until=2026-13-01T00:00:00Z', '/querystring/until'],
      ['?until=2026-02-30T00:00:00Z', '/querystring/until'],
      [`?since=${at(2_000)}&until=${at(1_000)}`, '/querystring/until'],
      ['?cursor=not-a-cursor', '/querystring/cursor'],
      [
        `?cursor=${Buffer.from('["2026-01-01T00:00:00.000000Z","a b"]').toString('base64url')}`,
        '/querystring/cursor',
      ],
      ['?limit=5', '/querystring/limit'],
    ];
    for (const [query, pointer] of cases) {
      const res = await exportOf(agent.agentId, token, query);
      expect(isProblem(res, 400), `${query}: ${res.text}`).toBe(true);
      expect(
        res.body.errors.map((e: { pointer: string }) => e.pointer),
        query,
      ).toEqual([pointer]);
    }
    // a stranger's bad query is refused the same way: it says nothing about the agent
    const stranger = await server.userToken(`stranger-${newId()}`);
    expect(isProblem(await exportOf(agent.agentId, stranger, '?since=x'), 400)).toBe(true);
  });

  it('a run of 12,000 events is one whole line, every event once and in order', async () => {
    const { agent, token } = await agentWith('viewer');
    const trace = traceSnapshot({ eventCount: 12_000 });
    const big = (sequence: number): Event => ({
      ...llmCallEvent(trace.id, sequence),
      type: 'custom',
      payload: { name: 'blob', data: `${sequence} `.padEnd(400_000, 'y') },
    });
    // sent newest first, so the order comes from the store
    for (let end = 12_000; end > 0; end -= 1_000) {
      const events = Array.from({ length: 1_000 }, (_, i) => {
        const sequence = end - 1_000 + i;
        return sequence % 4_000 === 7 ? big(sequence) : llmCallEvent(trace.id, sequence);
      });
      await post(agent, { batchId: newId(), items: [{ trace, events }] });
    }
    const before = traceSnapshot({ startedAt: at(-1) });
    const after = runBatch({ events: 2, trace: { startedAt: at(1) } });
    await post(agent, { batchId: newId(), items: [{ trace: before, events: [] }] });
    await post(agent, after.body);

    const lines = await exported(agent.agentId, token);
    expect(lines.map((line) => line.trace.id)).toEqual([before.id, trace.id, after.trace.id]);
    const whole = lines[1]!;
    expect(whole.events).toHaveLength(12_000);
    expect(whole.events.map((e) => e.sequence)).toEqual(
      Array.from({ length: 12_000 }, (_, i) => i),
    );
    const { cursor: _cursor, ...rest } = whole;
    expect(rest).toEqual(await readWhole(trace.id, token));
    expect(lines[2]!.events).toEqual(after.events);
  }, 120_000);

  it('runs whose first events pass the byte budget of a page are read in parts, each whole', async () => {
    const { agent, token } = await agentWith('viewer');
    // five runs of three 400 KB events, and runs of none between them: the first events of a
    // page of runs (1 MiB at most) stop in the middle of the second run
    const runs = Array.from({ length: 5 }, (_, r) => {
      const trace = traceSnapshot({ startedAt: at(r * 10), eventCount: 3 });
      const events = Array.from({ length: 3 }, (_, i) => ({
        ...llmCallEvent(trace.id, i),
        type: 'custom' as const,
        payload: { name: 'blob', data: `${r}.${i} `.padEnd(400_000, 'z') },
      }));
      return { trace, events };
    });
    const gaps = runs.map((_, r) => traceSnapshot({ startedAt: at(r * 10 + 5) }));
    for (const [r, run] of runs.entries()) {
      await post(agent, { batchId: newId(), items: [run] });
      await post(agent, { batchId: newId(), items: [{ trace: gaps[r]!, events: [] }] });
    }
    const lines = await exported(agent.agentId, token);
    expect(lines.map((line) => line.trace.id)).toEqual(
      runs.flatMap((run, r) => [run.trace.id, gaps[r]!.id]),
    );
    for (const [r, run] of runs.entries()) {
      expect(lines[2 * r]!.events).toEqual(run.events);
      expect(lines[2 * r + 1]!.events).toEqual([]);
    }
  });

  describe('reading and stopping', () => {
    let agent: TestAgent;
    let token: string;
    const runs = 3_000;
    beforeAll(async () => {
      ({ agent, token } = await agentWith('viewer'));
      // ~75 MB of NDJSON: more than a loopback connection's buffers hold (tcp_rmem grows to
      // 32 MiB here), so a reader that stops reading does stall the export
      await stageRuns(server.store.sql, agent.agentId, {
        prefix: newId(),
        runs,
        payloadBytes: 8_000,
      });
    }, 120_000);

    /** An export request on a raw socket that reads its first bytes, then nothing more. */
    async function stalledExport(user: string): Promise<net.Socket> {
      return stalledExportOn(server, agent.agentId, user);
    }

    /** Everything a paused socket holds and still receives, once resumed, until it closes. */
    const drain = (socket: net.Socket) =>
      new Promise<string>((resolve) => {
        let text = '';
        socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
        socket.once('close', () => resolve(text));
        socket.resume();
      });

    it('a client that goes away mid-stream stops the reads, frees its slot, and the server keeps serving', async () => {
      const exports = server.store.exports;
      const original = exports.tracePage.bind(exports);
      let pages = 0;
      exports.tracePage = (...args) => {
        pages++;
        return original(...args);
      };
      try {
        for (let attempt = 0; attempt < 3; attempt++) {
          await new Promise<void>((resolve, reject) => {
            const request = http.get(
              `${server.url}/v1/agents/${agent.agentId}/export`,
              { headers: { authorization: `Bearer ${token}` } },
              (res) => {
                expect(res.statusCode).toBe(200);
                res.once('data', () => {
                  request.destroy();
                  resolve();
                });
              },
            );
            request.on('error', () => {});
            setTimeout(() => reject(new Error('no data')), 20_000).unref();
          });
          await waitFor(() => (server.exports.slots.active === 0 ? true : undefined), 'slot freed');
        }
        const read = pages;
        await new Promise((resolve) => setTimeout(resolve, 300));
        expect(pages, 'no read after the clients left').toBe(read);
        // three exports of 60 pages each stopped long before their end
        expect(pages).toBeLessThan((3 * runs) / EXPORT_TRACES_PER_PAGE / 2);
      } finally {
        exports.tracePage = original;
      }
      // the per-user cap (2) would refuse a third export if their slots had been kept
      expect((await send(server.url, '/readyz')).status).toBe(200);
      const again = await exported(agent.agentId, token, '?since=2026-01-01T00:40:00Z');
      expect(again).toHaveLength(runs - 2_400);
      const reading = await send(server.url, `/v1/agents/${agent.agentId}/traces`, undefined, {
        token,
      });
      expect(reading.status).toBe(200);
    }, 120_000);

    it('bounds exports per user (429), and cuts a reader that stops reading', async () => {
      const first = await stalledExport(token);
      const second = await stalledExport(token);
      expect(server.exports.slots.active).toBe(2);
      const third = await exportOf(agent.agentId, token);
      expect(isProblem(third, 429), third.text).toBe(true);
      expect(third.headers.get('retry-after')).toBe('5');
      // another user is not held back by this one's exports
      const other = await server.userToken(`viewer-${newId()}`, agent.agentId, 'viewer');
      expect(await exported(agent.agentId, other, `?until=2026-01-01T00:00:10Z`)).toHaveLength(10);
      // the stalled readers are cut after EXPORT_STALL_TIMEOUT_MS (3 s), freeing their slots
      await waitFor(
        () => (server.exports.slots.active === 0 ? true : undefined),
        'stalled exports cut',
        15_000,
        50,
      );
      // cut, not ended: no chunked terminator, so the client knows it is not the whole export
      for (const text of await Promise.all([drain(first), drain(second)]))
        expect(endedWhole(text)).toBe(false);
      expect(await exported(agent.agentId, token, `?until=2026-01-01T00:00:05Z`)).toHaveLength(5);
    }, 60_000);

    it('shutting down cuts a streaming export at once, and refuses new ones', async () => {
      const closing = await startTestServer(engine, { export: { stallTimeoutMs: 600_000 } });
      try {
        const own = await closing.createAgent();
        const user = await closing.userToken(`viewer-${newId()}`, own.agentId, 'viewer');
        await stageRuns(closing.store.sql, own.agentId, {
          prefix: newId(),
          runs: 2_000,
          payloadBytes: 8_000,
        });
        const socket = await stalledExportOn(closing, own.agentId, user);
        expect(closing.exports.slots.active).toBe(1);
        // the socket's buffers fill: the export waits for its reader
        await new Promise((resolve) => setTimeout(resolve, 2_000));
        expect(closing.exports.slots.active).toBe(1);
        const started = performance.now();
        // a reader that stopped would hold the export until its stall timeout (10 min here)
        await closing.close();
        expect(performance.now() - started).toBeLessThan(10_000);
        expect(closing.exports.slots.active).toBe(0);
        expect(endedWhole(await drain(socket))).toBe(false);
        expect(closing.exports.slots.open('user:late')).toBe('closed');
      } finally {
        await closing.close();
      }
    }, 120_000);

    it('the admin API exports any agent the same; an unknown agent is 404', async () => {
      const query = '?since=2026-01-01T00:00:07Z&until=2026-01-01T00:01:00Z';
      const asAdmin = await send(
        server.url,
        `/admin/v1/agents/${agent.agentId}/export${query}`,
        undefined,
        { token: server.adminToken },
      );
      expect(asAdmin.status, asAdmin.text).toBe(200);
      const asUser = await exportOf(agent.agentId, token, query);
      expect(asAdmin.text).toBe(asUser.text);
      expect(linesOf(asAdmin.text)).toHaveLength(53);
      const unknown = await send(
        server.url,
        `/admin/v1/agents/nobody-${newId()}/export`,
        undefined,
        {
          token: server.adminToken,
        },
      );
      expect(isProblem(unknown, 404)).toBe(true);
      const bad = await send(
        server.url,
        `/admin/v1/agents/${agent.agentId}/export?until=x`,
        undefined,
        {
          token: server.adminToken,
        },
      );
      expect(isProblem(bad, 400)).toBe(true);
      expect(bad.body.errors[0].pointer).toBe('/querystring/until');
    });
  });
});

/** An export request on a raw socket that reads the answer's first bytes, then nothing more. */
async function stalledExportOn(
  server: TestServer,
  agentId: string,
  token: string,
): Promise<net.Socket> {
  const { port } = new URL(server.url);
  const socket = net.connect(Number(port), '127.0.0.1');
  socket.on('error', () => {});
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  socket.write(
    `GET /v1/agents/${agentId}/export HTTP/1.1\r\nHost: x\r\n` +
      `Authorization: Bearer ${token}\r\n\r\n`,
  );
  const head = await new Promise<string>((resolve) =>
    socket.once('data', (chunk: Buffer) => resolve(chunk.toString('latin1'))),
  );
  expect(head).toMatch(/^HTTP\/1.1 200/);
  socket.pause();
  return socket;
}

/** A chunked answer that ended with its terminator: the export's end, not a cut. */
const endedWhole = (text: string): boolean => text.endsWith('\r\n0\r\n\r\n');
