import { TransportBatchPayloadSchema } from '@flightlog/protocol';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { FlightlogError, MAX_FIELD_ERRORS } from '../../src/errors/flightlog-error.js';
import { BodyParsePool, type BodyParsePoolOptions } from '../../src/http/body-parse-pool.js';
import { registerJsonBody } from '../../src/http/json-body.js';
import { problemFor, registerProblemHandler } from '../../src/http/problem.js';
import {
  boundedValidatorCompiler,
  createBoundedValidator,
} from '../../src/http/schema-validator.js';
import { Metrics } from '../../src/observability/metrics.js';
import { runBatch } from '../fixtures/batches.js';

// The pool runs the built worker (dist/http/body-parse-worker.js): `npm run build` first.

const pools: BodyParsePool[] = [];
const apps: FastifyInstance[] = [];

function newPool(options: Partial<BodyParsePoolOptions> = {}): BodyParsePool {
  const pool = new BodyParsePool({ workers: 1, maxPerKey: 8, maxQueued: 16, ...options });
  pools.push(pool);
  return pool;
}

afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
  await Promise.all(pools.splice(0).map((pool) => pool.close()));
});

const json = (value: unknown) => Buffer.from(JSON.stringify(value));

/** What a caller is answered for a refusal: the HTTP status and Retry-After the route sends. */
function answer(error: unknown) {
  if (!(error instanceof FlightlogError)) throw error;
  return {
    code: error.code,
    status: problemFor(error).status,
    retryAfter: error.retryAfterSeconds,
  };
}

/** Worker threads of this process, running or not yet exited (the diagnostic report's list). */
const workerThreads = () => (process.report.getReport() as { workers: unknown[] }).workers.length;

/** The batch route as the service builds it: JSON body, bounded validator, problem answers. */
async function batchRoute(pool?: BodyParsePool): Promise<FastifyInstance> {
  const app = Fastify({ logger: false });
  app.setValidatorCompiler(boundedValidatorCompiler());
  registerProblemHandler(app, new Metrics());
  // minBytes 1: every body goes to the pool, when there is one
  registerJsonBody(app, { maxBytes: 1024 * 1024 }, pool ? { pool, minBytes: 1 } : undefined);
  app.post('/v1/traces/batch', { schema: { body: TransportBatchPayloadSchema } }, (_, reply) =>
    reply.code(202).send({ ok: true }),
  );
  apps.push(app);
  await app.ready();
  return app;
}

async function post(app: FastifyInstance, body: unknown) {
  const response = await app.inject({
    method: 'POST',
    url: '/v1/traces/batch',
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });
  const problem = response.json<{ detail?: string; errors?: { pointer: string }[] }>();
  return { status: response.statusCode, detail: problem.detail, errors: problem.errors };
}

