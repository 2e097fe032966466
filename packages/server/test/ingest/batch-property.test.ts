import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeEngines } from '../harness/engines.js';
import { isProblem, postBatch } from '../harness/http.js';
import { tableCounts } from '../harness/inspect.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import {
  NULLABLE_FIELDS,
  REQUIRED_EVENT_FIELDS,
  REQUIRED_TRACE_FIELDS,
  runBatch,
} from '../fixtures/batches.js';

type Json = any;

const STRING_FIELDS = [
  'id',
  'agentId',
  'startedAt',
  'inputSummary',
  'totalCostUsd',
  'totalLamports',
];
const NUMBER_FIELDS = ['eventCount', 'totalTokens', 'chainTxCount'];

/** Values that are never a valid string field / count field. */
const notAString = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string(), { maxLength: 2 }),
  fc.dictionary(fc.string(), fc.string(), { maxKeys: 2 }),
);
const notACount = fc.oneof(
  fc.string(),
  fc.boolean(),
  fc.constant(null),
  fc.integer({ max: -1 }),
  fc.double({ noInteger: true, noDefaultInfinity: true, noNaN: true }),
  fc.constantFrom('NaN', 'Infinity', '-Infinity', '1e309', '5'),
  fc.constant([1]),
);
const extraKey = fc
  .string({ minLength: 1, maxLength: 12 })
  .filter(
    (k) =>
      ![
        'trace',
        'events',
        'batchId',
        'items',
        'agentId',
        'verifyToken',
        ...REQUIRED_TRACE_FIELDS,
        ...REQUIRED_EVENT_FIELDS,
        ...NULLABLE_FIELDS,
      ].includes(k),
  );

/** A mutation that turns a valid batch into one the spec or our limits refuse. */
type Mutation = (body: Json) => Json | string | Buffer;

const mutations: fc.Arbitrary<Mutation> = fc.oneof(
  fc.constantFrom(...REQUIRED_TRACE_FIELDS).map(
    (f): Mutation =>
      (b) => (delete b.items[0].trace[f], b),
  ),
  fc.constantFrom(...REQUIRED_EVENT_FIELDS).map(
    (f): Mutation =>
      (b) => (delete b.items[0].events[0][f], b),
  ),
  fc.constantFrom('batchId', 'items').map(
    (f): Mutation =>
      (b) => (delete b[f], b),
  ),
  fc.tuple(fc.constantFrom(...STRING_FIELDS), notAString).map(
    ([f, v]): Mutation =>
      (b) => ((b.items[0].trace[f] = v), b),
  ),
  fc.tuple(fc.constantFrom(...NUMBER_FIELDS), notACount).map(
    ([f, v]): Mutation =>
      (b) => ((b.items[0].trace[f] = v), b),
  ),
  notACount.map(
    (v): Mutation =>
      (b) => ((b.items[0].events[0].sequence = v), b),
  ),
  fc
    .string()
    .filter((s) => !['running', 'completed', 'errored', 'timeout'].includes(s))
    .map(
      (s): Mutation =>
        (b) => ((b.items[0].trace.status = s), b),
    ),
  fc
    .string()
    .filter((s) => !['ok', 'error'].includes(s))
    .map(
      (s): Mutation =>
        (b) => ((b.items[0].events[0].status = s), b),
    ),
  fc
    .tuple(fc.constantFrom('top', 'trace', 'event'), extraKey, fc.jsonValue())
    .map(([where, k, v]): Mutation => (b) => {
      const target =
        where === 'top' ? b : where === 'trace' ? b.items[0].trace : b.items[0].events[0];
      // defineProperty: assigning "__proto__" would set the prototype instead of adding a key
      Object.defineProperty(target, k, {
        value: v,
        enumerable: true,
        configurable: true,
        writable: true,
      });
      return b;
    }),
  fc.string().map(
    (s): Mutation =>
      (b) => ((b.items[0].events[0].traceId = `${b.items[0].trace.id}x${s}`), b),
  ),
  fc.constant<Mutation>((b) => ((b.items = []), b)),
  fc
    .jsonValue()
    .filter((v) => v === null || typeof v !== 'object' || Array.isArray(v))
    .map(
      (v): Mutation =>
        () =>
          v,
    ),
  fc.integer({ min: 65, max: 400 }).map((depth): Mutation => (b) => {
    let deep: Json = 0;
    for (let i = 0; i < depth; i++) deep = [deep];
    b.items[0].events[0].payload = { deep };
    return b;
  }),
  fc.constant<Mutation>((b) => ((b.items[0].trace.inputSummary = 'x'.repeat(70_000)), b)),
  fc.constantFrom('NaN', 'Infinity', '-Infinity', 'undefined', '0x10', '01').map(
    (token): Mutation =>
      (b) =>
        JSON.stringify(b).replace(/"eventCount":\d+/, `"eventCount":${token}`),
  ),
  fc.string({ maxLength: 200 }).map(
    (s): Mutation =>
      () =>
        s,
  ),
  fc.uint8Array({ minLength: 1, maxLength: 300 }).map(
    (bytes): Mutation =>
      () =>
        Buffer.from(bytes),
  ),
  fc.constantFrom('"__proto__":{"admin":true},', '"constructor":{"prototype":{"admin":true}},').map(
    (key): Mutation =>
      (b) =>
        // in an event's envelope: inside its payload such keys are the agent's data, stored as sent
        JSON.stringify(b).replace('"payloadEncrypted":', `${key}"payloadEncrypted":`),
  ),
  fc.nat({ max: 200 }).map(
    (cut): Mutation =>
      (b) =>
        JSON.stringify(b).slice(0, cut),
  ),
);

describeEngines('POST /v1/traces/batch with generated malformed bodies [%s]', (engine) => {
  let server: TestServer;
  let agent: TestAgent;
  beforeAll(async () => {
    server = await startTestServer(engine);
    agent = await server.createAgent();
  });
  afterAll(() => server.close());

  it('answers every one with a 4xx problem and leaves the store unchanged', async () => {
    const before = await tableCounts(server.store);
    await fc.assert(
      fc.asyncProperty(mutations, fc.boolean(), async (mutate, gzip) => {
        const body = mutate(structuredClone(runBatch({ events: 2 }).body));
        const res = await postBatch(server.url, agent.apiKey, body, { gzip });
        expect(res.status, res.text).toBeGreaterThanOrEqual(400);
        expect(res.status, res.text).toBeLessThan(500);
        expect(isProblem(res, res.status), res.text).toBe(true);
      }),
      { numRuns: 300 },
    );
    expect(await tableCounts(server.store)).toEqual(before);
    expect(({} as Json).admin).toBeUndefined();
    // and the service still takes valid batches
    expect((await postBatch(server.url, agent.apiKey, runBatch().body)).status).toBe(202);
  });
});
