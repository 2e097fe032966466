import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CLIENT_DIST, runNode } from '../harness/child-node.js';

/** The client's registry of open clients (internal), from the same build as CLIENT_DIST. */
const REGISTRY_DIST = fileURLToPath(new URL('../../dist/client-registry.js', import.meta.url));

describe('clients a program forgets (a child process with --expose-gc)', () => {
  it('lets unreferenced idle clients be collected, keeps one alive until its buffer is delivered, and warns past 100 open clients', async () => {
    const source = `
      import { FlightlogClient } from ${JSON.stringify(CLIENT_DIST)};
      import { liveClientCount } from ${JSON.stringify(REGISTRY_DIST)};
      const sent = [];
      const transport = {
        async sendBatch(body) { sent.push(body.length); return { kind: 'ok', status: 202, replayed: false, verify: null }; },
        async complete() { return { kind: 'ok', status: 200, replayed: false, verify: null }; },
      };
      const warnings = [];
      let phase = 'per-request';
      const logger = { warn(message) { warnings.push({ phase, message }); } };
      const turn = () => new Promise((resolve) => setTimeout(resolve, 20));
      const collect = async () => { await turn(); globalThis.gc(); await turn(); };

      // A client per request, never closed (the leak): each must become collectable once idle.
      async function handle(i) {
        const client = new FlightlogClient({ apiKey: 'k', logger, flushOnExit: false }, { transport });
        const session = client.startSession({ inputSummary: 'request ' + i });
        session.toolCall({ name: 'step' });
        session.end();
        await client.flush();
      }
      for (let i = 0; i < 300; i++) {
        await handle(i);
        if (i % 50 === 49) await collect();
      }
      await collect();
      const afterRequests = liveClientCount();

      // An unreferenced client with events still buffered is kept until its timer flushed them.
      (() => {
        const client = new FlightlogClient({ apiKey: 'k', logger, flushIntervalMs: 50 }, { transport });
        client.startSession({ inputSummary: 'dropped with data' }).toolCall({ name: 'late' });
      })();
      const sentBefore = sent.length;
      await collect();
      await new Promise((resolve) => setTimeout(resolve, 200));
      const deliveredByDroppedClient = sent.length - sentBefore;
      await collect();
      const afterDropped = liveClientCount();

      phase = 'kept';
      const kept = [];
      for (let i = 0; i < 150; i++) kept.push(new FlightlogClient({ apiKey: 'k', logger }, { transport }));
      const whileKept = liveClientCount();
      await Promise.all(kept.map((client) => client.close()));
      console.log(JSON.stringify({ afterRequests, deliveredByDroppedClient, afterDropped, whileKept, closed: liveClientCount(), warnings }));
    `;
    const result = await runNode(source, {}, 30_000, ['--expose-gc']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const report = JSON.parse(result.stdout) as {
      afterRequests: number;
      deliveredByDroppedClient: number;
      afterDropped: number;
      whileKept: number;
      closed: number;
      warnings: { phase: string; message: string }[];
    };
    expect(report.afterRequests).toBe(0);
    expect(report.deliveredByDroppedClient).toBe(1);
    expect(report.afterDropped).toBe(0);
    expect(report.whileKept).toBe(150);
    expect(report.closed).toBe(0);
    expect(report.warnings).toEqual([
      {
        phase: 'kept',
        message: expect.stringMatching(
          /^101 Flightlog clients are open at once \(more than 100\): create one client per process and share it/,
        ),
      },
    ]);
  });
});
