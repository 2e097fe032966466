import { gunzipSync } from 'node:zlib';
import {
  FlightlogClient,
  HttpTransport,
  type ClientStats,
  type Transport,
  type TransportOutcome,
} from '@flightlog/client';
import { expect } from 'vitest';
import type { Store } from '../../src/store/open-store.js';
import { sleep } from './wait.js';

/** An agent the load writes for: its id and API key. */
export interface LoadAgent {
  agentId: string;
  apiKey: string;
}

/** A batch the service acknowledged (202), as the client sent it. */
export interface AckedBatch {
  agentId: string;
  batchId: string;
  traceIds: string[];
  eventIds: string[];
}

/** What one sender recorded for one run (session), to compare with the store afterwards. */
export interface RecordedRun {
  agentId: string;
  traceId: string;
  eventIds: string[];
  ended: boolean;
}

export interface AgentLoadOptions {
  ingestUrl: string;
  agents: LoadAgent[];
  /** Client flush interval (default 20 ms: many small batches, as busy agents send). */
  flushIntervalMs?: number;
  /** Events per run (default 8). */
  eventsPerRun?: number;
  /** Pause between two events of a run, in ms (default 3). */
  eventGapMs?: number;
  /** Client request deadline (default 5 s). */
  requestTimeoutMs?: number;
}

interface BatchBody {
  batchId: string;
  items: { trace: { id: string }; events: { id: string }[] }[];
}

/** Passes every request to the real HTTP transport and reports each batch's outcome. */
class ObservedTransport implements Transport {
  constructor(
    private readonly inner: Transport,
    private readonly observe: (body: Buffer, outcome: TransportOutcome) => void,
  ) {}

  async sendBatch(body: Buffer, signal: AbortSignal): Promise<TransportOutcome> {
    const outcome = await this.inner.sendBatch(body, signal);
    this.observe(body, outcome);
    return outcome;
  }

  complete(traceId: string, body: object, signal: AbortSignal): Promise<TransportOutcome> {
    return this.inner.complete(traceId, body, signal);
  }

  close(): void {
    this.inner.close?.();
  }
}

/**
 * Several agents, each with its own real `FlightlogClient`, recording runs in a loop (tool calls,
 * then `end`) until stopped. Records what each sender recorded and every batch the service
 * acknowledged, so a test can check the store against both.
 */
export class AgentLoad {
  readonly acked = new Map<string, AckedBatch>();
  readonly runs = new Map<string, RecordedRun>();
  /** Outcomes other than 202, by kind and status or reason (`retryable HTTP 503`, `retryable ECONNREFUSED`). */
  readonly refusals = new Map<string, number>();
  private readonly clients: FlightlogClient[] = [];
  private readonly loops: Promise<void>[] = [];
  private stopped = false;

  constructor(private readonly options: AgentLoadOptions) {}

  /** The agents the load writes for. */
  get agentIds(): string[] {
    return this.options.agents.map((agent) => agent.agentId);
  }

  /** Batches acknowledged so far. */
  get ackedCount(): number {
    return this.acked.size;
  }

  start(): void {
    for (const agent of this.options.agents) {
      const transport = new ObservedTransport(
        new HttpTransport({
          ingestUrl: this.options.ingestUrl,
          apiKey: agent.apiKey,
          timeoutMs: this.options.requestTimeoutMs ?? 5_000,
          userAgent: 'flightlog-reliability-test',
        }),
        (body, outcome) => this.observe(agent.agentId, body, outcome),
      );
      const client = new FlightlogClient(
        {
          apiKey: agent.apiKey,
          agentId: agent.agentId,
          ingestUrl: this.options.ingestUrl,
          flushIntervalMs: this.options.flushIntervalMs ?? 20,
          // a restart or an outage lasts seconds: retries must outlast it, quickly
          retry: { initialDelayMs: 100, maxDelayMs: 1_000, maxAttempts: 1_000 },
          flushOnExit: false,
          logger: { warn: () => {} },
        },
        { transport },
      );
      this.clients.push(client);
      this.loops.push(this.runLoop(client, agent.agentId));
    }
  }

