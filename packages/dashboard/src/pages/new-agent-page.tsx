import type { Trace } from '@flightlog/protocol';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, listTraces } from '../api.js';
import { Link } from '../components/link.js';
import { SecretValue } from '../components/secret-value.js';
import { StatusBadge } from '../components/status-badge.js';
import { openLiveStream } from '../live-stream.js';
import { createAgent, readAgent, readMe, type CreatedAgent } from '../owner-api.js';
import { agentPath, agentSettingsPath, runPath } from '../router.js';
import { useAsync } from '../use-async.js';

/** How often the page asks whether the agent is verified, besides watching its live stream. */
const POLL_MS = 1_000;

/** The client library's settings for a new agent, ready to paste (every value as text). */
export function clientSnippet(agent: CreatedAgent, ingestUrl: string): string {
  return [
    "import { FlightlogClient } from '@flightlog/client';",
    '',
    'const client = new FlightlogClient({',
    `  apiKey: ${JSON.stringify(agent.apiKey)},`,
    `  agentId: ${JSON.stringify(agent.agentId)},`,
    `  verifyToken: ${JSON.stringify(agent.verifyToken)},`,
    `  ingestUrl: ${JSON.stringify(ingestUrl)},`,
    '});',
  ].join('\n');
}

/** The same, as the variables `examples/swap-agent.mjs` reads. */
export function exampleCommand(agent: CreatedAgent, ingestUrl: string): string {
  return [
    `FLIGHTLOG_API_KEY=${agent.apiKey} \\`,
    `FLIGHTLOG_AGENT_ID=${agent.agentId} \\`,
    `FLIGHTLOG_VERIFY_TOKEN=${agent.verifyToken} \\`,
    `FLIGHTLOG_INGEST_URL=${ingestUrl} \\`,
    'node examples/swap-agent.mjs',
  ].join('\n');
}

/**
 * The two OpenTelemetry variables for an agent already instrumented with OpenTelemetry (any
 * OTLP/HTTP exporter): the endpoint, and the key (plus the verify token, which verifies the
 * agent on its first export) as headers.
 */
export function otlpVariables(agent: CreatedAgent, ingestUrl: string): string {
  return [
    `OTEL_EXPORTER_OTLP_ENDPOINT=${ingestUrl}/v1/otlp`,
    `OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer ${agent.apiKey},Flightlog-Verify-Token=${agent.verifyToken}"`,
  ].join('\n');
}

/** "New agent": a name, then the key and verify token shown once, then the first flush, live. */
export function NewAgentPage() {
  const [name, setName] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [created, setCreated] = useState<CreatedAgent | null>(null);
  const me = useAsync((signal) => readMe(signal), []);

  if (created) return <Onboarding agent={created} name={name.trim()} />;
  // the server decides (POST /v1/agents answers 403 all the same); this only says so up front
  if (me.state === 'done' && !me.value.canCreateAgents)
    return (
      <main>
        <nav class="crumbs">
          <Link href="/">Agents</Link> <span aria-hidden="true">/</span> <span>New agent</span>
        </nav>
        <h1>New agent</h1>
        <p class="error-text" role="alert">
          You may not create agents on this server. The operator lists who may in AGENT_CREATORS;
          ask them to add your user id, {me.value.userId}, or to create the agent and make you its
          owner.
        </p>
      </main>
    );
  return (
    <main>
      <nav class="crumbs">
        <Link href="/">Agents</Link> <span aria-hidden="true">/</span> <span>New agent</span>
      </nav>
      <h1>New agent</h1>
      <p>
        Name the agent. Flightlog then shows its API key and verify token once, and waits for its
        first batch.
      </p>
      <form
        class="new-agent-form"
        onSubmit={(event) => {
          event.preventDefault();
          setBusy(true);
          setError(null);
          createAgent(name.trim()).then(setCreated, (e: unknown) => {
            setBusy(false);
            setError(e instanceof ApiError || e instanceof Error ? e.message : String(e));
          });
        }}
      >
        <label>
          Name
          <input
            type="text"
            name="name"
            maxLength={256}
            placeholder="swap bot"
            value={name}
            onInput={(event) => setName(event.currentTarget.value)}
          />
        </label>
        <button type="submit" class="button primary" disabled={busy}>
          {busy ? 'Creating…' : 'Create agent'}
        </button>
      </form>
      {error && (
        <p class="error-text" role="alert">
          {error}
        </p>
      )}
    </main>
  );
}

