import { readFileSync } from 'node:fs';
import type { Event, Trace } from '@flightlog/protocol';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { mintDevToken } from '../../src/auth/dev-token.js';
import { llmCallEvent, newId, traceSnapshot } from '../fixtures/batches.js';
import { getAnalysis } from '../harness/analysis.js';
import { runCli, startServeProcess, type ServeProcess } from '../harness/cli-process.js';
import { describeEngines } from '../harness/engines.js';
import { postBatch, send } from '../harness/http.js';
import {
  createAgentsWithCli,
  freshServiceLocation,
  type ServiceLocation,
} from '../harness/service-location.js';
import { waitFor } from '../harness/wait.js';

/*
 * Issue 15, item 3, against a real `flightlog serve` process (analysis worker included) on both
 * engines: no read loads a whole trace. A trace of 20,000 events of 5 KB each (100 MB) crashed
 * the PGlite server out of memory when it was analysed, again after every restart as the job's
 * lease came back, and when a viewer opened it. Here the same trace: the viewer pages through it and the analysis runs, and the server's peak memory
 * grows by a bounded amount, far less than the trace.
 */

const JWT_SECRET = 'whole-trace-memory-jwt-secret-0123456789abcdef';
const EVENTS = 20_000;
const PAYLOAD_BYTES = 5 * 1024;
const EVENTS_PER_BATCH = 200;
/** The documented bound of one page of events (README, read API). */
const PAGE_MAX_BYTES = 1024 * 1024;
/**
 * What the server's peak memory may grow by while it serves the trace: well under the 100 MB the
 * trace holds.
 */
const MAX_GROWTH_MIB = 64;
/** The server's JS heap limit: under the trace's size (PGlite's own memory is outside it). */
const HEAP_MIB = 160;

interface TracePage {
  trace: Trace;
  events: Event[];
  nextCursor: string | null;
}

/** Peak and current resident memory of a process, in MiB (Linux). */
function memoryMiB(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1]);
  return { rss: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
}

/** An event whose payload is about PAYLOAD_BYTES of text. */
function bigEvent(traceId: string, sequence: number): Event {
  const event = llmCallEvent(traceId, sequence);
  const filler = `step ${sequence} `.padEnd(PAYLOAD_BYTES, 'x');
  return {
    ...event,
    payload: { ...event.payload, output: { content: filler, finishReason: 'stop' } },
  } as Event;
}

describeEngines('no read loads a whole trace [%s]', (engine) => {
  let service: ServiceLocation;
  let server: ServeProcess;
  let apiKey: string;
  let viewer: string;
  const trace = traceSnapshot({ eventCount: EVENTS });
  const sent: string[] = [];

  beforeAll(async () => {
    service = freshServiceLocation(engine);
    const [agent] = await createAgentsWithCli(service.env, `whole-trace-${engine}`, 1);
    apiKey = agent!.apiKey;
    const granted = await runCli(
      ['member', 'grant', '--agent', agent!.agentId, '--user', 'viewer', '--role', 'viewer'],
      service.env,
    );
    expect(granted.code, granted.stderr).toBe(0);
    server = await startServeProcess({
      ...service.env,
      JWT_SECRET,
      ANALYSIS_GRACE_MS: '0',
      // a JS heap smaller than the trace: loading it whole fails, and garbage of the pages read
      // is collected as it goes instead of whenever V8 gets round to it
      NODE_OPTIONS: `--max-old-space-size=${HEAP_MIB}`,
      // the live bus keeps recent batches for replays (256 MiB by default): not what is measured
      LIVE_BUFFER_MAX_BYTES: String(4 * 1024 * 1024),
    });
    viewer = await mintDevToken(JWT_SECRET, 'viewer');

    // sent newest first, so order comes from the store and not from arrival
    for (let end = EVENTS; end > 0; end -= EVENTS_PER_BATCH) {
      const events = Array.from({ length: EVENTS_PER_BATCH }, (_, i) =>
        bigEvent(trace.id, end - EVENTS_PER_BATCH + i),
      );
      sent.unshift(...events.map((e) => e.id));
      const res = await postBatch(server.url, apiKey, {
        batchId: newId(),
        items: [{ trace, events }],
      });
      expect(res.status, res.text).toBe(202);
    }
  }, 240_000);

  afterAll(async () => {
    server?.child.kill('SIGKILL');
    await server?.exited;
    await service?.dispose();
  });

  it('pages a 100 MB trace to a viewer and analyses it, every event once and in order, in bounded memory', async () => {
    const before = memoryMiB(server.pid);

    // an unpaged request gets the first page, not the whole trace
    const first = await send(server.url, `/v1/traces/${trace.id}`, undefined, { token: viewer });
    expect(first.status, first.text).toBe(200);
    const firstPage = first.body as TracePage;

    const complete = await send(
      server.url,
      `/v1/traces/${trace.id}/complete`,
      { status: 'completed' },
      { token: apiKey },
    );
    expect(complete.status, complete.text).toBe(200);

    // the viewer walks the whole trace while the worker analyses it
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    let largestPage = 0;
    do {
      const query: string = cursor === null ? '' : `?cursor=${encodeURIComponent(cursor)}`;
      const res = await send(server.url, `/v1/traces/${trace.id}${query}`, undefined, {
        token: viewer,
      });
      expect(res.status, res.text).toBe(200);
      const page = res.body as TracePage;
      seen.push(...page.events.map((e) => e.id));
      const bytes = page.events.reduce((sum, e) => sum + JSON.stringify(e.payload).length, 0);
      largestPage = Math.max(largestPage, bytes);
      cursor = page.nextCursor;
      pages++;
      expect(pages).toBeLessThanOrEqual(EVENTS); // a cursor that never ends is a failure too
    } while (cursor !== null);

    const analysis = await waitFor(
      async () => {
        const res = await getAnalysis(server.url, viewer, trace.id);
        return res.status === 200 && res.body.status === 'done'
          ? (res.body as { autopsy: unknown })
          : undefined;
      },
      'the autopsy of the 100 MB trace',
      120_000,
      200,
    );
    const after = memoryMiB(server.pid);
    console.log(
      `[${engine}] ${EVENTS} events of ${PAYLOAD_BYTES / 1024} KiB (${((EVENTS * PAYLOAD_BYTES) / 2 ** 20).toFixed(0)} MiB): ` +
        `${pages} pages (largest ${(largestPage / 1024).toFixed(0)} KiB) and the analysis; server RSS ` +
        `${before.rss.toFixed(0)} → ${after.rss.toFixed(0)} MiB, peak ${before.peak.toFixed(0)} → ` +
        `${after.peak.toFixed(0)} MiB`,
    );
    expect(after.peak - before.peak).toBeLessThan(MAX_GROWTH_MIB);
    expect(firstPage.trace.id).toBe(trace.id);
    expect(firstPage.events.length).toBeGreaterThan(0);
    expect(firstPage.events.length).toBeLessThan(EVENTS);
    expect(firstPage.nextCursor).toEqual(expect.any(String));
    expect(seen).toEqual(sent);
    expect(largestPage).toBeLessThanOrEqual(PAGE_MAX_BYTES);
    // the autopsy says it read only part of the run
    expect(String(analysis.autopsy)).toMatch(/in the middle of the run left out/);
  }, 300_000);
});
