import { randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { ulid } from 'ulidx';
import { createAgent, grantMember } from './agents/agent-admin.js';
import { mintDevToken } from './auth/dev-token.js';
import type { Config } from './config.js';
import { startServer } from './server.js';

/** A short sample run: a model call, a tool call and a devnet transfer. */
function sampleBatch(agentId: string) {
  const traceId = ulid();
  const start = Date.now() - 4_000;
  const at = (ms: number) => new Date(start + ms).toISOString();
  const event = (sequence: number, type: string, payload: object, from: number, to: number) => ({
    id: ulid(),
    traceId,
    sequence,
    type,
    startedAt: at(from),
    endedAt: at(to),
    durationMs: to - from,
    status: 'ok',
    payloadEncrypted: false,
    parentEventId: null,
    errorMessage: null,
    payload,
  });
  return {
    traceId,
    body: {
      batchId: ulid(),
      items: [
        {
          trace: {
            id: traceId,
            agentId,
            status: 'completed',
            startedAt: at(0),
            endedAt: at(3_000),
            durationMs: 3_000,
            inputSummary: 'Pay 0.01 SOL to the weather API and report the forecast',
            outputSummary: 'Paid and reported: sunny, 21 °C',
            errorMessage: null,
            tags: ['demo'],
            eventCount: 3,
            totalTokens: 180,
            totalCostUsd: '0.00042',
            totalLamports: '10000000',
            chainTxCount: 1,
            toolsCalled: ['get_forecast'],
          },
          events: [
            event(
              0,
              'llm_call',
              {
                provider: 'openai',
                model: 'gpt-4o-mini',
                input: { messages: [{ role: 'user', content: 'What is the weather in Lisbon?' }] },
                output: { content: 'I will call the forecast tool.', finishReason: 'tool_calls' },
                usage: { inputTokens: 120, outputTokens: 60, totalTokens: 180 },
                costUsd: 0.00042,
                streamed: false,
              },
              0,
              900,
            ),
            event(
              1,
              'chain_tx',
              { signature: null, lamports: '10000000', network: 'devnet' },
              1_000,
              1_800,
            ),
            event(
              2,
              'tool_call',
              { name: 'get_forecast', input: { city: 'Lisbon' }, output: 'sunny, 21 °C' },
              1_900,
              2_900,
            ),
          ],
        },
      ],
    },
  };
}

/** `flightlog demo`: a server with a demo agent, a demo user and one stored run. */
export async function runDemo(base: Config): Promise<void> {
  const config: Config = {
    ...base,
    jwtSecret: base.jwtSecret ?? randomBytes(32).toString('base64url'),
    adminToken: base.adminToken ?? randomBytes(24).toString('base64url'),
  };
  const server = await startServer(config, { logger: false });
  const created = await createAgent(server.store.agents, { name: 'demo agent' });
  if (created.kind !== 'created') throw new Error('could not create the demo agent');
  const { agentId, apiKey } = created.agent;
  await grantMember(server.store.agents, agentId, 'demo-user', 'owner');
  const token = await mintDevToken(config.jwtSecret as string, 'demo-user', 24 * 3600);
  const { traceId, body } = sampleBatch(agentId);
  const response = await fetch(`${server.url}/v1/traces/batch`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${apiKey}`,
      'content-type': 'application/json',
      'content-encoding': 'gzip',
    },
    body: gzipSync(JSON.stringify(body)),
  });
  process.stdout.write(
    [
      `Flightlog demo listening on ${server.url} (${server.store.engine})`,
      `  agent:      ${agentId}`,
      `  API key:    ${apiKey}`,
      `  user token: ${token}`,
      `  admin:      ${config.adminToken}`,
      `Sample run stored (${response.status}). Read it with:`,
      `  curl -s ${server.url}/v1/traces/${traceId} -H 'Authorization: Bearer ${token}'`,
      `  curl -s ${server.url}/v1/agents/${agentId}/traces -H 'Authorization: Bearer ${token}'`,
      'Press Ctrl-C to stop.',
      '',
    ].join('\n'),
  );
  const stop = () => {
    server.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