type Verification =
  | { state: 'waiting' }
  | { state: 'verified'; at: string; run: Trace | null }
  | { state: 'no-access' };

function Onboarding(props: { agent: CreatedAgent; name: string }) {
  const { agent } = props;
  const ingestUrl = location.origin;
  const [verification, setVerification] = useState<Verification>({ state: 'waiting' });
  const [liveRun, setLiveRun] = useState<Trace | null>(null);
  const outcome = useRef<HTMLElement>(null);
  // the moment it is verified, show it (the snippet above may have scrolled it out of view)
  useEffect(() => {
    if (verification.state !== 'waiting') outcome.current?.scrollIntoView({ block: 'nearest' });
  }, [verification.state]);

  // The verified mark is set with the batch that carries the token: the live stream tells the
  // moment a batch is accepted, the poll is there should the stream be cut.
  useEffect(() => {
    const abort = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    let checking = false;
    const check = async () => {
      if (checking || abort.signal.aborted) return;
      checking = true;
      clearTimeout(timer);
      try {
        const current = await readAgent(agent.agentId, abort.signal);
        if (current.verifiedAt) {
          const { traces } = await listTraces(agent.agentId, { limit: 1 }, abort.signal);
          setVerification({ state: 'verified', at: current.verifiedAt, run: traces[0] ?? null });
          return;
        }
      } catch (e) {
        if (abort.signal.aborted) return;
        if (e instanceof ApiError && (e.status === 403 || e.status === 404)) {
          setVerification({ state: 'no-access' });
          return;
        }
      } finally {
        checking = false;
      }
      if (!abort.signal.aborted) timer = setTimeout(() => void check(), POLL_MS);
    };
    const close = openLiveStream(agent.agentId, {
      onItem(item) {
        setLiveRun((run) => run ?? item.trace);
        void check();
      },
      onState() {},
    });
    void check();
    return () => {
      abort.abort();
      clearTimeout(timer);
      close();
    };
  }, [agent.agentId]);

  const run = verification.state === 'verified' ? (verification.run ?? liveRun) : liveRun;
  return (
    <main class="onboarding">
      <nav class="crumbs">
        <Link href="/">Agents</Link> <span aria-hidden="true">/</span> <span>New agent</span>
      </nav>
      <h1>{props.name || 'New agent'} is created</h1>
      <div class="banner warning" role="note">
        Copy the API key and the verify token now: they are shown only this once (Flightlog keeps
        only their hashes). You can issue another key later in the agent's settings.
      </div>
      <SecretValue label="Agent id" value={agent.agentId} />
      <SecretValue label="API key" value={agent.apiKey} />
      <SecretValue label="Verify token" value={agent.verifyToken} />
      <h2>Send its first run</h2>
      <p>In your agent, with the client library:</p>
      <SecretValue label="Client snippet" value={clientSnippet(agent, ingestUrl)} multiline />
      <p>Or run the example agent from the Flightlog repository:</p>
      <SecretValue label="Example command" value={exampleCommand(agent, ingestUrl)} multiline />
      <p>Or, for an agent instrumented with OpenTelemetry, set these for its OTLP exporter:</p>
      <SecretValue
        label="OpenTelemetry variables"
        value={otlpVariables(agent, ingestUrl)}
        multiline
      />
      <section
        ref={outcome}
        class="verification"
        aria-live="polite"
        data-state={verification.state}
      >
        {verification.state === 'waiting' && (
          <p class="waiting">
            <span class="spinner" aria-hidden="true" /> Waiting for the first flush… the agent is
            verified the moment a batch or an OTLP export with its verify token is accepted.
          </p>
        )}
        {verification.state === 'no-access' && (
          <p class="error-text">You no longer have access to this agent.</p>
        )}
        {verification.state === 'verified' && (
          <p class="verified">
            <strong>Verified ✓</strong> the key works and the agent is live.
          </p>
        )}
        {run && verification.state === 'verified' && (
          <p class="first-run">
            First run: <StatusBadge status={run.status} />{' '}
            <Link href={runPath(run.id)}>{run.inputSummary ?? run.id}</Link>
          </p>
        )}
        {verification.state === 'verified' && (
          <p>
            <Link href={agentPath(agent.agentId)}>All runs of this agent</Link> ·{' '}
            <Link href={agentSettingsPath(agent.agentId)}>Keys and members</Link>
          </p>
        )}
      </section>
    </main>
  );
}
