import { afterEach, describe, expect, it, vi } from 'vitest';
import { FlightlogClient } from '../../src/index.js';
import { createConsoleLogger, WarningChannel } from '../../src/logger.js';
import { RecordingLogger } from '@flightlog/test-support';
import { ScriptedTransport } from '../harness/scripted-transport.js';

describe('warnings are throttled, and what was held back is counted', () => {
  afterEach(() => vi.restoreAllMocks());

  it('the default logger prints at most 20 lines a minute, then tells how many it held back', () => {
    const printed: unknown[][] = [];
    vi.spyOn(console, 'warn').mockImplementation((...args: unknown[]) => printed.push(args));
    let now = 0;
    const logger = createConsoleLogger(() => now);
    for (let i = 0; i < 25; i++) logger.warn(`line ${i}`);
    expect(printed).toHaveLength(20);
    expect(printed[0]).toEqual(['[flightlog] line 0']);
    now = 59_999;
    logger.warn('still the same minute');
    expect(printed).toHaveLength(20);
    now = 60_000;
    logger.warn('a new minute', { status: 503 });
    expect(printed.at(-1)).toEqual([
      '[flightlog] a new minute (6 earlier warnings suppressed)',
      { status: 503 },
    ]);
  });

  it('one line per kind per interval; the next one carries the repeats in between', () => {
    const logger = new RecordingLogger();
    let now = 0;
    const warnings = new WarningChannel(logger, () => now);
    for (let i = 0; i < 5; i++) warnings.throttled('retrying', 10_000, 'retrying', { i });
    warnings.throttled('other', 10_000, 'another kind');
    now = 10_000;
    warnings.throttled('retrying', 10_000, 'retrying', { i: 5 });
    expect(logger.lines).toEqual([
      { message: 'retrying', context: { i: 0 } },
      { message: 'another kind' },
      { message: 'retrying', context: { i: 5, repeatsSinceLastWarning: 4 } },
    ]);
  });

  it('reportHeldBack() (what close() calls) names what is still held back, most repeated first, once', () => {
    const logger = new RecordingLogger();
    const warnings = new WarningChannel(logger, () => 0);
    for (let i = 0; i < 4; i++) warnings.throttled('a', 10_000, 'batch given up');
    for (let i = 0; i < 8; i++) warnings.throttled('b', 10_000, 'event dropped at flush');
    for (let i = 0; i < 3; i++) warnings.once('c', 'said once, on purpose');
    warnings.reportHeldBack();
    warnings.reportHeldBack(); // nothing new: no second line
    expect(logger.lines.map((l) => l.message)).toEqual([
      'batch given up',
      'event dropped at flush',
      'said once, on purpose',
      'warnings held back by the throttle since last shown: 7 × "event dropped at flush"; 3 × "batch given up"',
    ]);
  });

  it('batches given up, refused or retried, one after another: one line per kind, the rest counted at close()', async () => {
    for (const outcome of [
      { kind: 'retryable', reason: 'HTTP 503: down' } as const,
      { kind: 'failed', status: 401, detail: 'The API key is not valid.' } as const,
    ]) {
      const transport = new ScriptedTransport();
      transport.answer = () => outcome;
      const logger = new RecordingLogger();
      const client = new FlightlogClient(
        {
          apiKey: 'k',
          logger,
          flushOnExit: false,
          retry: { initialDelayMs: 1, maxDelayMs: 1, maxAttempts: 2 },
        },
        { transport },
      );
      const session = client.startSession({ inputSummary: 'many batches' });
      for (let i = 0; i < 30; i++) {
        session.toolCall({ name: `t${i}` });
        await client.flush();
      }
      await client.close();
      expect(transport.requests.length).toBe(outcome.kind === 'retryable' ? 60 : 30);
      const messages = logger.lines.map((l) => l.message);
      expect(messages.at(-1)).toMatch(
        /^warnings held back by the throttle since last shown: 29 × /,
      );
      expect(messages.length).toBeLessThanOrEqual(3); // retrying, given up (or refused), summary
    }
  });

  it('a host repeating a mistake 500 times gets one line per kind, not 1,000', async () => {
    const transport = new ScriptedTransport();
    const logger = new RecordingLogger();
    const client = new FlightlogClient({ apiKey: 'k', logger, flushOnExit: false }, { transport });
    const throwing = {
      get outputSummary(): string {
        throw new Error('getter broke');
      },
    };
    for (let i = 0; i < 500; i++) {
      client.startSession({ inputSummary: `s${i}` }).end({ outputSummary: 42 } as never);
      client.startSession({ inputSummary: `t${i}` }).end(throwing);
      await client.flush({ timeoutMs: -1 });
    }
    const messages = logger.lines.map((l) => l.message);
    expect(messages.filter((m) => m.startsWith('end: outputSummary must be'))).toHaveLength(1);
    expect(messages.filter((m) => m.startsWith('end: reading outputSummary threw'))).toHaveLength(
      1,
    );
    expect(messages.filter((m) => m.startsWith('timeoutMs must be'))).toHaveLength(1);
    expect(messages.length).toBeLessThanOrEqual(5);
    await client.close();
    // the count of what was held back is not lost
    expect(logger.lines.at(-1)?.message).toMatch(/499 × "end: outputSummary must be/);
  });
});
