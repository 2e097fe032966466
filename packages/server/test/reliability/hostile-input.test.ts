import { randomBytes } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import { BATCH_LIMITS } from '@flightlog/protocol';
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { mintDevToken } from '../../src/auth/dev-token.js';
import type { Store } from '../../src/store/open-store.js';
import {
  NULLABLE_FIELDS,
  REQUIRED_EVENT_FIELDS,
  REQUIRED_TRACE_FIELDS,
  at,
  llmCallEvent,
  newId,
  runBatch,
  traceSnapshot,
} from '../fixtures/batches.js';
import { startServeProcess, type ServeProcess } from '../harness/cli-process.js';
import { describeEngines } from '../harness/engines.js';
import { isProblem, postBatch, send, type HttpResult, type SendOptions } from '../harness/http.js';
import { tableCounts } from '../harness/inspect.js';
import { rawExchange, type RawAnswer } from '../harness/raw-http.js';
import { freshServiceLocation, type ServiceLocation } from '../harness/service-location.js';

/*
 * Hostile input against a real `flightlog serve` process, on both engines. After every attack
 * group: each answer was a 4xx problem+json (never a 5xx, never a hang: every request has a
 * client-side deadline), the process is alive and answers /healthz, it counted no 5xx and
 * logged no error, and the store is unchanged: everything both agents own as the read API
 * shows it, the 202s /metrics counted, and on PostgreSQL the row counts of the schema. PGlite's
 * data directory belongs to the process, so its rows are counted once at the end, after a
 * clean SIGTERM, against exactly what the test stored on purpose.
 */

type Json = any;
type Path = (string | number)[];

const ADMIN_TOKEN = 'hostile-input-admin-token-0123456789';
const JWT_SECRET = 'hostile-input-jwt-secret-0123456789abcdef';
/** Short, so slow senders are cut within a few seconds. */
const REQUEST_TIMEOUT_MS = 1_500;
/** The default, set explicitly: the cap the gzip bomb and the size limits run into. */
const MAX_BODY_BYTES = 5 * 1024 * 1024;
/** The client's deadline of every exchange: a hang fails the test instead of stalling it. */
const DEADLINE_MS = 15_000;
/** Node checks for requests past their timeout once a second; allow that and some slack. */
const CUT_WITHIN_MS = REQUEST_TIMEOUT_MS + 2_500;
/** Generated bodies: NUM_RUNS volleys of VOLLEY concurrent requests per engine. */
const NUM_RUNS = 375;
const VOLLEY = 8;

// ---------------------------------------------------------------------------------------------
// The attack template and the paths into it
// ---------------------------------------------------------------------------------------------

/** A valid batch of two items of two events each, with fresh ids: what every mutation starts from. */
function template(): Json {
  const first = runBatch({ events: 2 }).body.items[0];
  const second = runBatch({ events: 2 }).body.items[0];
  return JSON.parse(JSON.stringify({ batchId: newId(), items: [first, second] }));
}

function getAt(value: Json, path: Path): Json {
  return path.reduce((node, key) => node[key], value);
}

function setAt(value: Json, path: Path, replacement: unknown): Json {
  if (path.length === 0) return replacement;
  const parent = getAt(value, path.slice(0, -1));
  // defineProperty: assigning "__proto__" would set a prototype instead of adding a key
  Object.defineProperty(parent, path[path.length - 1] as string, {
    value: replacement,
    enumerable: true,
    configurable: true,
    writable: true,
  });
  return value;
}

/** Every path of the template outside event payloads (whose content is free), root included. */
function pathsOf(value: Json, path: Path = []): Path[] {
  const paths: Path[] = [path];
  if (path[path.length - 1] === 'payload' || value === null || typeof value !== 'object')
    return paths;
  for (const key of Array.isArray(value) ? value.keys() : Object.keys(value))
    paths.push(...pathsOf(value[key], [...path, key]));
  return paths;
}

const TEMPLATE = template();
const PATHS = pathsOf(TEMPLATE);
/** Paths whose last step is an object member (a key that can be repeated). */
const MEMBER_PATHS = PATHS.filter((p) => typeof p[p.length - 1] === 'string');
const ITEM = fc.constantFrom(0, 1);
const EVENT = fc.constantFrom(0, 1);

/** Optional fields that accept null: null is never a wrong type for them. */
const NULLABLE = new Set(NULLABLE_FIELDS);
/** Integer fields: a fraction is a wrong type for them too. */
const COUNTS = new Set(['eventCount', 'totalTokens', 'chainTxCount', 'sequence']);
const KNOWN_KEYS = new Set<string>([
  'batchId',
  'items',
  'agentId',
  'verifyToken',
  'trace',
  'events',
  ...REQUIRED_TRACE_FIELDS,
  ...REQUIRED_EVENT_FIELDS,
  ...NULLABLE,
]);

type Kind = 'string' | 'number' | 'fraction' | 'boolean' | 'null' | 'array' | 'object';

function kindOf(value: unknown): Kind {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value as Kind;
}

const VALUES: Record<Kind, fc.Arbitrary<unknown>> = {
  string: fc.string({ maxLength: 30 }),
  number: fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true })),
  fraction: fc.double({ min: -1e6, max: 1e6, noInteger: true, noNaN: true }),
  boolean: fc.boolean(),
  null: fc.constant(null),
  array: fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 3 }),
  object: fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), {
    maxKeys: 3,
  }),
};

