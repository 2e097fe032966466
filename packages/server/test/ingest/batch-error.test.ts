import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEngines } from '../harness/engines.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import { storedTrace, tableCounts } from '../harness/inspect.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import {
  REQUIRED_EVENT_FIELDS,
  REQUIRED_TRACE_FIELDS,
  llmCallEvent,
  newId,
  runBatch,
  traceSnapshot,
} from '../fixtures/batches.js';

type Body = Record<string, unknown>;
const clone = <T>(value: T): T => structuredClone(value);

describeEngines('POST /v1/traces/batch, refused [%s]', (engine) => {
  let server: TestServer;
  let agent: TestAgent;
  beforeAll(async () => {
    server = await startTestServer(engine, { http: { maxBodyBytes: 1024 * 1024 } });
    agent = await server.createAgent();
  });
  afterAll(() => server.close());

  /** Sends a body that must be refused with `status`, and checks nothing was stored. */
  async function refused(
    body: unknown,
    status: number,
    options: Parameters<typeof postBatch>[3] = {},
  ) {
    const before = await tableCounts(server.store);
    const res = await postBatch(server.url, agent.apiKey, body, options);
    expect(res.status, res.text).toBe(status);
    expect(isProblem(res, status), res.text).toBe(true);
    expect(await tableCounts(server.store)).toEqual(before);
    return res;
  }

  const pointers = (res: { body: { errors?: { pointer: string }[] } }) =>
    (res.body.errors ?? []).map((e) => e.pointer);

  describe('validation rules of the spec, each with the JSON pointer of the offending field', () => {
    it('items must contain at least one element', async () => {
      const res = await refused({ batchId: newId(), items: [] }, 400);
      expect(pointers(res)).toEqual(['/items']);
    });

    it.each(['batchId', 'items'])('%s is required', async (field) => {
      const body: Body = { ...runBatch().body };
      delete body[field];
      const res = await refused(body, 400);
      expect(pointers(res)).toEqual([`/${field}`]);
    });

    it.each(REQUIRED_TRACE_FIELDS)('trace.%s is required', async (field) => {
      const { body } = runBatch();
      delete (body.items[0]!.trace as unknown as Body)[field];
      const res = await refused(body, 400);
      expect(pointers(res)).toContain(`/items/0/trace/${field}`);
    });

    it('trace.agentId must be non-empty', async () => {
      const res = await refused(runBatch({ trace: { agentId: '' } }).body, 400);
      expect(pointers(res)).toEqual(['/items/0/trace/agentId']);
    });

    it.each(REQUIRED_EVENT_FIELDS)('event.%s is required', async (field) => {
      const { body } = runBatch({ events: 2 });
      delete (body.items[0]!.events[1] as unknown as Body)[field];
      const res = await refused(body, 400);
      expect(pointers(res)).toContain(`/items/0/events/1/${field}`);
    });

    it('event.traceId must equal its trace id', async () => {
      const { body } = runBatch({ events: 2 });
      body.items[0]!.events[1]!.traceId = newId();
      const res = await refused(body, 400);
      expect(pointers(res)).toEqual(['/items/0/events/1/traceId']);
    });

    it.each([
      [
        'trace status outside the allowed set',
        (b: Body) => ((b as any).items[0].trace.status = 'done'),
        '/items/0/trace/status',
      ],
      [
        'event type outside the allowed set',
        (b: Body) => ((b as any).items[0].events[0].type = 'http_call'),
        '/items/0/events/0/type',
      ],
      [
        'event status outside the allowed set',
        (b: Body) => ((b as any).items[0].events[0].status = 'warn'),
        '/items/0/events/0/status',
      ],
      [
        'a number sent as a string (no coercion)',
        (b: Body) => ((b as any).items[0].trace.eventCount = '1'),
        '/items/0/trace/eventCount',
      ],
      [
        'null where a number is required',
        (b: Body) => ((b as any).items[0].trace.totalTokens = null),
        '/items/0/trace/totalTokens',
      ],
      [
        'a fractional sequence',
        (b: Body) => ((b as any).items[0].events[0].sequence = 1.5),
        '/items/0/events/0/sequence',
      ],
      [
        'a negative count',
        (b: Body) => ((b as any).items[0].trace.chainTxCount = -1),
        '/items/0/trace/chainTxCount',
      ],
      [
        'lamports as a JSON number',
        (b: Body) => ((b as any).items[0].trace.totalLamports = 5),
        '/items/0/trace/totalLamports',
      ],
      [
        'a cost that is not a decimal',
        (b: Body) => ((b as any).items[0].trace.totalCostUsd = '1e-3'),
        '/items/0/trace/totalCostUsd',
      ],
      [
        'a date that does not exist',
        (b: Body) => ((b as any).items[0].trace.startedAt = '2026-02-30T10:00:00Z'),
        '/items/0/trace/startedAt',
      ],
      [
        'a date without time zone',
        (b: Body) => ((b as any).items[0].trace.startedAt = '2026-02-03T10:00:00'),
        '/items/0/trace/startedAt',
      ],
      [
        'year zero',
        (b: Body) => ((b as any).items[0].events[0].startedAt = '0000-01-01T00:00:00Z'),
        '/items/0/events/0/startedAt',
      ],
      [
        'an instant before year 1 once in UTC',
        (b: Body) => ((b as any).items[0].trace.startedAt = '0001-01-01T00:30:00+01:00'),
        '/items/0/trace/startedAt',
      ],
      [
        'an instant after year 9999 once in UTC',
        (b: Body) => ((b as any).items[0].events[0].endedAt = '9999-12-31T23:30:00-01:00'),
        '/items/0/events/0/endedAt',
      ],
      [
        'payload that is not an object',
        (b: Body) => ((b as any).items[0].events[0].payload = 'text'),
        '/items/0/events/0/payload',
      ],
      [
        'payloadEncrypted as a string',
        (b: Body) => ((b as any).items[0].events[0].payloadEncrypted = 'false'),
        '/items/0/events/0/payloadEncrypted',
      ],
      [
        'an unknown trace field',
        (b: Body) => ((b as any).items[0].trace.colour = 'red'),
        '/items/0/trace/colour',
      ],
      ['an unknown top-level field', (b: Body) => ((b as any).extra = true), '/extra'],
      [
        'a batchId that is neither ULID nor UUID',
        (b: Body) => ((b as any).batchId = 'batch-1'),
        '/batchId',
      ],
      [
        'a NUL character in a summary',
        (b: Body) => ((b as any).items[0].trace.inputSummary = 'a\u0000b'),
        '/items/0/trace/inputSummary',
      ],
    ])('%s', async (_name, mutate, pointer) => {
      const { body } = runBatch();
      const bad = clone(body) as unknown as Body;
      mutate(bad);
      const res = await refused(bad, 400);
      expect(pointers(res)).toContain(pointer);
    });

    it('refuses a lone UTF-16 surrogate in text (it would be stored changed), keeps it in payloads', async () => {
      const { body } = runBatch();
      const text = JSON.stringify(body).replace('"inputSummary":"', '"inputSummary":"x\\udfff');
      const res = await refused(text, 400);
      expect(pointers(res)).toEqual(['/items/0/trace/inputSummary']);

      const { body: ok, trace } = runBatch({
        trace: { inputSummary: 'rocket \u{1F680} launched' },
      });
      const withLone = JSON.stringify(ok).replace('"payload":{', '"payload":{"lone":"a\\ud800b",');
      expect((await postBatch(server.url, agent.apiKey, withLone)).status).toBe(202);
      const [row] = await server.store.sql.query<{
        input_summary: string;
        payload: { lone: string };
      }>(
        `SELECT t.input_summary, e.payload FROM traces t JOIN events e ON e.trace_id = t.id
         WHERE t.id = $1`,
        [trace.id],
      );
      expect(row?.input_summary).toBe('rocket \u{1F680} launched');
      expect(row?.payload.lone).toBe('a\ud800b');
    });

    it('names every offending field, not only the first', async () => {
      const { body } = runBatch({ events: 2 });
      const bad = clone(body) as any;
      bad.items[0].trace.status = 'nope';
      bad.items[0].events[1].sequence = 'x';
      const res = await refused(bad, 400);
      expect(pointers(res)).toEqual(
        expect.arrayContaining(['/items/0/trace/status', '/items/0/events/1/sequence']),
      );
    });

    it('refuses an event id that appears twice in one batch', async () => {
      const { body } = runBatch({ events: 2 });
      body.items[0]!.events[1]!.id = body.items[0]!.events[0]!.id;
      const res = await refused(body, 400);
      expect(pointers(res)).toEqual(['/items/0/events/1/id']);
    });

    it('refuses payloads nested deeper than the documented limit', async () => {
      const { body } = runBatch();
      let deep: unknown = 'bottom';
      for (let i = 0; i < 100; i++) deep = { d: deep };
      body.items[0]!.events[0]!.payload = deep as Record<string, unknown>;
      const res = await refused(body, 400);
      expect(pointers(res)).toEqual(['/items/0/events/0/payload']);
    });

    it('refuses a payload number too large for a double instead of storing it as null', async () => {
      const { body } = runBatch();
      body.items[0]!.events[0]!.payload = { amount: 'HUGE', nested: [1, 2] };
      const text = JSON.stringify(body).replace('"HUGE"', '1e999');
      const res = await refused(text, 400);
      expect(pointers(res)).toEqual(['/items/0/events/0/payload']);
      expect(res.body.errors[0].detail).toMatch(/too large for a double/);
    });

    it('refuses more items than the documented limit', async () => {
      const items = Array.from({ length: 1001 }, () => ({ trace: traceSnapshot(), events: [] }));
      const res = await refused({ batchId: newId(), items }, 400, { gzip: true });
      expect(pointers(res)).toEqual(['/items']);
    });
  });

  describe('malformed bodies', () => {
    it('answers 400 for malformed JSON', async () => {
      const res = await refused('{"batchId": "01', 400);
      expect(res.body.type).toBe('urn:flightlog:problem:malformed-json');
    });

    it('answers 400 for invalid UTF-8', async () => {
      const json = Buffer.from(JSON.stringify(runBatch().body));
      const bad = Buffer.concat([
        json.subarray(0, 20),
        Buffer.from([0xc3, 0x28]),
        json.subarray(20),
      ]);
      await refused(bad, 400);
    });

    it('answers 400 for a body that says gzip but is not', async () => {
      await refused(JSON.stringify(runBatch().body), 400, {
        headers: { 'content-encoding': 'gzip' },
      });
    });

    it('answers 400 for an empty body', async () => {
      await refused('', 400);
    });

    it('refuses __proto__ and constructor.prototype keys outside payloads, naming the event, and leaves every prototype untouched', async () => {
      const text = JSON.stringify(runBatch().body).replace(
        '"payloadEncrypted":',
        '"__proto__":{"polluted":true},"payloadEncrypted":',
      );
      const res = await refused(text, 400);
      expect(res.body.type).toBe('urn:flightlog:problem:validation-failed');
      expect(pointers(res)).toEqual(['/items/0/events/0/__proto__']);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      const ctor = JSON.stringify(runBatch().body).replace(
        '"inputSummary":',
        '"constructor":{"prototype":{"polluted":true}},"inputSummary":',
      );
      expect(pointers(await refused(ctor, 400))).toEqual(['/items/0/trace/constructor/prototype']);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    });
  });

  describe('content type and encoding', () => {
    it('answers 415 for a content type other than JSON', async () => {
      const res = await refused(JSON.stringify(runBatch().body), 415, {
        headers: { 'content-type': 'text/plain' },
      });
      expect(res.body.type).toBe('urn:flightlog:problem:unsupported-media-type');
    });

    it('answers 415 for an encoding other than gzip', async () => {
      await refused(JSON.stringify(runBatch().body), 415, {
        headers: { 'content-encoding': 'br' },
      });
    });
  });

  describe('size limits (1 MiB in this suite)', () => {
    it('answers 413 for a plain body over the limit', async () => {
      const { body } = runBatch();
      body.items[0]!.trace.inputSummary = 'x'.repeat(60_000);
      const big = {
        ...body,
        items: Array.from({ length: 20 }, () => ({
          trace: { ...body.items[0]!.trace, id: newId() },
          events: [],
        })),
      };
      await refused(big, 413);
    });

    it('answers 413 for a gzip body whose inflated size is over the limit (a gzip bomb)', async () => {
      // 10 MB of zeros compresses to about 10 KB: small on the wire, huge when inflated.
      const bomb = gzipSync(Buffer.alloc(10 * 1024 * 1024));
      expect(bomb.length).toBeLessThan(1024 * 1024);
      await refused(bomb, 413, { headers: { 'content-encoding': 'gzip' } });
    });

    it('answers 413 for a declared Content-Length over the limit without reading the body', async () => {
      const res = await fetch(`${server.url}/v1/traces/batch`, {
        method: 'POST',
        headers: { authorization: `Bearer ${agent.apiKey}`, 'content-type': 'application/json' },
        body: 'x'.repeat(1100 * 1024),
      });
      expect(res.status).toBe(413);
      expect(res.headers.get('content-type')).toContain('application/problem+json');
    });
  });

  describe('error lists are bounded', () => {
    /** A batch whose `count` events each have one invalid field (`kind`). */
    function badKinds(count: number) {
      const { body } = runBatch({ events: count });
      for (const event of body.items[0]!.events) (event as unknown as Body).kind = 'nonsense';
      return body;
    }

    it('lists the first 100 invalid fields and says how many there were', async () => {
      const res = await refused(badKinds(150), 400);
      expect(pointers(res)).toHaveLength(100);
      expect(pointers(res)[0]).toBe('/items/0/events/0/kind');
      expect(res.body.detail).toMatch(/first 100 of 150 invalid fields/);
    });

    it('stops at the first error of an invalid body of more than 10,000 JSON values, at once', async () => {
      // 800 events of ~20 values each, all invalid: every one would be listed before
      const started = performance.now();
      const res = await refused(badKinds(800), 400);
      expect(pointers(res)).toEqual(['/items/0/events/0/kind']);
      expect(performance.now() - started).toBeLessThan(5_000);
    });

    it('answers 400 at once for an item of 100,000 empty events (over maxItems)', async () => {
      const { body } = runBatch();
      const events = Array.from({ length: 100_000 }, () => ({}));
      const res = await refused({ ...body, items: [{ ...body.items[0], events }] }, 400);
      expect(pointers(res)).toEqual(['/items/0/events']);
      expect(res.body.errors[0].detail).toMatch(/10000/);
    });
  });

  describe('all or nothing', () => {
    it('rolls back items already written when a later item is refused, and keeps the batch id free', async () => {
      // Items are written in trace id order: `mine` (the older ULID) is written first, then the
      // foreign trace is refused, so the refusal has to undo a write that already happened.
      const mine = traceSnapshot();
      const other = await server.createAgent();
      const foreign = runBatch();
      expect(mine.id < foreign.trace.id).toBe(true);
      expect((await postBatch(server.url, other.apiKey, foreign.body)).status).toBe(202);
      const before = await tableCounts(server.store);
      const batchId = newId();
      const res = await postBatch(server.url, agent.apiKey, {
        batchId,
        items: [
          { trace: { ...foreign.trace, agentId: agent.agentId }, events: [] },
          { trace: mine, events: [llmCallEvent(mine.id, 0)] },
        ],
      });
      expect(res.status).toBe(409);
      expect(pointers(res)).toEqual(['/items/0/trace/id']);
      expect(await tableCounts(server.store)).toEqual(before);
      expect(await storedTrace(server.store, mine.id)).toBeUndefined();
      // the refused batch id was not used up: the corrected batch under the same id is stored
      const retry = await postBatch(server.url, agent.apiKey, {
        batchId,
        items: [{ trace: mine, events: [llmCallEvent(mine.id, 0)] }],
      });
      expect(retry.status).toBe(202);
      expect(retry.headers.get('idempotent-replayed')).toBeNull();
      expect(await storedTrace(server.store, mine.id)).toBeDefined();
    });
  });

  it('never answers 500 to a client mistake on the other routes', async () => {
    for (const [path, body, headers] of [
      ['/v1/traces/x/complete', '{', {}],
      ['/v1/traces/x/complete', { status: 'finished' }, {}],
      ['/v1/traces/batch', { items: 'x' }, { 'content-type': 'application/json; charset=utf-8' }],
    ] as const) {
      const res = await send(server.url, path, body, { token: agent.apiKey, headers });
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
    }
  });
});
