import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runBatch } from '../fixtures/batches.js';
import type { LoadAgent } from '../harness/agent-load.js';
import { startServeProcess, type ServeProcess } from '../harness/cli-process.js';
import { describeEngines } from '../harness/engines.js';
import { postBatch, send, type HttpResult } from '../harness/http.js';
import {
  createAgentsWithCli,
  freshServiceLocation,
  type ServiceLocation,
} from '../harness/service-location.js';
import { percentile } from '../harness/latency.js';

/*
 * Issue 15, items 1 and 8, against a real `flightlog serve` process on both engines: work the
 * server does for a request is bounded by what the request is allowed to be, before it is known
 * to be valid. A 5 KB gzip body of 1.7 million empty events (within MAX_BODY_BYTES) used to hold
 * the event loop for a minute and grow the process by gigabytes while Ajv collected an error for
 * every one of them; a POST to an unknown path, or without valid credentials, must not get its
 * body inflated and parsed at all.
 */

const MAX_BODY_BYTES = 5 * 1024 * 1024;
/** Client deadline of every exchange: a server busy for a minute fails the test, not hangs it. */
const DEADLINE_MS = 20_000;

/** `items[0].events` of `count` empty objects, around a valid trace: one bound far exceeded. */
function emptyEventsBody(count: number): Buffer {
  const { trace } = runBatch({ events: 0 }).body.items[0]!;
  const head = JSON.stringify({ batchId: runBatch().body.batchId, items: [{ trace, events: [] }] });
  const open = head.lastIndexOf('[]') + 1;
  const text = `${head.slice(0, open)}${'{},'.repeat(count - 1)}{}${head.slice(open)}`;
  return Buffer.from(text);
}

/**
 * Every bound respected (160 items of 10,000 events each) and yet 1.6 million empty objects: a
 * check of array lengths alone would let this one through to a validator that lists every error.
 */
function withinBoundsBody(): Buffer {
  const item = `{"trace":{},"events":[${'{},'.repeat(9_999)}{}]}`;
  const batchId = JSON.stringify(runBatch().body.batchId);
  return Buffer.from(`{"batchId":${batchId},"items":[${Array(160).fill(item).join(',')}]}`);
}

/** Peak and current resident memory of a process, in MiB (Linux). */
function memoryMiB(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1]);
  return { rss: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
}

/** CPU time (user + system) a process has used, in ms (Linux, 100 ticks a second). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** Each body compressed once: compressing the 64 MiB bomb took 0.3 s, counted as latency. */
const compressed = new WeakMap<Buffer, Buffer>();
function gzipOnce(body: Buffer): Buffer {
  let gzipped = compressed.get(body);
  if (!gzipped) compressed.set(body, (gzipped = gzipSync(body)));
  return gzipped;
}

async function gzipPost(
  url: string,
  path: string,
  body: Buffer,
  token?: string,
): Promise<HttpResult & { ms: number }> {
  const gzipped = gzipOnce(body);
  const started = performance.now();
  const result = await send(url, path, gzipped, {
    headers: { 'content-encoding': 'gzip' },
    timeoutMs: DEADLINE_MS,
    ...(token ? { token } : {}),
  });
  return { ...result, ms: performance.now() - started };
}

