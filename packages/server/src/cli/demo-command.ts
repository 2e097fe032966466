import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { ulid } from 'ulidx';
import { signInLink } from '../auth/dashboard-link.js';
import { mintDevToken } from '../auth/dev-token.js';
import { changeConfig, type Config } from '../config.js';
import { startServer, type RunningServer } from '../server.js';

/** Options of `flightlog demo`. */
export interface DemoOptions {
  /** Exit after the runs (default: keep serving until Ctrl-C). */
  once: boolean;
  /** True when DATA_DIR was set explicitly (otherwise a temporary directory is used). */
  dataDirGiven: boolean;
  /**
   * The example agent to run (`--agent-script FILE`, absolute), which reports each of its runs
   * as a JSON line on stdout; without one the demo stores a sample run itself. The repository's
   * `npm run demo` passes examples/swap-agent.mjs: this package does not reach outside itself.
   */
  agentScript: string | undefined;
}

/** One run the example agent reported on its stdout. */
interface AgentRun {
  scenario: string;
  traceId: string;
  status: string;
  encrypted: boolean;
}

const VIEWER = 'demo-viewer';

const say = (line: string) => process.stdout.write(`${line}\n`);

/** A short sample run, stored directly when no example agent is given. */
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

/** Runs the example agent as a child process and collects the runs it reports. */
function runExampleAgent(
  script: string,
  scenarios: string[],
  env: Record<string, string>,
  timeoutMs = 90_000,
): Promise<AgentRun[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...scenarios], {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const runs: AgentRun[] = [];
    let pending = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      pending += chunk.toString();
      let newline: number;
      while ((newline = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, newline);
        pending = pending.slice(newline + 1);
        try {
          const parsed = JSON.parse(line) as Partial<AgentRun>;
          if (typeof parsed.traceId === 'string') {
            runs.push(parsed as AgentRun);
            say(
              `agent  ${parsed.encrypted ? 'encrypted ' : ''}${parsed.scenario} run ${parsed.status}: trace ${parsed.traceId}`,
            );
          }
        } catch {
          // not one of the agent's report lines
        }
      }
    });
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the example agent did not finish within ${timeoutMs} ms`));
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      for (const line of stderr.split('\n').filter(Boolean)) say(`agent  ${line}`);
      if (code === 0) resolve(runs);
      else reject(new Error(`the example agent exited with ${code}`));
    });
  });
}

interface LiveItem {
  trace: {
    id: string;
    status: string;
    inputSummary: string;
    eventCount: number;
    totalTokens: number;
    totalCostUsd: string;
    totalLamports: string;
    errorMessage?: string | null;
  };
  events: { type: string; payloadEncrypted: boolean }[];
}

/** One readable line per live `trace` message. */
function liveLine(item: LiveItem): string {
  const t = item.trace;
  const types = [...new Set(item.events.map((e) => e.type))].join(',') || 'snapshot';
  const locked = item.events.some((e) => e.payloadEncrypted) ? ' (payloads encrypted)' : '';
  const error = t.errorMessage ? `  error: ${t.errorMessage}` : '';
  return (
    `live   ${t.id.slice(-8)} ${t.status.padEnd(9)} "${t.inputSummary}" +${item.events.length} ${types}` +
    ` | events=${t.eventCount} tokens=${t.totalTokens} cost=$${t.totalCostUsd} lamports=${t.totalLamports}${locked}${error}`
  );
}

/** Tails GET /v1/agents/:id/live, printing each message; resolves the returned stop(). */
function tailLive(url: string, token: string, seen: Map<string, string>): () => void {
  const abort = new AbortController();
  void (async () => {
    try {
      const response = await fetch(url, {
        headers: { accept: 'text/event-stream', authorization: `Bearer ${token}` },
        signal: abort.signal,
      });
      if (!response.ok || !response.body) {
        say(`live   stream refused: ${response.status}`);
        return;
      }
      const decoder = new TextDecoder();
      let buffer = '';
      for await (const chunk of response.body) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const message = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const lines = message.split('\n');
          const name = lines
            .find((l) => l.startsWith('event:'))
            ?.slice(6)
            .trim();
          const data = lines
            .filter((l) => l.startsWith('data:'))
            .map((l) => l.slice(5).trim())
            .join('\n');
          if (name === 'trace') {
            const item = JSON.parse(data) as LiveItem;
            seen.set(item.trace.id, item.trace.status);
            say(liveLine(item));
          } else if (name === 'warning') say(`live   warning: ${data}`);
        }
      }
    } catch (error) {
      if (!abort.signal.aborted)
        say(`live   stream ended: ${error instanceof Error ? error.message : String(error)}`);
    }
  })();
  return () => abort.abort();
}

async function until(done: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!done() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  return done();
}

/**
 * `flightlog demo`: starts the service on the embedded engine (PGlite in a temporary DATA_DIR
 * unless one is given; admin token and JWT secret generated), creates an agent and a viewer
 * member through the admin API, tails the agent's live stream, runs the given example agent (a
 * child process; the repository's examples/swap-agent.mjs) through a successful swap, a failing
 * chain transaction, a tool loop and an encrypted run, or stores a sample run without one, then
 * prints where to read each trace and its autopsy. Keeps serving until Ctrl-C, or exits with
 * `--once`.
 */
export async function runDemo(base: Config, options: DemoOptions): Promise<void> {
  const tempDir =
    base.store.databaseUrl || options.dataDirGiven
      ? undefined
      : mkdtempSync(join(tmpdir(), 'flightlog-demo-'));
  const config = changeConfig(base, {
    ...(tempDir ? { store: { dataDir: tempDir } } : {}),
    auth: {
      jwtSecret: base.auth.jwtSecret ?? randomBytes(32).toString('base64url'),
      adminToken: base.auth.adminToken ?? randomBytes(24).toString('base64url'),
    },
  });
  let server: RunningServer | undefined;
  let stopLive = () => {};
  let cleaned = false;
  const cleanup = async () => {
    if (cleaned) return;
    cleaned = true;
    stopLive();
    await server?.close();
    if (tempDir) rmSync(tempDir, { recursive: true, force: true });
  };
  try {
    server = await startServer(config, { logger: false });
    const url = server.url;
    say(
      `Flightlog demo on ${url} (${server.store.engine}${tempDir ? `, data in ${tempDir}` : ''})`,
    );

    const admin = async (method: string, path: string, body?: unknown) => {
      const response = await fetch(url + path, {
        method,
        headers: {
          authorization: `Bearer ${config.auth.adminToken}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      if (!response.ok) throw new Error(`admin ${method} ${path} answered ${response.status}`);
      return (await response.json()) as Record<string, unknown>;
    };
    const agent = (await admin('POST', '/admin/v1/agents', { name: 'demo swap agent' })) as {
      agentId: string;
      apiKey: string;
      verifyToken: string;
    };
    await admin('PUT', `/admin/v1/agents/${agent.agentId}/members/${VIEWER}`, { role: 'viewer' });
    const token = await mintDevToken(config.auth.jwtSecret as string, VIEWER, 24 * 3600);
    say(`  agent:        ${agent.agentId}`);
    say(`  API key:      ${agent.apiKey}`);
    say(`  viewer token: ${token}  (user "${VIEWER}", role viewer)`);
    say(`  admin token:  ${config.auth.adminToken}`);

    const seen = new Map<string, string>();
    stopLive = tailLive(`${url}/v1/agents/${agent.agentId}/live`, token, seen);

    let runs: AgentRun[];
    const masterKey = randomBytes(32).toString('base64');
    const script = options.agentScript;
    if (script !== undefined) {
      const env = {
        FLIGHTLOG_INGEST_URL: url,
        FLIGHTLOG_API_KEY: agent.apiKey,
        FLIGHTLOG_AGENT_ID: agent.agentId,
        FLIGHTLOG_ENVIRONMENT: 'devnet',
      };
      say(`Running the example agent (${script}):`);
      runs = await runExampleAgent(script, ['swap', 'failed-tx', 'tool-loop'], {
        ...env,
        FLIGHTLOG_VERIFY_TOKEN: agent.verifyToken,
      });
      runs.push(
        ...(await runExampleAgent(script, ['swap'], { ...env, SERVICE_MASTER_KEY: masterKey })),
      );
    } else {
      say('No example agent given (--agent-script FILE); storing one sample run instead.');
      const { traceId, body } = sampleBatch(agent.agentId);
      const response = await fetch(`${url}/v1/traces/batch`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${agent.apiKey}`,
          'content-type': 'application/json',
          'content-encoding': 'gzip',
        },
        body: gzipSync(JSON.stringify(body)),
      });
      runs = [
        { scenario: 'sample', traceId, status: `stored (${response.status})`, encrypted: false },
      ];
    }

    // the live stream shows a batch within about a second of its storage
    await until(
      () =>
        runs.every(
          (r) =>
            seen.get(r.traceId) === r.status || (r.scenario === 'sample' && seen.has(r.traceId)),
        ),
      3_000,
    );
    const verified = (await admin('GET', `/admin/v1/agents/${agent.agentId}`)).verifiedAt;
    say(`Agent verified by its first batch: ${verified ? `yes, at ${String(verified)}` : 'no'}`);
    say('');
    say('Read each run (trace + events) and its autopsy:');
    for (const run of runs) {
      say(`  ${run.encrypted ? 'encrypted ' : ''}${run.scenario} (${run.status}):`);
      say(`    curl -s ${url}/v1/traces/${run.traceId} -H 'Authorization: Bearer ${token}'`);
      say(
        `    curl -s ${url}/v1/traces/${run.traceId}/analysis -H 'Authorization: Bearer ${token}'`,
      );
    }
    say(
      '  (each autopsy is written by the analysis worker inside this server, about ANALYSIS_GRACE_MS after its run ended)',
    );
    if (runs.some((r) => r.encrypted))
      say(
        `  The encrypted run's payloads open with SERVICE_MASTER_KEY=${masterKey} (decryptPayload of @flightlog/protocol).`,
      );
    say(
      `  All runs: curl -s ${url}/v1/agents/${agent.agentId}/traces -H 'Authorization: Bearer ${token}'`,
    );

    // PUBLIC_URL when the demo is reached through a proxy; else the address it listens on
    say(
      `Open the dashboard, signed in as "${VIEWER}": ${signInLink(config.http.publicUrl ?? url, token)}`,
    );

    if (options.once) {
      await cleanup();
      say('Done (--once).');
      return;
    }
    say(`Serving on ${url} with the live tail on; press Ctrl-C to stop.`);
    const stop = () => {
      cleanup().then(
        () => process.exit(0),
        () => process.exit(1),
      );
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  } catch (error) {
    await cleanup();
    throw error;
  }
}