  /** Resolves once `count` batches in all were acknowledged (or fails after `timeoutMs`). */
  async waitForAcked(count: number, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.acked.size < count) {
      if (Date.now() > deadline)
        throw new Error(`only ${this.acked.size} of ${count} batches acknowledged in time`);
      await sleep(20);
    }
  }

  /**
   * Stops recording, ends the runs in progress, and closes every client (which delivers what is
   * left, retrying). Returns each client's final stats.
   */
  async stop(closeTimeoutMs = 60_000): Promise<ClientStats[]> {
    this.stopped = true;
    await Promise.all(this.loops);
    await Promise.all(this.clients.map((client) => client.close({ timeoutMs: closeTimeoutMs })));
    return this.clients.map((client) => client.stats());
  }

  private async runLoop(client: FlightlogClient, agentId: string): Promise<void> {
    const eventsPerRun = this.options.eventsPerRun ?? 8;
    const gapMs = this.options.eventGapMs ?? 3;
    for (let n = 0; !this.stopped; n++) {
      const session = client.startSession({ inputSummary: `reliability run ${n}` });
      const run: RecordedRun = { agentId, traceId: session.traceId, eventIds: [], ended: false };
      this.runs.set(run.traceId, run);
      for (let i = 0; i < eventsPerRun && !this.stopped; i++) {
        run.eventIds.push(
          session.toolCall({ name: `tool-${i % 3}`, input: { n, i }, output: 'x'.repeat(64) }),
        );
        await sleep(gapMs);
      }
      session.end({ outputSummary: `done ${n}` });
      run.ended = true;
    }
  }

  private observe(agentId: string, body: Buffer, outcome: TransportOutcome): void {
    if (outcome.kind !== 'ok') {
      const key =
        outcome.kind === 'failed'
          ? `failed ${outcome.status}`
          : `retryable ${outcome.reason.replace(/:.*$/s, '')}`;
      this.refusals.set(key, (this.refusals.get(key) ?? 0) + 1);
      return;
    }
    const batch = JSON.parse(gunzipSync(body).toString('utf8')) as BatchBody;
    this.acked.set(batch.batchId, {
      agentId,
      batchId: batch.batchId,
      traceIds: batch.items.map((item) => item.trace.id),
      eventIds: batch.items.flatMap((item) => item.events.map((event) => event.id)),
    });
  }
}

/**
 * Checks the store against what the senders recorded and what the service acknowledged: every
 * acknowledged batch is recorded as accepted and its events are stored; every run is stored
 * with its status, event count and exactly its events, each once; nothing else is stored.
 */
export async function expectStoredExactlyOnce(store: Store, load: AgentLoad): Promise<void> {
  // only the load's agents: a test may send other traffic alongside
  const ours = new Set(load.agentIds);
  const accepted = await store.sql.query<{ batch_id: string; agent_id: string }>(
    'SELECT batch_id, agent_id FROM accepted_batches',
  );
  const acceptedIds = new Set(
    accepted.filter((row) => ours.has(row.agent_id)).map((row) => row.batch_id),
  );
  const allEvents = await store.sql.query<{ id: string; trace_id: string; agent_id: string }>(
    'SELECT id, trace_id, agent_id FROM events',
  );
  const events = { rows: allEvents.filter((row) => ours.has(row.agent_id)) };
  const eventTrace = new Map(events.rows.map((row) => [row.id, row.trace_id]));
  const eventsPerTrace = new Map<string, number>();
  for (const row of events.rows)
    eventsPerTrace.set(row.trace_id, (eventsPerTrace.get(row.trace_id) ?? 0) + 1);
  const traces = await store.sql.query<{
    id: string;
    agent_id: string;
    status: string;
    event_count: string | number;
  }>('SELECT id, agent_id, status, event_count FROM traces');
  const traceById = new Map(
    traces.filter((row) => ours.has(row.agent_id)).map((row) => [row.id, row]),
  );

  // what got a 202 is there
  const ackedMissing = [...load.acked.values()].filter((batch) => !acceptedIds.has(batch.batchId));
  expect(ackedMissing.map((batch) => batch.batchId)).toEqual([]);
  const ackedEventsMissing = [...load.acked.values()].flatMap((batch) =>
    batch.eventIds.filter((id) => !eventTrace.has(id)),
  );
  expect(ackedEventsMissing).toEqual([]);
  // and nothing was accepted that no sender ended up seeing acknowledged
  expect(acceptedIds.size).toBe(load.acked.size);

  // every run, complete, with exactly its events
  const runs = [...load.runs.values()];
  const wrongRuns = runs.flatMap((run) => {
    const trace = traceById.get(run.traceId);
    const stored = eventsPerTrace.get(run.traceId) ?? 0;
    const problems: string[] = [];
    if (!trace) return [`${run.traceId}: trace missing`];
    if (trace.agent_id !== run.agentId) problems.push(`${run.traceId}: agent ${trace.agent_id}`);
    if (trace.status !== 'completed') problems.push(`${run.traceId}: status ${trace.status}`);
    if (Number(trace.event_count) !== run.eventIds.length)
      problems.push(`${run.traceId}: eventCount ${trace.event_count} ≠ ${run.eventIds.length}`);
    if (stored !== run.eventIds.length)
      problems.push(`${run.traceId}: ${stored} events stored, ${run.eventIds.length} recorded`);
    for (const id of run.eventIds)
      if (eventTrace.get(id) !== run.traceId) problems.push(`${run.traceId}: event ${id} missing`);
    return problems;
  });
  expect(wrongRuns.slice(0, 10)).toEqual([]);
  expect(traceById.size).toBe(runs.length);
  expect(events.rows.length).toBe(runs.reduce((sum, run) => sum + run.eventIds.length, 0));
}
