import { SpanStatusCode, type Span } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getAnalysis, jobsOf, startTestWorker } from '../harness/analysis.js';
import { describeEngines } from '../harness/engines.js';
import { send } from '../harness/http.js';
import { tableCounts } from '../harness/inspect.js';
import {
  childSpan,
  eventIdOf,
  exportSpans,
  otlpExporter,
  recordingTracer,
  traceIdOf,
  type OtlpEncoding,
} from '../harness/otel.js';
import { SseClient } from '../harness/sse-client.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { waitFor } from '../harness/wait.js';

const finishedOf = (all: readonly ReadableSpan[], ...spans: Span[]) =>
  spans.map((span) => {
    const found = all.find((s) => s.spanContext().spanId === span.spanContext().spanId);
    if (!found) throw new Error('span not finished');
    return found;
  });

const chatAttributes = (input: number, output: number) => ({
  'gen_ai.operation.name': 'chat',
  'gen_ai.provider.name': 'anthropic',
  'gen_ai.request.model': 'claude-sonnet',
  'gen_ai.usage.input_tokens': input,
  'gen_ai.usage.output_tokens': output,
});

describeEngines('OTLP ingest: many exports, retries, order [%s]', (engine) => {
  let server: TestServer;
  let agent: TestAgent;
  let viewer: string;
  beforeAll(async () => {
    server = await startTestServer(engine);
    agent = await server.createAgent({ name: 'otel order' });
    viewer = await server.userToken('otel-order-viewer', agent.agentId);
  });
  afterAll(() => server.close());

  const readRun = async (traceId: string) => {
    const res = await send(server.url, `/v1/traces/${traceId}`, undefined, { token: viewer });
    expect(res.status).toBe(200);
    return res.body as { trace: any; events: any[] };
  };

  describe.each(['protobuf', 'json'] as OtlpEncoding[])('exported as %s', (encoding) => {
    it('a run exported children first, over four exports, loses and repeats nothing', async () => {
      const { tracer, finished } = recordingTracer();
      const root = tracer.startSpan('agent.run', {
        attributes: { 'flightlog.input_summary': 'find a flight' },
      });
      const plan = childSpan(tracer, root, 'chat', chatAttributes(100, 20));
      const lookup = childSpan(tracer, plan, 'execute_tool search', {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': 'search',
      });
      lookup.end();
      plan.end();
      const again = childSpan(tracer, root, 'execute_tool search', {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': 'search',
      });
      again.end();
      const answer = childSpan(tracer, root, 'chat', chatAttributes(300, 40));
      answer.end();
      root.end();
      const all = finished();
      const exporter = otlpExporter(server.url, { encoding, apiKey: agent.apiKey, gzip: true });
      const traceId = traceIdOf(root);

      // the grandchild first, then two siblings, then its parent, the root last
      const exports = [[lookup], [answer, again], [plan], [root]];
      const seen: { eventCount: number; status: string }[] = [];
      for (const group of exports) {
        expect(await exportSpans(exporter, finishedOf(all, ...group))).toMatchObject({ ok: true });
        const { trace } = await readRun(traceId);
        seen.push({ eventCount: trace.eventCount, status: trace.status });
      }
      expect(seen).toEqual([
        { eventCount: 1, status: 'running' },
        { eventCount: 3, status: 'running' },
        { eventCount: 4, status: 'running' },
        { eventCount: 5, status: 'completed' },
      ]);
      const { trace, events } = await readRun(traceId);
      expect(trace).toMatchObject({
        inputSummary: 'find a flight',
        eventCount: 5,
        totalTokens: 460,
        toolsCalled: ['search'],
      });
      const [rootSpan] = finishedOf(all, root);
      const [seconds, nanos] = rootSpan!.startTime;
      expect(Date.parse(trace.startedAt)).toBe(seconds * 1000 + Math.floor(nanos / 1e6));
      expect(events.map((e) => e.sequence)).toEqual([0, 1, 2, 3, 4]);
      const parentOf = new Map(events.map((e) => [e.id, e.parentEventId]));
      expect(parentOf.get(eventIdOf(lookup))).toBe(eventIdOf(plan));
      expect(parentOf.get(eventIdOf(plan))).toBe(eventIdOf(root));
      expect(parentOf.get(eventIdOf(answer))).toBe(eventIdOf(root));
      expect(parentOf.get(eventIdOf(root))).toBeNull();

      // every export again (an exporter's retries), all at once too: nothing changes
      const before = await tableCounts(server.store);
      for (const group of exports)
        expect(await exportSpans(exporter, finishedOf(all, ...group))).toMatchObject({ ok: true });
      expect(await exportSpans(exporter, all)).toMatchObject({ ok: true });
      expect(await tableCounts(server.store)).toEqual(before);
      expect(await readRun(traceId)).toEqual({ trace, events, nextCursor: null });
      expect(await jobsOf(server.store, traceId)).toHaveLength(1);
      await exporter.shutdown();
    });
  });

  it('a retry that repeats some spans and brings new ones stores only the new ones', async () => {
    const { tracer, finished } = recordingTracer();
    const root = tracer.startSpan('run');
    const first = childSpan(tracer, root, 'chat', chatAttributes(10, 1));
    first.end();
    const second = childSpan(tracer, root, 'chat', chatAttributes(20, 2));
    second.end();
    root.end();
    const all = finished();
    const exporter = otlpExporter(server.url, { encoding: 'protobuf', apiKey: agent.apiKey });
    await exportSpans(exporter, finishedOf(all, first));
    await exportSpans(exporter, finishedOf(all, first, second, root));
    const { trace, events } = await readRun(traceIdOf(root));
    expect(trace).toMatchObject({ eventCount: 3, totalTokens: 33, status: 'completed' });
    expect(events).toHaveLength(3);
  });

  it('a run exported to two instances in turn continues: retries skipped, numbers and totals carried on', async () => {
    // an instance writes a run's first export without reading; the other instance, which has not
    // seen the run, tries the same and must find it and continue it (one instance on PGlite)
    const other =
      engine === 'postgres' ? await startTestServer(engine, {}, { shareWith: server }) : server;
    try {
      const { tracer, finished } = recordingTracer();
      const root = tracer.startSpan('run');
      const [first, second, third] = [1, 2, 3].map((n) => {
        const child = childSpan(tracer, root, `chat ${n}`, chatAttributes(n * 10, n));
        child.end();
        return child;
      }) as [Span, Span, Span];
      root.end();
      const all = finished();
      const [a, b] = [server, other].map((s) =>
        otlpExporter(s.url, { encoding: 'protobuf', apiKey: agent.apiKey }),
      ) as [ReturnType<typeof otlpExporter>, ReturnType<typeof otlpExporter>];
      expect((await exportSpans(a, finishedOf(all, first, second))).ok).toBe(true);
      expect((await exportSpans(b, finishedOf(all, first, third, root))).ok).toBe(true);
      expect((await exportSpans(a, finishedOf(all, root, second))).ok).toBe(true);
      const { trace, events } = await readRun(traceIdOf(root));
      expect(trace).toMatchObject({ eventCount: 4, totalTokens: 66, status: 'completed' });
      // numbered in arrival order, by start time within an export (the root started first)
      expect(events.map((e) => [e.id, e.sequence])).toEqual(
        [first, second, root, third].map((span, i) => [eventIdOf(span), i]),
      );
    } finally {
      if (other !== server) await other.close();
    }
  });

  it('concurrent exports of one trace, to one instance or two, neither lose nor repeat a span', async () => {
    const second =
      engine === 'postgres' ? await startTestServer(engine, {}, { shareWith: server }) : server;
    try {
      const { tracer, finished } = recordingTracer();
      const root = tracer.startSpan('fan-out');
      const children = Array.from({ length: 40 }, (_, i) => {
        const child = childSpan(tracer, root, `chat ${i}`, chatAttributes(i, 1));
        child.end();
        return child;
      });
      root.end();
      const all = finished();
      const exporters = [server, second].map((s) =>
        otlpExporter(s.url, { encoding: 'protobuf', apiKey: agent.apiKey }),
      );
      // 20 exports of two children each, every one sent twice, spread over both instances
      const groups = Array.from({ length: 20 }, (_, i) => children.slice(i * 2, i * 2 + 2));
      const results = await Promise.all(
        [...groups, ...groups].map((group, i) =>
          exportSpans(exporters[i % 2]!, finishedOf(all, ...group)),
        ),
      );
      expect(results.every((r) => r.ok)).toBe(true);
      await exportSpans(exporters[0]!, finishedOf(all, root));
      const { trace, events } = await readRun(traceIdOf(root));
      const tokens = children.reduce((sum, _, i) => sum + i + 1, 0);
      expect(trace).toMatchObject({ eventCount: 41, totalTokens: tokens, status: 'completed' });
      expect(new Set(events.map((e) => e.id)).size).toBe(41);
      expect(events.map((e) => e.sequence).sort((a, b) => a - b)).toEqual(
        Array.from({ length: 41 }, (_, i) => i),
      );
    } finally {
      if (second !== server) await second.close();
    }
  });

  it('reaches the live stream export by export, and a root ending in ERROR gets its autopsy', async () => {
    const live = await SseClient.open(`${server.url}/v1/agents/${agent.agentId}/live`, viewer);
    expect(live.status).toBe(200);
    try {
      const { tracer, finished } = recordingTracer();
      const root = tracer.startSpan('agent.run', {
        attributes: { 'flightlog.input_summary': 'pay the invoice' },
      });
      const call = childSpan(tracer, root, 'chat', chatAttributes(50, 5));
      call.end();
      const tool = childSpan(tracer, root, 'execute_tool pay', {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': 'pay',
      });
      tool.recordException(new Error('card declined'));
      tool.setStatus({ code: SpanStatusCode.ERROR });
      tool.end();
      root.setStatus({ code: SpanStatusCode.ERROR, message: 'payment failed' });
      root.end();
      const all = finished();
      const traceId = traceIdOf(root);
      const exporter = otlpExporter(server.url, { encoding: 'json', apiKey: agent.apiKey });
      await exportSpans(exporter, finishedOf(all, call, tool));
      await live.waitFor(
        (c) => c.traces().some((m) => m.item.trace.id === traceId),
        5_000,
        'the first export',
      );
      await exportSpans(exporter, finishedOf(all, root));
      await live.waitFor(
        (c) =>
          c.traces().some((m) => m.item.trace.id === traceId && m.item.trace.status !== 'running'),
        5_000,
        'the root',
      );
      const messages = live.traces().filter((m) => m.item.trace.id === traceId);
      expect(messages.map((m) => m.item.trace.status)).toEqual(['running', 'errored']);
      expect(messages.map((m) => m.item.events.length)).toEqual([2, 1]);
      expect(messages[1]!.item.trace).toMatchObject({
        errorMessage: 'payment failed',
        eventCount: 3,
        totalTokens: 55,
        toolsCalled: ['pay'],
      });

      const worker = startTestWorker(server.store);
      try {
        const analysis = await waitFor(async () => {
          const res = await getAnalysis(server.url, viewer, traceId);
          return res.body.status === 'done' ? res.body : undefined;
        }, 'the autopsy');
        expect(analysis.autopsy).toMatch(/^## Verdict: failed/);
        expect(analysis.autopsy).toContain('card declined');
      } finally {
        await worker.stop(5_000);
      }
    } finally {
      live.close();
    }
  });
});
