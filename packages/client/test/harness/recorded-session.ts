import type { Event } from '@flightlog/protocol';
import { FlightlogClient, type FlightlogSession } from '../../src/index.js';
import { RecordingLogger } from '@flightlog/test-support';
import { ScriptedTransport } from './scripted-transport.js';

/** A real client whose batches land in memory: the events an instrumentation recorded. */
export interface RecordedSession {
  client: FlightlogClient;
  session: FlightlogSession;
  logger: RecordingLogger;
  transport: ScriptedTransport;
  /** Closes the client and gives every event sent, in order. */
  events(): Promise<Event[]>;
  /** Flushes and gives the events sent so far. */
  flushed(): Promise<Event[]>;
}

export function recordedSession(
  settings: { enabled?: boolean; maxEventBytes?: number } = {},
  env: Record<string, string | undefined> = {},
): RecordedSession {
  const transport = new ScriptedTransport();
  const logger = new RecordingLogger();
  const client = new FlightlogClient(
    { apiKey: 'k', logger, flushOnExit: false, ...settings },
    { transport, env },
  );
  const session = client.startSession({ inputSummary: 'instrumented run' });
  const sent = () => transport.requests.flatMap((b) => b.items.flatMap((i) => i.events));
  return {
    client,
    session,
    logger,
    transport,
    async events() {
      await client.close();
      return sent();
    },
    async flushed() {
      await client.flush();
      return sent();
    },
  };
}

/** The latest snapshot of the session's trace that was sent. */
export function lastTrace(recorded: RecordedSession) {
  const items = recorded.transport.requests.flatMap((b) => b.items);
  return items.at(-1)?.trace;
}
