import { afterEach, describe, expect, it } from 'vitest';
import { FlightlogClient } from '../../src/index.js';
import { CLIENT_DIST, runNode } from '../harness/child-node.js';
import { LoopbackServer, type ScriptedAnswer } from '../harness/loopback-server.js';
import { RecordingLogger } from '@flightlog/test-support';

const TRACE = '01JCOMPLETETRACEALIVE00001';
const unavailable: ScriptedAnswer = {
  status: 503,
  headers: { 'retry-after': '1', 'content-type': 'application/problem+json' },
  body: { status: 503, detail: 'The trace store is unreachable.' },
};
const completed: ScriptedAnswer = { status: 200, body: { traceId: TRACE, status: 'completed' } };

/** A host whose last act is `await client.completeTrace(…)` at the top level of its module. */
const host = (settings: object) => `
  import { FlightlogClient } from ${JSON.stringify(CLIENT_DIST)};
  const client = new FlightlogClient({
    apiKey: 'flk_complete',
    ingestUrl: process.env.URL,
    logger: { warn(message) { console.log('warn: ' + message); } },
    ...${JSON.stringify(settings)},
  });
  const outcome = await client.completeTrace(${JSON.stringify(TRACE)}, { status: 'errored', errorMessage: 'worker died' });
  console.log('outcome: ' + JSON.stringify(outcome));
`;

describe('completeTrace() keeps its promise to a host that awaits it (real processes, loopback service)', () => {
  let server: LoopbackServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it('keeps the process alive through a retry after a 503: the completion is sent, and the outcome comes back', async () => {
    server = await new LoopbackServer((_r, n) => (n === 1 ? unavailable : completed)).start();
    const result = await runNode(host({}), { URL: server.url });
    // Before: the retry waited on an unref'd timer and the host exited with code 13 (a top-level
    // await that never settled), the completion neither sent nor logged.
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('outcome: {"kind":"ok"}');
    expect(server.requests.map((r) => r.path)).toEqual([
      `/v1/traces/${TRACE}/complete`,
      `/v1/traces/${TRACE}/complete`,
    ]);
    expect(server.requests[1]?.json).toEqual({ status: 'errored', errorMessage: 'worker died' });
    // Retry-After: 1 was honoured.
    expect((server.requests[1]?.at ?? 0) - (server.requests[0]?.at ?? 0)).toBeGreaterThan(950);
  });

  it('a service that stays down: the process waits for the last attempt, the outcome is a value and is logged', async () => {
    server = await new LoopbackServer(() => unavailable).start();
    const result = await runNode(
      host({ retry: { initialDelayMs: 50, maxDelayMs: 1_000, maxAttempts: 3 } }),
      { URL: server.url },
    );
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(server.requests).toHaveLength(3);
    expect(result.stdout).toContain(
      'warn: completeTrace gave up after 3 attempts: HTTP 503: The trace store is unreachable.',
    );
    expect(result.stdout).toContain(
      'outcome: {"kind":"failed","status":null,"detail":"HTTP 503: The trace store is unreachable."}',
    );
  });

  it('flushes first but waits for that at most flushTimeoutMs; close() aborts a call still pending, which resolves and is logged', async () => {
    // Batches are never answered; completions are answered at once, except for one trace.
    server = await new LoopbackServer((request) =>
      request.path.endsWith('/batch') || request.path.includes('HUNG') ? undefined : completed,
    ).start();
    const logger = new RecordingLogger();
    const client = new FlightlogClient({
      apiKey: 'flk_k',
      ingestUrl: server.url,
      logger,
      flushOnExit: false,
      flushTimeoutMs: 300,
    });
    client.startSession({ inputSummary: 'unsent', traceId: TRACE }).toolCall({ name: 'a' });
    const started = performance.now();
    expect(await client.completeTrace(TRACE)).toEqual({ kind: 'ok' });
    const ms = performance.now() - started;
    expect(ms).toBeGreaterThanOrEqual(295);
    expect(ms).toBeLessThan(1_300);
    expect(server.requests.map((r) => r.path)).toEqual([
      '/v1/traces/batch',
      `/v1/traces/${TRACE}/complete`,
    ]);

    const pending = client.completeTrace('01JCOMPLETETRACEHUNG000001');
    await new Promise((resolve) => setTimeout(resolve, 50));
    void client.close({ timeoutMs: 0 });
    expect(await pending).toEqual({ kind: 'failed', status: null, detail: 'aborted' });
    expect(logger.matching('completeTrace aborted by close(): aborted')).toHaveLength(1);
  });

  it('20 calls in flight at once put no warning on the host’s stderr (no MaxListenersExceededWarning)', async () => {
    server = await new LoopbackServer(
      () => new Promise((resolve) => setTimeout(() => resolve(completed), 100)),
    ).start();
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
    process.on('warning', onWarning);
    try {
      const logger = new RecordingLogger();
      const client = new FlightlogClient({ apiKey: 'flk_k', ingestUrl: server.url, logger });
      const outcomes = await Promise.all(
        Array.from({ length: 20 }, () => client.completeTrace(TRACE)),
      );
      expect(outcomes).toEqual(Array.from({ length: 20 }, () => ({ kind: 'ok' })));
      await client.close();
      await new Promise((resolve) => setTimeout(resolve, 20)); // warnings are emitted on a later tick
      expect(logger.lines).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings).toEqual([]);
    expect(server.requests).toHaveLength(20);
  });
});