describe('parsing large bodies on worker threads', () => {
  it('returns the parsed body, and a body valid for its schema is not walked again by the route', async () => {
    const pool = newPool();
    const body = { batchId: 'b1', items: [{ n: 1, text: 'é ✓', nested: { list: [1, null] } }] };
    expect(await pool.parse('agent:a', json(body), undefined)).toEqual(body);

    const schema = { type: 'object', required: ['batchId'] };
    const valid = await pool.parse('agent:a', json(body), schema);
    expect(valid).toEqual(body);
    // the route's validator takes the worker's word for it (it is checked once, by the worker)
    const refusesObjects = createBoundedValidator({ type: 'string' });
    expect(refusesObjects(valid)).toBe(true);
    // ... for that one object only
    expect(refusesObjects(valid)).toBe(false);
  });

  it('refuses malformed JSON as the route does (400 malformed-json)', async () => {
    const pool = newPool();
    const error = await pool.parse('agent:a', Buffer.from('{"a":'), undefined).catch((e) => e);
    expect(answer(error)).toMatchObject({ code: 'malformed-json', status: 400 });
  });

  it('answers an invalid body with the same field errors the route gives, capped as the route caps them', async () => {
    const pooled = await batchRoute(newPool());
    const inline = await batchRoute();

    const valid = runBatch({ events: 2 }).body;
    expect((await post(pooled, valid)).status).toBe(202);

    // a few wrong fields: every one named by its pointer
    const few = runBatch({ events: 2 }).body as unknown as {
      items: { trace: Record<string, unknown>; events: Record<string, unknown>[] }[];
    };
    const item = few.items[0];
    if (!item) throw new Error('fixture without an item');
    item.trace.status = 'sleeping';
    delete item.events[1]?.type;
    (few as Record<string, unknown>).extra = true;
    const fewAnswer = await post(pooled, few);
    expect(fewAnswer.status).toBe(400);
    expect(fewAnswer).toEqual(await post(inline, few));
    expect(fewAnswer.errors?.map((e) => e.pointer)).toEqual(
      expect.arrayContaining(['/extra', '/items/0/trace/status', '/items/0/events/1/type']),
    );

    // 300 empty events: thousands of missing fields, the first MAX_FIELD_ERRORS listed
    const many = runBatch({ events: 1 }).body as unknown as { items: { events: unknown[] }[] };
    const manyItem = many.items[0];
    if (!manyItem) throw new Error('fixture without an item');
    manyItem.events = Array.from({ length: 300 }, () => ({}));
    const manyAnswer = await post(pooled, many);
    expect(manyAnswer.status).toBe(400);
    expect(manyAnswer.errors).toHaveLength(MAX_FIELD_ERRORS);
    expect(manyAnswer.detail).toContain(`The first ${MAX_FIELD_ERRORS} of`);
    expect(manyAnswer).toEqual(await post(inline, many));
  });

  it("parses another key's body before the later bodies of a key that queued several", async () => {
    const pool = newPool({ workers: 1 });
    const order: string[] = [];
    const parse = (key: string, name: string) =>
      pool.parse(key, json({ name }), undefined).then(() => order.push(name));
    const all = [
      parse('agent:a', 'a1'),
      parse('agent:a', 'a2'),
      parse('agent:a', 'a3'),
      parse('agent:a', 'a4'),
      parse('agent:b', 'b1'),
    ];
    await Promise.all(all);
    // a1 was in the worker and a2 in line before b1 came; then the keys take turns
    expect(order).toEqual(['a1', 'a2', 'b1', 'a3', 'a4']);
  });

  it('past maxPerKey bodies of one key answers 429 with Retry-After, other keys still taken', async () => {
    const pool = newPool({ workers: 1, maxPerKey: 2 });
    const first = [
      pool.parse('agent:a', json({ n: 1 }), undefined),
      pool.parse('agent:a', Buffer.from('not json'), undefined).catch(answer),
    ];
    const refused = await pool.parse('agent:a', json({ n: 3 }), undefined).catch(answer);
    expect(refused).toEqual({ code: 'too-many-requests', status: 429, retryAfter: 1 });
    expect(await pool.parse('agent:b', json({ n: 4 }), undefined)).toEqual({ n: 4 });

    // once its bodies are answered (parsed or refused), the key's room is back
    expect(await Promise.all(first)).toEqual([{ n: 1 }, expect.objectContaining({ status: 400 })]);
    const again = [1, 2].map((n) => pool.parse('agent:a', json({ n }), undefined));
    expect(await Promise.all(again)).toEqual([{ n: 1 }, { n: 2 }]);
  });

  it('past maxQueued bodies in all answers 503 with Retry-After', async () => {
    const pool = newPool({ workers: 1, maxPerKey: 8, maxQueued: 3 });
    const taken = ['a', 'b', 'c'].map((key) =>
      pool.parse(`agent:${key}`, json({ key }), undefined),
    );
    const refused = await pool.parse('agent:d', json({ key: 'd' }), undefined).catch(answer);
    expect(refused).toEqual({ code: 'store-unavailable', status: 503, retryAfter: 1 });
    await Promise.all(taken);
    expect(await pool.parse('agent:d', json({ key: 'd' }), undefined)).toEqual({ key: 'd' });
  });

  it('close() answers waiting bodies 503, leaves no worker thread behind, and may be called twice', async () => {
    const before = workerThreads();
    const pool = newPool({ workers: 2 });
    // two bodies at once: both workers started (and running) before the rest come
    await Promise.all(
      ['a', 'b'].map((key) => pool.parse(`agent:${key}`, json({ key }), undefined)),
    );
    const inFlight = ['a', 'a', 'b', 'c'].map((key) =>
      pool.parse(`agent:${key}`, json({ key }), undefined).catch(answer),
    );
    expect(workerThreads()).toBe(before + 2);

    await pool.close();
    for (const refused of await Promise.all(inFlight))
      expect(refused).toMatchObject({ code: 'shutting-down', status: 503 });
    expect(workerThreads()).toBe(before);

    const late = await pool.parse('agent:a', json({ late: true }), undefined).catch(answer);
    expect(late).toMatchObject({ code: 'shutting-down', status: 503 });
    await pool.close();
    expect(workerThreads()).toBe(before);
  });

  // 10,000 levels: the worker sends the value, the main thread's (smaller) stack cannot take it
  // in (a `messageerror`); 100,000: the worker cannot send it
  it.each([10_000, 100_000])(
    'a body nested %i levels deep (too deep to clone back) is still parsed, and left to the route to validate',
    async (depth) => {
      const pool = newPool();
      const body = Buffer.from('['.repeat(depth) + ']'.repeat(depth));
      const value = await pool.parse('agent:a', body, { type: 'array' });
      let levels = 0;
      for (let v = value; Array.isArray(v) && v.length > 0; v = v[0] as unknown) levels++;
      expect(levels).toBe(depth - 1);
      // validated by the route's own validator as usual (here: refused, it is not an object)
      expect(createBoundedValidator({ type: 'object' })(value)).toBe(false);
      // and the worker is still there for the next body
      expect(await pool.parse('agent:a', json({ after: depth }), undefined)).toEqual({
        after: depth,
      });
    },
  );
});
