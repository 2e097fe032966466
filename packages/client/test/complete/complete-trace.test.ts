import { afterEach, describe, expect, it } from 'vitest';
import { FlightlogClient } from '../../src/index.js';
import { LoopbackServer, type ScriptedAnswer } from '../harness/loopback-server.js';
import { RecordingLogger } from '../harness/recording-logger.js';

const TRACE = '01JCOMPLETETRACEALIVE00001';
const completed: ScriptedAnswer = { status: 200, body: { traceId: TRACE, status: 'completed' } };

describe('completeTrace() against a loopback service', () => {
  let server: LoopbackServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
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