describeEngines('work per request is bounded before the body is trusted [%s]', (engine) => {
  let service: ServiceLocation;
  let server: ServeProcess;
  let attacker: LoadAgent;
  let victim: LoadAgent;
  const hostile = emptyEventsBody(1_700_000);

  beforeAll(async () => {
    expect(hostile.length).toBeLessThanOrEqual(MAX_BODY_BYTES);
    service = freshServiceLocation(engine);
    const agents = await createAgentsWithCli(service.env, `bounded-${engine}`, 2);
    attacker = agents[0]!;
    victim = agents[1]!;
    server = await startServeProcess({
      ...service.env,
      MAX_BODY_BYTES: String(MAX_BODY_BYTES),
      ANALYSIS_WORKER: 'off',
      // wrong keys are sent on purpose below: the guess limit is not what is measured here
      API_KEY_MAX_FAILURES: '1000',
    });
  });
  afterAll(async () => {
    server?.child.kill('SIGKILL');
    await server?.exited;
    await service?.dispose();
  });

  it('answers 1.6–1.7 million empty events in a 5 KB gzip body with a 400 at once, in little memory', async () => {
    const before = memoryMiB(server.pid);
    for (const [name, body, pointer] of [
      ['1.7M events in one item', hostile, '/items/0/events'],
      ['160 items of 10,000 events', withinBoundsBody(), '/items/0/trace'],
    ] as const) {
      const answer = await gzipPost(server.url, '/v1/traces/batch', body, attacker.apiKey);
      const memory = memoryMiB(server.pid);
      console.log(
        `[${engine}] ${name}: ${gzipSync(body).length} B gzip, ${body.length} B JSON → ` +
          `${answer.status} in ${answer.ms.toFixed(0)} ms; server RSS ${memory.rss.toFixed(0)} MiB, ` +
          `peak ${memory.peak.toFixed(0)} MiB (was ${before.peak.toFixed(0)} MiB)`,
      );
      expect(answer.status, answer.text).toBe(400);
      expect(answer.body.type).toBe('urn:flightlog:problem:validation-failed');
      expect(answer.body.errors.length).toBeGreaterThan(0);
      expect(answer.body.errors.length).toBeLessThanOrEqual(100);
      expect(answer.body.errors[0].pointer).toContain(pointer);
      // Ajv's million errors took 60–100 s. Parsing 5 MiB of JSON remains (~0.2 s, and ~0.3 s of
      // garbage collection), now on a worker thread that yields the cores (nice 10): ~1 s on an
      // idle machine, several when the cores are busy — the sender waits, not the others.
      expect(answer.ms).toBeLessThan(15_000);
      // the parsed body itself is a few hundred MiB at most; the errors were gigabytes
      expect(memory.peak - before.peak).toBeLessThan(768);
    }
    // an ordinary invalid batch still lists every field to fix
    const ordinary = runBatch({ events: 2 }).body as any;
    delete ordinary.items[0].trace.status;
    ordinary.items[0].events[1].kind = 'nonsense';
    const listed = await postBatch(server.url, attacker.apiKey, ordinary);
    expect(listed.status).toBe(400);
    expect(listed.body.errors.map((e: { pointer: string }) => e.pointer).sort()).toEqual([
      '/items/0/events/1/kind',
      '/items/0/trace/status',
    ]);
  });

  it("another agent's batches keep their pace while an attacker sends such bodies in a loop", async () => {
    const victimBatch = async () => {
      const started = performance.now();
      const answer = await postBatch(server.url, victim.apiKey, runBatch({ events: 4 }).body, {
        timeoutMs: DEADLINE_MS,
      });
      expect(answer.status, answer.text).toBe(202);
      return performance.now() - started;
    };
    for (let i = 0; i < 20; i++) await victimBatch(); // warm-up
    const quietTimes: number[] = [];
    for (let i = 0; i < 100; i++) quietTimes.push(await victimBatch());

    let attacking = true;
    const attackStatuses = new Map<number, number>();
    let attacks = 0;
    const attack = (async () => {
      while (attacking) {
        const answer = await gzipPost(server.url, '/v1/traces/batch', hostile, attacker.apiKey);
        attackStatuses.set(answer.status, (attackStatuses.get(answer.status) ?? 0) + 1);
        attacks++;
      }
    })();
    // long enough to overlap several of the attacker's bodies, however slow they get
    const duringTimes: number[] = [];
    while (duringTimes.length < 100 || attacks < 3) duringTimes.push(await victimBatch());
    attacking = false;
    await attack;
    // Quiet again after the attack (A-B-A): a baseline taken only before it met, once, a calm
    // stretch of this shared machine whose p99 was half the usual, and the ratio missed by a hair.
    for (let i = 0; i < 100; i++) quietTimes.push(await victimBatch());

    const quiet = { p50: percentile(quietTimes, 50), p99: percentile(quietTimes, 99) };
    const during = { p50: percentile(duringTimes, 50), p99: percentile(duringTimes, 99) };
    const ratio = during.p99 / quiet.p99;
    console.log(
      `[${engine}] victim batch latency: quiet p50 ${quiet.p50.toFixed(1)} ms p99 ` +
        `${quiet.p99.toFixed(1)} ms; attacker looping 1.7M-empty-event bodies ` +
        `(${JSON.stringify(Object.fromEntries(attackStatuses))}, ${duringTimes.length} victim ` +
        `batches meanwhile): p50 ${during.p50.toFixed(1)} ms p99 ${during.p99.toFixed(1)} ms, ` +
        `p99 ratio ${ratio.toFixed(2)} (target 2)`,
    );
    expect([...attackStatuses.keys()]).toEqual([400]);
    // parsed on the event loop, each body held it ~0.4 s (JSON.parse and the collection of 1.7
    // million objects): the victim's p99 was 20–40 times its quiet value. Parsed on a worker
    // thread of lower priority, the target is 2; the bound leaves room for a shared 2-core host.
    expect(ratio).toBeLessThan(4);
  });

  it('refuses unknown routes and missing or wrong credentials before reading the body', async () => {
    // inflates to 64 MiB, past MAX_BODY_BYTES: a 413 would show it was inflated
    const bomb = Buffer.alloc(64 * 1024 * 1024, 0x20);
    const rounds = 20;
    /*
     * CPU time is read from the process in 10 ms ticks and includes whatever else the server
     * does meanwhile (a worker's garbage collection after the previous test's huge bodies, the
     * engine's own work): such bursts only ever add, so each figure is the least of three
     * windows of `rounds` requests. One window once read 22.5 ms per refused request for a
     * plain 401's 2.5.
     */
    const windows = 3;
    const measure = async (name: string, request: () => Promise<HttpResult & { ms: number }>) => {
      const statuses = new Set<number>();
      const latencies: number[] = [];
      const cpus: number[] = [];
      for (let window = 0; window < windows; window++) {
        const cpuBefore = cpuMs(server.pid);
        for (let i = 0; i < rounds; i++) {
          const answer = await request();
          statuses.add(answer.status);
          latencies.push(answer.ms);
        }
        cpus.push((cpuMs(server.pid) - cpuBefore) / rounds);
      }
      const cpu = Math.min(...cpus);
      console.log(
        `[${engine}] ${name}: ${[...statuses].join(',')}, server CPU ${cpu.toFixed(1)} ms per ` +
          `request (windows: ${cpus.map((ms) => ms.toFixed(1)).join(', ')}), latency p50 ` +
          `${percentile(latencies, 50).toFixed(1)} ms`,
      );
      return { statuses: [...statuses], cpu };
    };

    const plain = await measure('plain 401 (no key, no body)', async () => {
      const started = performance.now();
      const answer = await send(server.url, '/v1/traces/batch', undefined, {
        method: 'POST',
        timeoutMs: DEADLINE_MS,
      });
      return { ...answer, ms: performance.now() - started };
    });
    expect(plain.statuses).toEqual([401]);
    const cases = [
      ['unknown path, no key, 1.7M events', '/v1/nowhere', hostile, undefined, 404],
      ['batch route, no key, 1.7M events', '/v1/traces/batch', hostile, undefined, 401],
      ['batch route, wrong key, 1.7M events', '/v1/traces/batch', hostile, 'fl_wrong', 401],
      ['unknown path, no key, gzip bomb', '/v1/nowhere', bomb, undefined, 404],
      ['unknown path, valid key, gzip bomb', '/v1/nowhere', bomb, attacker.apiKey, 404],
      ['batch route, no key, gzip bomb', '/v1/traces/batch', bomb, undefined, 401],
    ] as const;
    for (const [name, path, body, token, status] of cases) {
      const refused = await measure(name, () => gzipPost(server.url, path, body, token));
      expect(refused.statuses, name).toEqual([status]);
      // about what a plain 401 costs; inflating and parsing cost ~300 ms each
      expect(refused.cpu, name).toBeLessThan(plain.cpu * 3 + 10);
    }
  });
});
