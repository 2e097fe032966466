import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENT_DIST, runNode } from '../harness/child-node.js';
import { SilentServer } from '../harness/loopback-server.js';

/**
 * A host program that records a run and then has nothing left to do, never calling close(),
 * against a service that accepts the connection and never answers. It reports, from its own
 * `exit` event, how long the process lived after its own work was done (the client's hold), when
 * each warning came, and the client's counters.
 */
const host = (settings: object, awaitFlush: boolean) => `
  import { FlightlogClient } from ${JSON.stringify(CLIENT_DIST)};
  const warnings = [];
  const client = new FlightlogClient({
    apiKey: 'flk_exit',
    ingestUrl: process.env.URL,
    logger: { warn(message) { warnings.push({ at: performance.now(), message }); } },
    ...${JSON.stringify(settings)},
  });
  const session = client.startSession({ inputSummary: 'exit bound' });
  for (let i = 0; i < 10; i++) session.toolCall({ name: 'step' });
  session.end();
  // Awaited, flush() keeps the process up to its deadline; then a request is left in flight.
  const flushed = ${awaitFlush ? 'await client.flush({ timeoutMs: 200 })' : 'null'};
  const workDone = performance.now();
  process.on('exit', () => {
    const at = performance.now();
    process.stdout.write(JSON.stringify({
      heldMs: Math.round(at - workDone),
      flushed,
      warnings: warnings.map((w) => ({ msBeforeExit: Math.round(at - w.at), message: w.message })),
      stats: client.stats(),
    }));
  });
`;

interface Report {
  heldMs: number;
  flushed: { timedOut: boolean } | null;
  warnings: { msBeforeExit: number; message: string }[];
  stats: { droppedEvents: number; deliveredEvents: number };
}

/** Tolerance over a bound: a loaded 2-core machine runs timers late, never early. */
const LATE = 1_000;

describe('exit against a service that accepts and never answers: the documented bound holds', () => {
  let silent: SilentServer;
  beforeAll(async () => {
    silent = await new SilentServer().start();
  });
  afterAll(() => silent.close());

  const run = async (settings: object, awaitFlush: boolean) => {
    const result = await runNode(host(settings, awaitFlush), { URL: silent.url }, 40_000);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    return { ...(JSON.parse(result.stdout) as Report), wallMs: result.ms };
  };

  it('holds at most flushTimeoutMs (10 s by default, 1 s when set), warns when the hold ends, and aborts the request; flushOnExit: false holds nothing', async () => {
    const [byDefault, byDefaultInFlight, oneSecond, notHeld] = await Promise.all([
      run({}, false),
      run({}, true),
      run({ flushTimeoutMs: 1_000 }, true),
      run({ flushOnExit: false }, true),
    ]);
    const lost = 'the process is exiting with 10 events not delivered';
    for (const [report, bound] of [
      [byDefault, 10_000],
      [byDefaultInFlight, 10_000],
      [oneSecond, 1_000],
    ] as const) {
      // Held for the bound (the service might still answer), and not longer.
      expect(report.heldMs).toBeGreaterThanOrEqual(bound - 100);
      expect(report.heldMs).toBeLessThanOrEqual(bound + LATE);
      // node's start-up included, four children at once on a loaded machine: generous, yet a
      // second hold (20 s before the fix) would still fail it
      expect(report.wallMs).toBeLessThan(bound + 8_000);
      // The warning comes when the hold ends, i.e. when the process exits.
      const warning = report.warnings.find((w) => w.message.includes(lost));
      expect(warning, JSON.stringify(report.warnings)).toBeDefined();
      expect(warning?.msBeforeExit).toBeLessThan(250);
      // The request in flight was aborted then: its events were given up and counted.
      expect(report.stats).toMatchObject({ droppedEvents: 10, deliveredEvents: 0 });
    }
    for (const report of [byDefaultInFlight, oneSecond, notHeld])
      expect(report.flushed).toEqual({ timedOut: true });
    // Nothing holds the process, not even the request in flight.
    expect(notHeld.heldMs).toBeLessThan(LATE);
    expect(notHeld.warnings).toEqual([]);
    expect(silent.connections).toBeGreaterThanOrEqual(4);
  }, 60_000);
});