/** Values of a JSON type the schema never allows at `path`. */
function wrongValueAt(path: Path): fc.Arbitrary<unknown> {
  const key = path[path.length - 1];
  const current = kindOf(getAt(TEMPLATE, path));
  let kinds: Kind[];
  if (current === 'null')
    // the nullable fields are strings, except durationMs (a number)
    kinds =
      key === 'durationMs'
        ? ['boolean', 'array', 'object']
        : ['number', 'boolean', 'array', 'object'];
  else {
    kinds = (['string', 'number', 'boolean', 'null', 'array', 'object'] as Kind[]).filter(
      (k) => k !== current && !(k === 'null' && typeof key === 'string' && NULLABLE.has(key)),
    );
    if (typeof key === 'string' && COUNTS.has(key)) kinds.push('fraction');
  }
  return fc.constantFrom(...kinds).chain((kind) => VALUES[kind]);
}

// ---------------------------------------------------------------------------------------------
// Generated hostile bodies: every one is invalid by construction
// ---------------------------------------------------------------------------------------------

interface HostileCase {
  label: string;
  gzip: boolean;
  /** The body, from a fresh template (fresh ids: an accepted case would show as a new row). */
  build: (batch: Json) => string | Buffer;
}

const PLACEHOLDER = '@@hostile@@';

/** JSON text of `batch` with the placeholder (string value or key with value 0) replaced. */
function stringifyWith(batch: Json, raw: string): string {
  const text = JSON.stringify(batch);
  const marker = text.includes(`"${PLACEHOLDER}":0`) ? `"${PLACEHOLDER}":0` : `"${PLACEHOLDER}"`;
  const index = text.indexOf(marker);
  if (index < 0) throw new Error('placeholder missing');
  return text.slice(0, index) + raw + text.slice(index + marker.length);
}

