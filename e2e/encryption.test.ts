import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { decryptPayload } from '@flightlog/protocol';
import { FlightlogClient } from '@flightlog/client';
import { RecordingLogger, llmPayload } from '@flightlog/test-support';
import { startRealServer, type RealServer } from './harness/real-server.js';

const SECRET = 'the user’s private prompt: seed phrase abandon abandon';

describe('payload encryption with SERVICE_MASTER_KEY, end to end', () => {
  let server: RealServer;
  beforeAll(async () => {
    server = await startRealServer();
  });
  afterAll(() => server.close());
  afterEach(() => vi.unstubAllEnvs());

  async function record(logger: RecordingLogger) {
    const agent = await server.createAgent();
    const client = new FlightlogClient({ apiKey: agent.apiKey, ingestUrl: server.url, logger });
    const session = client.startSession({ inputSummary: 'private run' });
    session.llmCall(llmPayload({ input: { messages: [{ role: 'user', content: SECRET }] } }));
    session.toolCall({ name: 'vault.read', output: SECRET });
    session.end();
    await client.close();
    const raw = await server.store.sql.query<{ payload: string; payload_encrypted: boolean }>(
      'SELECT payload::text AS payload, payload_encrypted FROM events WHERE trace_id = $1 ORDER BY sequence',
      [session.traceId],
    );
    const read = await server.readTrace(agent.agentId, session.traceId);
    return { raw, read: read.body };
  }

  it('stores only AES-256-GCM envelopes the server cannot read, which decryptPayload opens', async () => {
    const key = randomBytes(32).toString('base64');
    vi.stubEnv('SERVICE_MASTER_KEY', key);
    const logger = new RecordingLogger();
    const { raw, read } = await record(logger);

    expect(logger.lines).toEqual([]);
    expect(raw).toHaveLength(2);
    for (const row of raw) {
      expect(row.payload_encrypted).toBe(true);
      expect(row.payload).not.toContain('seed phrase');
      expect(row.payload).not.toContain('vault.read');
    }
    const [llm, tool] = read.events;
    expect(llm?.payload).toEqual({
      alg: 'AES-256-GCM',
      iv: expect.stringMatching(/^[A-Za-z0-9+/]{16}$/),
      tag: expect.stringMatching(/^[A-Za-z0-9+/]{22}==$/),
      ciphertext: expect.any(String),
    });
    expect(llm?.payload.iv).not.toBe(tool?.payload.iv);
    expect(decryptPayload(llm?.payload, key)).toEqual({
      kind: 'ok',
      payload: llmPayload({ input: { messages: [{ role: 'user', content: SECRET }] } }),
    });
    expect(decryptPayload(tool?.payload, key)).toEqual({
      kind: 'ok',
      payload: { name: 'vault.read', output: SECRET },
    });
    // the aggregates are still computed (client side, before encryption)
    expect(read.trace).toMatchObject({ totalTokens: 180, toolsCalled: ['vault.read'] });
  });

  it('with an unusable key, warns and sends every payload withheld, never in plaintext', async () => {
    vi.stubEnv('SERVICE_MASTER_KEY', 'not-32-bytes');
    const logger = new RecordingLogger();
    const { raw, read } = await record(logger);

    expect(logger.matching('SERVICE_MASTER_KEY is set but unusable')).toHaveLength(1);
    for (const row of raw) {
      expect(row.payload).not.toContain('seed phrase');
      expect(row.payload_encrypted).toBe(false);
    }
    expect(read.events.map((e) => e.payload)).toEqual([
      { withheld: true, reason: 'SERVICE_MASTER_KEY is not a valid key' },
      { withheld: true, reason: 'SERVICE_MASTER_KEY is not a valid key' },
    ]);
  });
});
