import { afterEach, describe, expect, it, vi } from 'vitest';
import { FlightlogClient } from '../../src/index.js';
import { EventBuffer } from '../../src/event-buffer.js';
import { ClientCore } from '../../src/client-core.js';
import { MAX_TIMER_DELAY_MS, timerDelay } from '../../src/timer-delay.js';
import { trackClient, untrackClient } from '../../src/client-registry.js';
import { RecordingLogger } from '@flightlog/test-support';
import { OK, ScriptedTransport, until } from '../harness/scripted-transport.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Collects what would reach the host as process-level trouble while `run` runs. */
async function processTrouble(run: () => Promise<void>) {
  const trouble: string[] = [];
  const onWarning = (warning: Error) => trouble.push(`${warning.name}: ${warning.message}`);
  const onUnhandled = (reason: unknown) => trouble.push(`unhandledRejection: ${String(reason)}`);
  const onUncaught = (error: Error) => trouble.push(`uncaughtException: ${error.message}`);
  process.on('warning', onWarning);
  process.on('unhandledRejection', onUnhandled);
  process.on('uncaughtException', onUncaught);
  try {
    await run();
    await sleep(20); // warnings and rejections are reported asynchronously
  } finally {
    process.off('warning', onWarning);
    process.off('unhandledRejection', onUnhandled);
    process.off('uncaughtException', onUncaught);
  }
  return trouble;
}

describe('timer delays are clamped to what Node timers hold (real timers)', () => {
  it('close({ timeoutMs: Number.MAX_SAFE_INTEGER }) waits for delivery instead of giving up at once', async () => {
    const trouble = await processTrouble(async () => {
      const transport = new ScriptedTransport();
      transport.answer = async () => {
        await sleep(50); // a service that takes a moment
        return OK;
      };
      const client = new FlightlogClient(
        { apiKey: 'k', logger: new RecordingLogger(), flushOnExit: false },
        { transport },
      );
      client.startSession({ inputSummary: 'patient' }).toolCall({ name: 'a' });
      expect(await client.flush({ timeoutMs: Infinity })).toEqual({ timedOut: false });
      client.startSession({ inputSummary: 'patient' }).toolCall({ name: 'b' });
      expect(await client.close({ timeoutMs: Number.MAX_SAFE_INTEGER })).toEqual({
        timedOut: false,
      });
      expect(client.stats()).toMatchObject({ deliveredEvents: 2, droppedEvents: 0 });
    });
    expect(trouble).toEqual([]); // no TimeoutOverflowWarning on the host's stderr
  });

  it('a flush interval past 2^31 − 1 ms never fires in a loop (settings clamp it, and so does the timer)', async () => {
    const trouble = await processTrouble(async () => {
      // The setting: clamped to one hour, with a warning; nothing is flushed by the timer soon.
      const logger = new RecordingLogger();
      const transport = new ScriptedTransport();
      const client = new FlightlogClient(
        { apiKey: 'k', logger, flushOnExit: false, flushIntervalMs: 2 ** 31 + 10 },
        { transport },
      );
      expect(logger.matching('flushIntervalMs must be at most 3600000')).toHaveLength(1);
      client.startSession({ inputSummary: 'patient' }).toolCall({ name: 'a' });
      await sleep(60);
      expect(transport.requests).toHaveLength(0);
      expect(client.stats().bufferedEvents).toBe(1);
      await client.close();
      expect(transport.requests).toHaveLength(1);
      // The registry's timer, given a delay past what Node holds, clamps it too.
      let ticks = 0;
      const registered = {
        tick: () => (ticks += 1),
        flushBeforeExit: () => undefined,
        warnTooManyClients: () => undefined,
      };
      trackClient(registered, 2 ** 40);
      await sleep(60);
      untrackClient(registered);
      expect(ticks).toBe(0);
    });
    expect(trouble).toEqual([]); // no TimeoutOverflowWarning on the host's stderr
  });

  it('every delay goes through the same clamp', () => {
    expect(MAX_TIMER_DELAY_MS).toBe(2_147_483_647);
    expect(timerDelay(Number.MAX_SAFE_INTEGER)).toBe(MAX_TIMER_DELAY_MS);
    expect(timerDelay(Infinity)).toBe(MAX_TIMER_DELAY_MS);
    expect(timerDelay(1_500)).toBe(1_500);
    expect(timerDelay(-5)).toBe(0);
    expect(timerDelay(Number.NaN)).toBe(0);
  });
});

describe('a bug of ours inside a callback the client scheduled goes to the logger, never to the host', () => {
  afterEach(() => vi.restoreAllMocks());

  it('the flush scheduled when a session ends (an immediate)', async () => {
    const logger = new RecordingLogger();
    const transport = new ScriptedTransport();
    const client = new FlightlogClient(
      { apiKey: 'k', logger, flushOnExit: false, flushIntervalMs: 60_000 },
      { transport },
    );
    const trouble = await processTrouble(async () => {
      vi.spyOn(EventBuffer.prototype, 'drain').mockImplementationOnce(() => {
        throw new Error('bug in drain');
      });
      client.startSession({ inputSummary: 'x' }).end();
      await until(() => logger.lines.length > 0);
    });
    expect(trouble).toEqual([]);
    expect(logger.matching('internal error in the flush after a session ended')).toHaveLength(1);
    expect(logger.lines[0]?.context).toMatchObject({ error: 'bug in drain' });
    await client.close(); // still works: the buffered snapshot goes out
    expect(transport.requests).toHaveLength(1);
  });

  it('the flush the exporter asks for when it becomes idle (a promise continuation)', async () => {
    const logger = new RecordingLogger();
    const transport = new ScriptedTransport();
    const client = new FlightlogClient(
      { apiKey: 'k', logger, flushOnExit: false, flushIntervalMs: 60_000 },
      { transport },
    );
    const trouble = await processTrouble(async () => {
      const onIdle = vi
        .spyOn(ClientCore.prototype as unknown as { onIdle: () => void }, 'onIdle')
        .mockImplementationOnce(() => {
          throw new Error('bug in onIdle');
        });
      client.startSession({ inputSummary: 'x' }).toolCall({ name: 'a' });
      await client.flush();
      await until(() => onIdle.mock.calls.length > 0);
    });
    expect(trouble).toEqual([]);
    expect(logger.matching('internal error in the flush after a send')).toHaveLength(1);
    await client.close();
    expect(client.stats()).toMatchObject({ deliveredEvents: 1 });
  });

  it('the flush timer', async () => {
    const logger = new RecordingLogger();
    const transport = new ScriptedTransport();
    const client = new FlightlogClient(
      { apiKey: 'k', logger, flushOnExit: false, flushIntervalMs: 5 },
      { transport },
    );
    const trouble = await processTrouble(async () => {
      vi.spyOn(EventBuffer.prototype, 'drain').mockImplementationOnce(() => {
        throw new Error('bug in drain');
      });
      client.startSession({ inputSummary: 'x' }).toolCall({ name: 'a' });
      await until(() => transport.requests.length === 1);
    });
    expect(trouble).toEqual([]);
    expect(logger.matching('internal error in the flush timer')).toHaveLength(1);
    await client.close();
  });
});