const show = (value: unknown) => {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 60)}…(${text.length})` : text;
};

const wrongType = fc
  .constantFrom(...PATHS)
  .chain((path) => wrongValueAt(path).map((value) => ({ path, value })))
  .map(({ path, value }) => ({
    label: `wrong type at /${path.join('/')}: ${show(value)}`,
    build: (b: Json) => JSON.stringify(setAt(b, path, value)),
  }));

const missing = fc
  .oneof(
    fc.constantFrom<Path>(['batchId'], ['items']),
    fc.tuple(ITEM, fc.constantFrom('trace', 'events')).map(([i, k]): Path => ['items', i, k]),
    fc
      .tuple(ITEM, fc.constantFrom(...REQUIRED_TRACE_FIELDS))
      .map(([i, k]): Path => ['items', i, 'trace', k]),
    fc
      .tuple(ITEM, EVENT, fc.constantFrom(...REQUIRED_EVENT_FIELDS))
      .map(([i, j, k]): Path => ['items', i, 'events', j, k]),
  )
  .map((path) => ({
    label: `missing /${path.join('/')}`,
    build: (b: Json) => {
      delete getAt(b, path.slice(0, -1))[path[path.length - 1] as string];
      return JSON.stringify(b);
    },
  }));

const OBJECT_PATHS = fc.oneof(
  fc.constant<Path>([]),
  ITEM.map((i): Path => ['items', i]),
  ITEM.map((i): Path => ['items', i, 'trace']),
  fc.tuple(ITEM, EVENT).map(([i, j]): Path => ['items', i, 'events', j]),
);

const extraField = fc
  .tuple(
    OBJECT_PATHS,
    fc.string({ minLength: 1, maxLength: 16 }).filter((k) => !KNOWN_KEYS.has(k)),
    fc.jsonValue({ maxDepth: 2 }),
  )
  .map(([path, key, value]) => ({
    label: `extra field ${show(key)} at /${path.join('/')}`,
    build: (b: Json) => JSON.stringify(setAt(b, [...path, key], value)),
  }));

/** A text field and the longest value the README allows in it. */
interface SizeLimit {
  path: (i: number, j: number) => Path;
  limit: number;
  fill: 'text' | 'id' | 'digits' | 'time';
}
const SIZE_LIMITS: SizeLimit[] = [
  ...['inputSummary', 'outputSummary', 'errorMessage', 'merkleProof'].map((f): SizeLimit => ({
    path: (i) => ['items', i, 'trace', f],
    limit: 65_536,
    fill: 'text',
  })),
  { path: (i, j) => ['items', i, 'events', j, 'errorMessage'], limit: 65_536, fill: 'text' },
  ...['anchorSignature', 'traceHash', 'shareToken'].map((f): SizeLimit => ({
    path: (i) => ['items', i, 'trace', f],
    limit: 256,
    fill: 'text',
  })),
  { path: (i) => ['items', i, 'trace', 'tags', 0], limit: 256, fill: 'text' },
  { path: (i) => ['items', i, 'trace', 'toolsCalled', 0], limit: 256, fill: 'text' },
  { path: () => ['agentId'], limit: 1024, fill: 'text' },
  { path: () => ['verifyToken'], limit: 1024, fill: 'text' },
  { path: (i) => ['items', i, 'trace', 'agentId'], limit: 128, fill: 'id' },
  { path: (i) => ['items', i, 'trace', 'id'], limit: 128, fill: 'id' },
  { path: (i, j) => ['items', i, 'events', j, 'id'], limit: 128, fill: 'id' },
  { path: (i, j) => ['items', i, 'events', j, 'parentEventId'], limit: 128, fill: 'id' },
  { path: () => ['batchId'], limit: 36, fill: 'id' },
  ...['totalCostUsd', 'totalLamports', 'anchorSlot'].map((f): SizeLimit => ({
    path: (i) => ['items', i, 'trace', f],
    limit: 80,
    fill: 'digits',
  })),
  { path: (i) => ['items', i, 'trace', 'startedAt'], limit: 40, fill: 'time' },
  { path: (i, j) => ['items', i, 'events', j, 'startedAt'], limit: 40, fill: 'time' },
];

function longValue(fill: SizeLimit['fill'], length: number, char: string): string {
  if (fill === 'id') return 'a'.repeat(length);
  if (fill === 'digits') return '1'.repeat(length);
  if (fill === 'time') return `2026-11-01T12:00:00.${'0'.repeat(length)}Z`;
  return char.repeat(length); // `length` code points, whatever the character's UTF-8 width
}

const hugeString = fc
  .tuple(
    fc.constantFrom(...SIZE_LIMITS),
    ITEM,
    EVENT,
    fc.constantFrom('x', 'é', '世', '\u{1F680}'),
    fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 3 * 65_536 })),
  )
  .map(([limit, i, j, char, over]) => {
    const path = limit.path(i, j);
    const length = limit.limit + Math.min(over, 3 * limit.limit);
    return {
      label: `${length} characters (${char}) at /${path.join('/')}, limit ${limit.limit}`,
      build: (b: Json) => JSON.stringify(setAt(b, path, longValue(limit.fill, length, char))),
    };
  });

const tooManyEntries = fc
  .tuple(fc.constantFrom(['tags', 256] as const, ['toolsCalled', 1024] as const), ITEM)
  .map(([[field, limit], i]) => ({
    label: `${limit + 1} entries in /items/${i}/trace/${field}`,
    build: (b: Json) =>
      JSON.stringify(setAt(b, ['items', i, 'trace', field], Array(limit + 1).fill('tool'))),
  }));

/** Nesting as raw text: JSON.stringify of a value this deep could overflow the test's stack. */
function nested(depth: number, shape: 'array' | 'object', closed: boolean): string {
  const [open, close] = shape === 'array' ? ['[', ']'] : ['{"d":', '}'];
  return open.repeat(depth) + '0' + (closed ? close.repeat(depth) : '');
}

const deepNesting = fc
  .record({
    depth: fc.oneof(fc.integer({ min: 65, max: 300 }), fc.integer({ min: 1_000, max: 100_000 })),
    shape: fc.constantFrom('array' as const, 'object' as const),
    where: fc.constantFrom('payload', 'tags', 'extra field', 'sequence', 'item', 'unclosed'),
    i: ITEM,
    j: EVENT,
  })
  .map(({ depth, shape, where, i, j }) => ({
    label: `${shape}s ${depth} deep at ${where}`,
    build: (b: Json) => {
      const event = ['items', i, 'events', j];
      const path: Path = {
        payload: [...event, 'payload', 'deep'],
        tags: ['items', i, 'trace', 'tags'],
        'extra field': ['deep'],
        sequence: [...event, 'sequence'],
        item: ['items', i],
        unclosed: [...event, 'payload', 'deep'],
      }[where] as Path;
      return stringifyWith(setAt(b, path, PLACEHOLDER), nested(depth, shape, where !== 'unclosed'));
    },
  }));

/** Numbers JSON does not have, or that JavaScript cannot hold, or that no field allows. */
const BAD_NUMBERS = [
  'NaN',
  '-NaN',
  'Infinity',
  '-Infinity',
  '+1',
  '01',
  '-01',
  '0x10',
  '.5',
  '1.',
  '1e',
  '1e+',
  '--1',
  '1_000',
  'undefined',
  '١',
  '０',
  '1e999',
  '-1e999',
  '1e16',
  '9007199254740993',
  '-1',
];
const NUMBER_FIELDS = fc.oneof(
  fc
    .tuple(ITEM, fc.constantFrom('eventCount', 'totalTokens', 'chainTxCount', 'durationMs'))
    .map(([i, f]): Path => ['items', i, 'trace', f]),
  fc
    .tuple(ITEM, EVENT, fc.constantFrom('sequence', 'durationMs'))
    .map(([i, j, f]): Path => ['items', i, 'events', j, f]),
);

const badNumber = fc.tuple(NUMBER_FIELDS, fc.constantFrom(...BAD_NUMBERS)).map(([path, token]) => ({
  label: `${token} at /${path.join('/')}`,
  build: (b: Json) => stringifyWith(setAt(b, path, PLACEHOLDER), token),
}));

/** Byte sequences that are not UTF-8: stray continuation, overlong, surrogate, past U+10FFFF, cut. */
const NOT_UTF8 = [
  [0x80],
  [0xbf],
  [0xc0, 0xaf],
  [0xc1, 0xbf],
  [0xe0, 0x80, 0xaf],
  [0xed, 0xa0, 0x80],
  [0xed, 0xbf, 0xbf],
  [0xf4, 0x90, 0x80, 0x80],
  [0xf5, 0x80, 0x80, 0x80],
  [0xfe],
  [0xff],
  [0xc3],
  [0xe2, 0x82],
  [0xf0, 0x9f, 0x9a],
];

const invalidUtf8 = fc.tuple(fc.constantFrom(...NOT_UTF8), fc.nat()).map(([bytes, which]) => ({
  label: `bytes ${bytes.map((x) => x.toString(16)).join(' ')} inside string #${which}`,
  build: (b: Json) => {
    const json = Buffer.from(JSON.stringify(b));
    // the template's strings hold no escaped quotes: quotes alternate opening and closing
    const opening: number[] = [];
    for (let k = 0, n = 0; k < json.length; k++)
      if (json[k] === 0x22 && n++ % 2 === 0) opening.push(k);
    const at = (opening[which % opening.length] as number) + 1;
    return Buffer.concat([json.subarray(0, at), Buffer.from(bytes), json.subarray(at)]);
  },
}));

