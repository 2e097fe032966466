import { describe, expect, it } from 'vitest';
import { FlightlogClient } from '../../src/index.js';
import { DEFAULTS, resolveSettings } from '../../src/settings.js';
import { RecordingLogger } from '@flightlog/test-support';
import { ScriptedTransport, until } from '../harness/scripted-transport.js';

const logger = new RecordingLogger();

function enabled(input: Record<string, unknown>) {
  const resolved = resolveSettings({ apiKey: 'flk_k', logger, ...input });
  if (resolved.kind !== 'enabled') throw new Error('expected an enabled client');
  return resolved;
}

describe('client settings: every setting of the spec with its default and its checks', () => {
  it('applies the spec defaults', () => {
    const { settings, warnings } = enabled({});
    expect(warnings).toEqual([]);
    expect(settings).toMatchObject({
      agentId: 'unknown',
      agentIdSet: false,
      verifyToken: undefined,
      ingestUrl: 'http://localhost:8080',
      environment: undefined,
      flushIntervalMs: 250,
      maxBufferBytes: 102_400,
      logger,
      requestTimeoutMs: DEFAULTS.requestTimeoutMs,
      flushTimeoutMs: DEFAULTS.flushTimeoutMs,
      maxBacklogBytes: 5 * 1024 * 1024,
      maxEventBytes: 1024 * 1024,
      retry: { initialDelayMs: 250, maxDelayMs: 30_000, maxAttempts: 10 },
      flushOnExit: true,
    });
  });

  it('disables the client, with one warning, for an empty or missing apiKey', () => {
    for (const apiKey of ['', '   ', undefined, 42]) {
      const resolved = resolveSettings({ apiKey, logger });
      expect(resolved.kind).toBe('disabled');
      expect(resolved.warnings).toHaveLength(1);
      expect(resolved.warnings[0]).toMatch(/apiKey is (empty|missing); the client is disabled/);
    }
  });

  it('enabled: false disables silently; a non-object settings value disables with a warning', () => {
    expect(resolveSettings({ apiKey: 'k', enabled: false })).toMatchObject({
      kind: 'disabled',
      warnings: [],
    });
    expect(resolveSettings(null)).toMatchObject({
      kind: 'disabled',
      warnings: ['settings must be an object; the client is disabled'],
    });
  });

  it('ignores verifyToken, with a warning, unless agentId is set', () => {
    expect(enabled({ verifyToken: 'flv_t' }).warnings).toEqual([
      'verifyToken is ignored because agentId is not set (the token needs it)',
    ]);
    expect(enabled({ verifyToken: 'flv_t' }).settings.verifyToken).toBeUndefined();
    expect(enabled({ verifyToken: 'flv_t', agentId: 'bot' }).settings).toMatchObject({
      verifyToken: 'flv_t',
      agentId: 'bot',
      agentIdSet: true,
    });
  });

  it('accepts devnet and mainnet as environment; anything else is reported and not sent', () => {
    expect(enabled({ environment: 'devnet' }).settings.environment).toBe('devnet');
    expect(enabled({ environment: 'mainnet' }).settings.environment).toBe('mainnet');
    const wrong = enabled({ environment: 'testnet' });
    expect(wrong.settings.environment).toBeUndefined();
    expect(wrong.warnings).toEqual([
      'environment must be "devnet" or "mainnet"; got "testnet", not sent',
    ]);
  });

  it('replaces invalid numbers by their defaults with a warning naming the setting', () => {
    const resolved = enabled({
      flushIntervalMs: -1,
      maxBufferBytes: 'big',
      requestTimeoutMs: Number.NaN,
      retry: { maxAttempts: 0 },
    });
    expect(resolved.settings).toMatchObject({
      flushIntervalMs: 250,
      maxBufferBytes: 102_400,
      requestTimeoutMs: 10_000,
      retry: { maxAttempts: 10 },
    });
    expect(resolved.warnings.map((w) => w.split(' ')[0]).sort()).toEqual([
      'flushIntervalMs',
      'maxBufferBytes',
      'requestTimeoutMs',
      'retry.maxAttempts',
    ]);
  });

  it('clamps delays past their maximum (Infinity included) instead of replacing them by the default', () => {
    const resolved = enabled({
      flushIntervalMs: 2 ** 31,
      flushTimeoutMs: Infinity,
      requestTimeoutMs: Number.MAX_SAFE_INTEGER,
      retry: { initialDelayMs: 1e12, maxDelayMs: 2 ** 40 },
    });
    expect(resolved.settings).toMatchObject({
      flushIntervalMs: 3_600_000,
      flushTimeoutMs: 3_600_000,
      requestTimeoutMs: 600_000,
      retry: { initialDelayMs: 600_000, maxDelayMs: 3_600_000 },
    });
    expect(resolved.warnings).toEqual([
      'flushIntervalMs must be at most 3600000; got 2147483648, using 3600000',
      'retry.initialDelayMs must be at most 600000; got 1000000000000, using 600000',
      'retry.maxDelayMs must be at most 3600000; got 1099511627776, using 3600000',
      'requestTimeoutMs must be at most 600000; got 9007199254740991, using 600000',
      'flushTimeoutMs must be at most 3600000; got Infinity, using 3600000',
    ]);
  });

  it('keeps a path prefix of ingestUrl; an unusable URL disables the client', () => {
    expect(enabled({ ingestUrl: 'https://ingest.example/flightlog/' }).settings.ingestUrl).toBe(
      'https://ingest.example/flightlog',
    );
    for (const ingestUrl of ['ftp://x', 'not a url', 'http://u:p@host', 5])
      expect(resolveSettings({ apiKey: 'k', ingestUrl }).kind).toBe('disabled');
  });

  it('reports a logger without warn, and unknown settings (typos)', () => {
    const resolved = resolveSettings({ apiKey: 'k', logger: {}, flushInterval: 100 });
    expect(resolved.warnings).toEqual([
      'logger must have a warn(message, context) method; using console.warn',
      'unknown setting "flushInterval" is ignored',
    ]);
  });

  it('sends agentId on every trace (default "unknown"), and the environment as the tag env:<environment>', async () => {
    const transport = new ScriptedTransport();
    const client = new FlightlogClient(
      { apiKey: 'k', environment: 'mainnet', logger: new RecordingLogger(), flushOnExit: false },
      { transport },
    );
    client.startSession({ inputSummary: 'a', tags: ['x'] }).end();
    client.startSession({ inputSummary: 'b', agentId: 'override' }).end();
    await client.close();
    await until(() => transport.requests.length > 0);
    const traces = transport.requests.flatMap((b) => b.items.map((i) => i.trace));
    expect(traces.map((t) => [t.agentId, t.tags])).toEqual([
      ['unknown', ['env:mainnet', 'x']],
      ['override', ['env:mainnet']],
    ]);
  });

  it('disables the client, with one warning naming the character, for an apiKey HTTP headers cannot carry', async () => {
    for (const [apiKey, character] of <[string, string][]>[
      ['flk_\u200babc', 'U+200B at position 5'],
      ['flk_abc\n', 'U+000A at position 8'],
      ['flk abc', 'U+0020 at position 4'],
      ['flk_ключ', 'U+043A at position 5'],
      ['flk_\u00a0abc', 'U+00A0 at position 5'],
    ]) {
      const logger = new RecordingLogger();
      const transport = new ScriptedTransport();
      const client = new FlightlogClient({ apiKey, logger, flushOnExit: false }, { transport });
      expect(client.enabled, apiKey).toBe(false);
      expect(logger.lines.map((l) => l.message)).toEqual([
        expect.stringContaining(`apiKey holds a character HTTP headers cannot carry (${character}`),
      ]);
      expect(logger.lines[0]?.message).toContain('the client is disabled');
      client.startSession({ inputSummary: 'x' }).end();
      await client.close();
      expect(transport.requests).toEqual([]);
    }
    expect(resolveSettings({ apiKey: 'flk_0123-abc._~+/=', logger }).kind).toBe('enabled');
  });

  it('sends each warning to the configured logger, and survives a logger that throws (enabled client)', async () => {
    const transport = new ScriptedTransport();
    transport.answer = () => ({ kind: 'failed', status: 400, detail: 'bad batch' });
    let calls = 0;
    const throwing = {
      warn: () => {
        calls += 1;
        throw new Error('logger down');
      },
    };
    const client = new FlightlogClient(
      { apiKey: 'k', logger: throwing, flushOnExit: false, environment: 'testnet' },
      { transport },
    );
    expect(client.enabled).toBe(true);
    const session = client.startSession({ inputSummary: 'x', traceId: 'not valid!' });
    expect(session.toolCall({ name: 't' })).not.toBe('');
    session.custom({ name: 'bad', data: 1n } as never); // refused: a warning
    expect(() => session.end()).not.toThrow();
    expect(await client.close()).toEqual({ timedOut: false });
    // every warning reached the logger (environment, traceId, the BigInt, the 400 drop)
    expect(calls).toBeGreaterThanOrEqual(4);
    expect(client.stats()).toMatchObject({ invalidEvents: 1, droppedEvents: 1, failedBatches: 1 });
    // a disabled client too
    const disabled = new FlightlogClient({ apiKey: '', logger: throwing });
    expect(disabled.enabled).toBe(false);
    expect(() => disabled.startSession({ inputSummary: 'x' }).end()).not.toThrow();
  });

  it('an async logger that rejects never becomes an unhandled rejection (enabled client, a 400 drop)', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const transport = new ScriptedTransport();
      transport.answer = () => ({ kind: 'failed', status: 400, detail: 'bad batch' });
      let calls = 0;
      const asyncLogger = {
        warn: async () => {
          calls += 1;
          throw new Error('async logger down');
        },
      };
      // a thenable that is not a promise, rejecting through its then
      const thenableLogger = {
        warn: () => ({
          then: (_ok: unknown, fail: (e: unknown) => void) => fail(new Error('thenable down')),
        }),
      };
      for (const logger of [asyncLogger, thenableLogger]) {
        const client = new FlightlogClient(
          { apiKey: 'k', logger: logger as never, flushOnExit: false, unknownSetting: 1 } as never,
          { transport },
        );
        const session = client.startSession({ inputSummary: 'x' });
        session.toolCall({ name: 'a' });
        session.end();
        await client.close();
        expect(client.stats()).toMatchObject({ droppedEvents: 1, failedBatches: 1 });
      }
      expect(calls).toBeGreaterThanOrEqual(2); // the unknown setting, the refused batch
      // let Node's unhandled-rejection tracking run (it reports after the microtask queue drains)
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