/** `"key": <valid>, "key": <wrong>`: refused whichever of the two a parser keeps. */
const duplicateKey = fc
  .constantFrom(...MEMBER_PATHS)
  .chain((path) => wrongValueAt(path).map((value) => ({ path, value })))
  .map(({ path, value }) => ({
    label: `/${path.join('/')} twice, the last ${show(value)}`,
    build: (b: Json) => {
      const key = path[path.length - 1] as string;
      const valid = JSON.stringify(getAt(b, path));
      return stringifyWith(
        setAt(b, path, PLACEHOLDER),
        `${valid},${JSON.stringify(key)}:${JSON.stringify(value)}`,
      );
    },
  }));

const PROTO_VALUES = ['{"admin":true}', '{}', 'null', '1', '[]', '"x"', '{"toString":1}'];
const CTOR_VALUES = ['{"prototype":{"admin":true}}', '{"prototype":{}}', '{"prototype":null}'];

/**
 * Prototype keys: `__proto__` and `constructor.prototype` in every object the service reads as
 * fields; bare names where fields are fixed. (Inside an event's payload they are the agent's data,
 * stored as sent: e2e/prototype-keys.test.ts.)
 */
const prototypeKey = fc
  .oneof(
    fc
      .tuple(OBJECT_PATHS, fc.constantFrom(...PROTO_VALUES))
      .map(([path, value]) => ({ path, member: `"__proto__":${value}` })),
    fc
      .tuple(OBJECT_PATHS, fc.constantFrom(...CTOR_VALUES))
      .map(([path, value]) => ({ path, member: `"constructor":${value}` })),
    fc
      .tuple(
        OBJECT_PATHS,
        fc.constantFrom('constructor', 'prototype', '__proto__'),
        fc.jsonValue({ maxDepth: 1 }),
      )
      .map(([path, key, value]) => ({ path, member: `"${key}":${JSON.stringify(value)}` })),
  )
  .map(({ path, member }) => ({
    label: `${show(member)} at /${path.join('/')}`,
    build: (b: Json) => stringifyWith(setAt(b, [...path, PLACEHOLDER], 0), member),
  }));

const hostileCase: fc.Arbitrary<HostileCase> = fc
  .tuple(
    fc.oneof(
      wrongType,
      missing,
      extraField,
      hugeString,
      tooManyEntries,
      deepNesting,
      badNumber,
      invalidUtf8,
      duplicateKey,
      prototypeKey,
    ),
    fc.boolean(),
  )
  .map(([c, gzip]) => ({
    ...c,
    gzip,
    [fc.toStringMethod]: () => `${c.label}${gzip ? ' (gzip)' : ''}`,
  }));

// ---------------------------------------------------------------------------------------------
// Observing the process
// ---------------------------------------------------------------------------------------------

/** Sum of a Prometheus metric's samples whose labels pass `labels`. */
function metricSum(text: string, name: string, labels: (l: string) => boolean = () => true) {
  let total = 0;
  for (const line of text.split('\n')) {
    const sample = /^([a-zA-Z_:]+)(\{[^}]*\})? (\S+)$/.exec(line);
    if (sample?.[1] === name && labels(sample[2] ?? '')) total += Number(sample[3]);
  }
  return total;
}

function expectRefused(res: HttpResult | RawAnswer, label: string): void {
  const text = 'text' in res ? res.text : res.body;
  const why = `${label}: ${res.status} ${text.slice(0, 300)}`;
  expect(res.status, why).toBeGreaterThanOrEqual(400);
  expect(res.status, why).toBeLessThan(500);
  if ('text' in res) expect(isProblem(res, res.status), why).toBe(true);
  else {
    expect(res.headers['content-type'], why).toMatch(/^application\/problem\+json(;|$)/);
    const problem = JSON.parse(res.body) as { status: number; type: string; detail: string };
    expect(problem.status, why).toBe(res.status);
    expect(problem.type, why).toMatch(/^urn:flightlog:problem:/);
    expect(typeof problem.detail, why).toBe('string');
  }
}

function problemOf(res: HttpResult | RawAnswer): { type: string; detail: string; errors?: Json } {
  return 'text' in res ? res.body : JSON.parse(res.body);
}

describeEngines('hostile input against a `flightlog serve` process [%s]', (engine) => {
  let location: ServiceLocation;
  let server: ServeProcess;
  /** PostgreSQL only: the schema, read directly. */
  let direct: Store | undefined;
  let alice: { agentId: string; apiKey: string };
  let mallory: { agentId: string; apiKey: string };
  let auditorToken: string;
  let victim: ReturnType<typeof runBatch>;
  /** What the test stored on purpose: the store must hold exactly this at the end. */
  const stored = {
    traces: 0,
    events: 0,
    accepted_batches: 0,
    analysis_jobs: 0,
    agents: 0,
    api_keys: 0,
  };

  const call = (path: string, body?: unknown, options: SendOptions = {}) =>
    send(server.url, path, body, { timeoutMs: DEADLINE_MS, ...options });
  const post = (apiKey: string, body: unknown, options: SendOptions = {}) =>
    postBatch(server.url, apiKey, body, { timeoutMs: DEADLINE_MS, ...options });

  async function createAgent(name: string) {
    const res = await call('/admin/v1/agents', { name }, { token: ADMIN_TOKEN });
    expect(res.status, res.text).toBe(201);
    stored.agents += 1;
    stored.api_keys += 1;
    const granted = await call(
      `/admin/v1/agents/${res.body.agentId}/members/auditor`,
      { role: 'viewer' },
      { method: 'PUT', token: ADMIN_TOKEN },
    );
    expect(granted.status, granted.text).toBe(200);
    return res.body as { agentId: string; apiKey: string };
  }

  /**
   * Posts a batch that must be stored (as `body` when given: its text as sent) and books what
   * it adds: new running traces, their events, one batch id.
   */
  async function accept(apiKey: string, batch: Json, body: string = JSON.stringify(batch)) {
    const res = await post(apiKey, body);
    expect(res.status, res.text).toBe(202);
    stored.accepted_batches += 1;
    stored.traces += batch.items.length;
    for (const item of batch.items) stored.events += item.events.length;
  }

  /** Everything both agents own, through the read API, with their events. */
  async function ownedData(): Promise<Json> {
    const data: Json = {};
    for (const agent of [alice, mallory]) {
      const traces: Json[] = [];
      let cursor: string | null = null;
      do {
        const page: HttpResult = await call(
          `/v1/agents/${agent.agentId}/traces?limit=200${cursor ? `&cursor=${cursor}` : ''}`,
          undefined,
          { token: auditorToken },
        );
        expect(page.status, page.text).toBe(200);
        for (const trace of page.body.traces) {
          const full = await call(`/v1/traces/${trace.id}`, undefined, { token: auditorToken });
          expect(full.status, full.text).toBe(200);
          traces.push(full.body);
        }
        cursor = page.body.nextCursor;
      } while (cursor);
      data[agent.agentId] = traces;
    }
    return data;
  }

  interface Seen {
    data: Json;
    /** Batches answered 202 and events stored, as the process counts them. */
    accepted: { batches: number; events: number };
    rows?: Record<string, number>;
  }

  async function seen(): Promise<Seen> {
    const metrics = (await call('/metrics')).text;
    return {
      data: await ownedData(),
      accepted: {
        batches: metricSum(metrics, 'flightlog_batches_total'),
        events: metricSum(metrics, 'flightlog_events_total'),
      },
      ...(direct ? { rows: await tableCounts(direct) } : {}),
    };
  }

  /** Error lines (pino level 50 and up) the process logged. */
  const errorLogs = () =>
    server
      .output()
      .split('\n')
      .filter((line) => /"level":(5|6)\d/.test(line));

  /** Alive, healthy, no 5xx counted or error logged, and nothing stored or changed. */
  async function expectUnharmed(before: Seen): Promise<void> {
    expect(server.child.exitCode, server.output().slice(-2000)).toBeNull();
    expect(server.child.signalCode).toBeNull();
    const health = await call('/healthz', undefined, { timeoutMs: 5_000 });
    expect(health.status).toBe(200);
    const metrics = (await call('/metrics')).text;
    expect(metricSum(metrics, 'flightlog_http_requests_total', (l) => /status="5/.test(l))).toBe(0);
    expect(
      metricSum(metrics, 'flightlog_rejections_total', (l) => l.includes('reason="internal"')),
    ).toBe(0);
    expect(errorLogs()).toEqual([]);
    expect(await seen()).toEqual(before);
  }

  const rawHead = (apiKey: string, headers: string) =>
    `POST /v1/traces/batch HTTP/1.1\r\nHost: flightlog\r\nAuthorization: Bearer ${apiKey}\r\n` +
    `Content-Type: application/json\r\n${headers}\r\n`;

  /** Writes the whole request at once, as fast as the socket takes it, and reads every answer. */
  const exchangeAtOnce = (headers: string, body: (string | Buffer)[]) =>
    rawExchange(server.url, [rawHead(mallory.apiKey, headers), ...body], 0, {
      deadlineMs: DEADLINE_MS,
      stopOnAnswer: false,
    });

  beforeAll(async () => {
    location = freshServiceLocation(engine);
    server = await startServeProcess({
      ...location.env,
      ADMIN_TOKEN,
      JWT_SECRET,
      REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
      MAX_BODY_BYTES: String(MAX_BODY_BYTES),
    });
    // PostgreSQL can be read beside the process; PGlite's directory is the process's own
    if (engine === 'postgres') direct = await location.openStore();
    alice = await createAgent('alice');
    mallory = await createAgent('mallory');
    auditorToken = await mintDevToken(JWT_SECRET, 'auditor');
    // the attack template is valid as it is: every refusal below is the mutation's doing
    await accept(mallory.apiKey, template());
    victim = runBatch({ events: 2, trace: { inputSummary: 'alice: secret plan' } });
    await accept(alice.apiKey, victim.body);
    if (direct) expect(await tableCounts(direct)).toEqual(stored);
  }, 120_000);

  afterAll(async () => {
    if (server && server.child.exitCode === null && server.child.signalCode === null)
      server.child.kill('SIGKILL');
    await direct?.close();
    await location?.dispose();
  });

  it(`refuses ${NUM_RUNS * VOLLEY} generated malformed bodies, ${VOLLEY} at a time, each with a 4xx problem`, async () => {
    const before = await seen();
    let sent = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(hostileCase, { minLength: VOLLEY, maxLength: VOLLEY }),
        async (volley) => {
          await Promise.all(
            volley.map(async (c) => {
              const res = await post(mallory.apiKey, c.build(template()), { gzip: c.gzip });
              sent += 1;
              expectRefused(res, c.label);
            }),
          );
        },
      ),
      { numRuns: NUM_RUNS },
    );
    expect(sent).toBeGreaterThanOrEqual(NUM_RUNS * VOLLEY);
    await expectUnharmed(before);
  }, 120_000);

  it('reads a repeated key as JSON.parse does (the last one wins): accepted only when that makes a valid batch', async () => {
    const before = await seen();
    const batch = runBatch({ trace: { inputSummary: 'the last one' } });
    const text = JSON.stringify(batch.body);
    const lastValid = text.replace(
      '"inputSummary":"the last one"',
      '"inputSummary":{"not":"text"},"inputSummary":"the last one"',
    );
    const lastInvalid = text.replace(
      '"inputSummary":"the last one"',
      '"inputSummary":"the last one","inputSummary":{"not":"text"}',
    );
    expectRefused(await post(alice.apiKey, lastInvalid), 'last value invalid');
    await expectUnharmed(before);
    await accept(alice.apiKey, batch.body, lastValid);
    const read = await call(`/v1/traces/${batch.trace.id}`, undefined, { token: auditorToken });
    expect(read.body.trace.inputSummary).toBe('the last one');
  });

  it('refuses a gzip bomb (1 GiB of zeros) with 413, long before the client has sent it all', async () => {
    const before = await seen();
    // One gzip member of 1 MiB of zeros; 1024 of them back to back are one gzip stream
    // (RFC 1952 allows several members) that inflates to 1 GiB.
    const member = gzipSync(Buffer.alloc(1024 * 1024), { level: 9 });
    expect(gunzipSync(Buffer.concat([member, member])).length).toBe(2 * 1024 * 1024);
    const members = Array<Buffer>(1024).fill(member);
    const size = member.length * members.length;
    const capInMembers = Math.ceil(MAX_BODY_BYTES / (1024 * 1024));
    for (const framing of ['content-length', 'chunked'] as const) {
      const head = rawHead(
        mallory.apiKey,
        'Content-Encoding: gzip\r\n' +
          (framing === 'chunked'
            ? 'Transfer-Encoding: chunked\r\n'
            : `Content-Length: ${size}\r\n`),
      );
      const chunks = members.map((m) =>
        framing === 'chunked'
          ? Buffer.concat([Buffer.from(`${m.length.toString(16)}\r\n`), m, Buffer.from('\r\n')])
          : m,
      );
      // one member (1 MiB inflated) every 10 ms, until the answer starts
      const exchange = await rawExchange(server.url, [head, ...chunks], 10, {
        deadlineMs: DEADLINE_MS,
      });
      expectRefused(exchange, `gzip bomb, ${framing}`);
      expect(exchange.status).toBe(413);
      expect(problemOf(exchange).detail).toBe(`The inflated body exceeds ${MAX_BODY_BYTES} bytes.`);
      const membersSent = Math.ceil((exchange.sentBeforeAnswer - head.length) / member.length);
      // The process answered after at most `membersSent` MiB could have reached it (the cap is
      // `capInMembers`): a small fraction of the 1 GiB, so it stopped inflating near the cap.
      expect(membersSent, `${framing}: ${membersSent} MiB sent before the answer`).toBeLessThan(32);
      expect(membersSent).toBeGreaterThanOrEqual(capInMembers);
      expect(exchange.timedOut).toBe(false);
    }
    await expectUnharmed(before);
  });

  it('answers bodies that lie about their length with a 4xx and stores nothing', async () => {
    const before = await seen();
    // a valid batch: whatever a lie makes of it, none of it may be stored
    const body = JSON.stringify(runBatch({ events: 2 }).body);
    const half = Math.floor(body.length / 2);
    const exchange = (headers: string, chunks: string[], gapMs = 0, options = {}) =>
      rawExchange(server.url, [rawHead(mallory.apiKey, headers), ...chunks], gapMs, {
        deadlineMs: DEADLINE_MS,
        ...options,
      });
    const [longer, halfClosed, shorter, shorterThenRest, ...framings] = await Promise.all([
      // declared longer than sent, then silence: cut by the request timeout
      exchange(`Content-Length: ${body.length + 100}\r\n`, [body]),
      // declared longer than sent, then the client closes its side
      exchange(`Content-Length: ${body.length + 100}\r\n`, [body], 0, { endAfterWrite: true }),
      // declared shorter: the JSON is cut, and the rest is read as if it were a next request
      exchange(`Content-Length: ${half}\r\n`, [body], 0, { stopOnAnswer: false }),
      // the same, with the rest arriving after the first answer
      exchange(`Content-Length: ${half}\r\n`, [body.slice(0, half), body.slice(half)], 500, {
        stopOnAnswer: false,
      }),
      ...[
        `Content-Length: ${body.length}\r\nTransfer-Encoding: chunked\r\n`,
        `Content-Length: ${body.length}\r\nContent-Length: ${body.length - 10}\r\n`,
        'Content-Length: abc\r\n',
        'Content-Length: -1\r\n',
        'Content-Length: 99999999999999999999999\r\n',
      ].map((headers) => exchange(headers, [body])),
    ]);

    expectRefused(longer!, 'Content-Length longer than the body');
    expect(longer!.status).toBe(408);
    expect(longer!.closedAfterMs).toBeLessThan(CUT_WITHIN_MS);
    // the client said it was done before sending what it declared: no answer, or a 4xx one
    for (const answer of halfClosed!.answers) expectRefused(answer, 'declared longer, closed');
    // in one packet, the rest fails as HTTP before the cut JSON is answered: one 400 or two
    expect(shorter!.answers.length).toBeGreaterThanOrEqual(1);
    for (const answer of shorter!.answers) expectRefused(answer, 'Content-Length shorter');
    // the cut JSON is answered, and the connection closed (Fastify does after a body it could
    // not parse): the rest is never read as a request
    expect(shorterThenRest!.answers.map((a) => [a.status, problemOf(a).type])).toEqual([
      [400, 'urn:flightlog:problem:malformed-json'],
    ]);
    for (const answer of shorterThenRest!.answers) expectRefused(answer, 'shorter, then the rest');
    for (const framing of framings) {
      expect(framing.answers.length).toBeGreaterThanOrEqual(1);
      for (const answer of framing.answers) expectRefused(answer, 'conflicting framing');
    }
    // every connection was closed by the server, none by the client's deadline
    for (const done of [longer, halfClosed, shorter, shorterThenRest, ...framings])
      expect(done!.timedOut).toBe(false);
    await expectUnharmed(before);
  });

  it('cuts slow-loris senders (headers or body trickled) with 408, and serves others meanwhile', async () => {
    const before = await seen();
    const body = JSON.stringify(runBatch().body);
    const headersTrickled = () =>
      rawExchange(
        server.url,
        [...`${rawHead(mallory.apiKey, 'X-Slow: abcdefghijklmnopqrstuvwxyz\r\n')}`],
        100,
        {
          deadlineMs: DEADLINE_MS,
        },
      );
    const bodyTrickled = () =>
      rawExchange(
        server.url,
        [rawHead(mallory.apiKey, `Content-Length: ${body.length}\r\n`), ...body],
        100,
        { deadlineMs: DEADLINE_MS },
      );
    // 40 slow senders at once, while an ordinary client keeps being served
    const slow = Promise.all(
      Array.from({ length: 40 }, (_, k) => (k % 2 === 0 ? headersTrickled() : bodyTrickled())),
    );
    const served: number[] = [];
    const deadline = Date.now() + REQUEST_TIMEOUT_MS;
    while (Date.now() < deadline) {
      const started = Date.now();
      const health = await call('/healthz', undefined, { timeoutMs: 2_000 });
      expect(health.status).toBe(200);
      served.push(Date.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(Math.max(...served)).toBeLessThan(1_000);
    for (const [k, exchange] of (await slow).entries()) {
      const what = k % 2 === 0 ? 'headers trickled' : 'body trickled';
      expectRefused(exchange, what);
      expect(exchange.status, what).toBe(408);
      expect(exchange.closedAfterMs, what).toBeLessThan(CUT_WITHIN_MS);
      expect(exchange.timedOut).toBe(false);
    }
    await expectUnharmed(before);
  });

  it("refuses events of another trace and another agent's ids, leaving the other agent's data as it was", async () => {
    const before = await seen();
    const [victimEvent] = victim.events;
    // an event whose traceId is not its item's trace: another of mine, alice's, or none at all
    for (const traceId of [newId(), victim.trace.id]) {
      const own = runBatch({ events: 2 });
      own.body.items[0]!.events[1]!.traceId = traceId;
      const res = await post(mallory.apiKey, own.body);
      expectRefused(res, `event of trace ${traceId}`);
      expect(res.status).toBe(400);
      expect(res.body.errors).toEqual([
        { pointer: '/items/0/events/1/traceId', detail: expect.any(String) },
      ]);
    }
    // alice's trace id, with events of its own, sent with mallory's key
    const hijack = runBatch({
      events: 1,
      trace: { id: victim.trace.id, inputSummary: 'hijacked', eventCount: 5 },
    });
    const hijacked = await post(mallory.apiKey, hijack.body);
    expectRefused(hijacked, "alice's trace id");
    expect(hijacked.status).toBe(409);
    expect(hijacked.body.errors).toEqual([
      { pointer: '/items/0/trace/id', detail: expect.any(String) },
    ]);
    // alice's event id in a trace of mallory's
    const mine = traceSnapshot({ eventCount: 1 });
    const stolen = llmCallEvent(mine.id, 0, { id: victimEvent!.id, payload: { forged: true } });
    const res = await post(mallory.apiKey, {
      batchId: newId(),
      items: [{ trace: mine, events: [stolen] }],
    });
    expectRefused(res, "alice's event id");
    expect(res.status).toBe(409);
    expect(res.body.errors).toEqual([
      { pointer: '/items/0/events/0/id', detail: expect.any(String) },
    ]);
    for (const answer of [hijacked, res]) {
      expect(answer.text).not.toContain(alice.agentId);
      expect(answer.text).not.toContain('secret plan');
    }
    // and finalising alice's trace with mallory's key: not found (its existence is not shown)
    const completed = await call(
      `/v1/traces/${victim.trace.id}/complete`,
      { status: 'errored', errorMessage: 'hijacked' },
      { token: mallory.apiKey },
    );
    expectRefused(completed, "complete alice's trace");
    expect(completed.status).toBe(404);
    await expectUnharmed(before);
    // alice's trace and events are still hers and as she sent them
    const [aliceTrace] = before.data[alice.agentId].filter(
      (t: Json) => t.trace.id === victim.trace.id,
    );
    expect(aliceTrace.trace).toMatchObject({
      inputSummary: 'alice: secret plan',
      eventCount: 2,
      status: 'running',
    });
    expect(aliceTrace.events.map((e: Json) => e.id)).toEqual(victim.events.map((e) => e.id));
  });

  it(`refuses batches past the documented limits (${BATCH_LIMITS.maxItems} items, ${BATCH_LIMITS.maxEventsPerItem} events per item, ${MAX_BODY_BYTES} bytes)`, async () => {
    const before = await seen();
    // the required fields only, so that 10,000 items stay under the body cap
    const minimalTrace = () => {
      const { id, agentId, status, startedAt, inputSummary, tags, eventCount } = traceSnapshot();
      return {
        ...{ id, agentId, status, startedAt, inputSummary, tags, eventCount },
        totalTokens: 0,
        totalCostUsd: '0',
        totalLamports: '0',
        chainTxCount: 0,
        toolsCalled: [],
      };
    };
    const items = Array.from({ length: 10_000 }, () => ({ trace: minimalTrace(), events: [] }));
    const manyItems = JSON.stringify({ batchId: newId(), items });
    expect(manyItems.length).toBeLessThan(MAX_BODY_BYTES);
    const tooManyItems = await post(mallory.apiKey, manyItems);
    expectRefused(tooManyItems, '10,000 items');
    expect(tooManyItems.status).toBe(400);
    expect(tooManyItems.body.errors).toEqual([
      { pointer: '/items', detail: `must NOT have more than ${BATCH_LIMITS.maxItems} items` },
    ]);

    const trace = { ...minimalTrace(), eventCount: BATCH_LIMITS.maxEventsPerItem + 1 };
    const events = Array.from({ length: BATCH_LIMITS.maxEventsPerItem + 1 }, (_, k) => ({
      id: newId(),
      traceId: trace.id,
      sequence: k,
      type: 'custom',
      startedAt: at(k),
      payload: { name: 'step' },
      status: 'ok',
      payloadEncrypted: false,
    }));
    const manyEvents = JSON.stringify({ batchId: newId(), items: [{ trace, events }] });
    expect(manyEvents.length).toBeLessThan(MAX_BODY_BYTES);
    const tooManyEvents = await post(mallory.apiKey, manyEvents, { gzip: true });
    expectRefused(tooManyEvents, `${events.length} events`);
    expect(tooManyEvents.status).toBe(400);
    expect(tooManyEvents.body.errors).toEqual([
      {
        pointer: '/items/0/events',
        detail: `must NOT have more than ${BATCH_LIMITS.maxEventsPerItem} items`,
      },
    ]);

    // Refused bodies sent in full at once, as simple clients do: the answer must reach them
    // before the connection closes, not be overtaken by a reset (nothing reads the bytes left).
    const mib = 1024 * 1024;
    const [declared, streamed, notGzip] = await Promise.all([
      // over the cap, declared: refused before reading
      exchangeAtOnce(`Content-Length: ${MAX_BODY_BYTES + mib}\r\n`, [
        Buffer.alloc(MAX_BODY_BYTES + mib, 0x20),
      ]),
      // over the cap, found while reading (chunked, no length)
      exchangeAtOnce('Transfer-Encoding: chunked\r\n', [
        ...Array.from({ length: 6 }, () =>
          Buffer.concat([
            Buffer.from(`${mib.toString(16)}\r\n`),
            Buffer.alloc(mib, 0x20),
            Buffer.from('\r\n'),
          ]),
        ),
        '0\r\n\r\n',
      ]),
      // says gzip, is not: refused at its first bytes
      exchangeAtOnce(`Content-Encoding: gzip\r\nContent-Length: ${4 * mib}\r\n`, [
        randomBytes(4 * mib),
      ]),
    ]);
    for (const [exchange, what] of [
      [declared, 'declared'],
      [streamed, 'streamed'],
    ] as const) {
      expectRefused(exchange, `body over the cap, ${what}`);
      expect(exchange.status).toBe(413);
      expect(problemOf(exchange).detail).toContain(String(MAX_BODY_BYTES));
    }
    expectRefused(notGzip, 'not gzip');
    expect(problemOf(notGzip).type).toBe('urn:flightlog:problem:malformed-json');
    await expectUnharmed(before);
  });

  it('still takes a valid batch, stops cleanly on SIGTERM, and stored exactly what was accepted', async () => {
    await accept(mallory.apiKey, template());
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    expect(errorLogs()).toEqual([]);
    const store = direct ?? (await location.openStore());
    try {
      expect(await tableCounts(store)).toEqual(stored);
    } finally {
      if (!direct) await store.close();
    }
  });
});
