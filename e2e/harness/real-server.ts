import { randomBytes } from 'node:crypto';
import {
  buildApp,
  changeConfig,
  loadConfig,
  mintDevToken,
  openStore,
  type ConfigChanges,
  type Store,
} from '@flightlog/server';
import type { Event, Trace } from '@flightlog/protocol';

export interface RealAgent {
  agentId: string;
  apiKey: string;
  verifyToken: string;
}

/** A real Flightlog service in this process: Fastify on a loopback port, PGlite in memory. */
export interface RealServer {
  url: string;
  store: Store;
  /** POST /admin/v1/agents through the admin API. */
  createAgent(name?: string): Promise<RealAgent>;
  /** GET /admin/v1/agents/:id. */
  agent(agentId: string): Promise<{ verifiedAt: string | null }>;
  /** A viewer's identity token on the agent (granted through the admin API). */
  viewerToken(agentId: string): Promise<string>;
  /** GET /v1/traces/:id with a viewer token: what the dashboard would show. */
  readTrace(
    agentId: string,
    traceId: string,
  ): Promise<{ status: number; body: { trace: Trace; events: Event[] } }>;
  close(): Promise<void>;
}

/**
 * Starts the service; `location` picks the engine (default: PGlite in memory; a PostgreSQL URL
 * and schema from `freshLocation` of @flightlog/test-support for the other engine).
 */
export async function startRealServer(
  changes: ConfigChanges = {},
  location: { databaseUrl?: string; databaseSchema?: string } = {},
): Promise<RealServer> {
  const adminToken = randomBytes(24).toString('hex');
  const jwtSecret = randomBytes(32).toString('hex');
  const config = changeConfig(
    changeConfig(loadConfig({}), {
      http: { port: 0, host: '127.0.0.1' },
      auth: { adminToken, jwtSecret },
      analysis: { graceMs: 0 },
    }),
    changes,
  );
  const store = await openStore({ ...location, poolSize: 2 });
  const built = await buildApp({ config, store, logger: false });
  await built.app.listen({ port: 0, host: '127.0.0.1' });
  const address = built.app.server.address();
  if (!address || typeof address === 'string') throw new Error('no address');
  const url = `http://127.0.0.1:${address.port}`;

  const admin = async (method: string, path: string, body?: unknown): Promise<unknown> => {
    const response = await fetch(url + path, {
      method,
      headers: {
        authorization: `Bearer ${adminToken}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    if (!response.ok) throw new Error(`admin ${method} ${path}: ${response.status}`);
    return response.status === 204 ? undefined : response.json();
  };
  const tokens = new Map<string, string>();
  const viewerToken = async (agentId: string) => {
    let token = tokens.get(agentId);
    if (token === undefined) {
      await admin('PUT', `/admin/v1/agents/${agentId}/members/viewer-${agentId}`, {
        role: 'viewer',
      });
      token = await mintDevToken(jwtSecret, `viewer-${agentId}`);
      tokens.set(agentId, token);
    }
    return token;
  };

  let closing: Promise<void> | undefined;
  return {
    url,
    store,
    createAgent: async (name = 'client test agent') =>
      (await admin('POST', '/admin/v1/agents', { name })) as RealAgent,
    agent: async (agentId) => (await admin('GET', `/admin/v1/agents/${agentId}`)) as never,
    viewerToken,
    async readTrace(agentId, traceId) {
      const response = await fetch(`${url}/v1/traces/${traceId}`, {
        headers: { authorization: `Bearer ${await viewerToken(agentId)}` },
      });
      return { status: response.status, body: (await response.json()) as never };
    },
    close() {
      closing ??= built.app.close(); // which closes the store too
      return closing;
    },
  };
}

/** Events stored for a trace, straight from the table (duplicates would show here). */
export async function storedEventRows(
  store: Store,
  traceId: string,
): Promise<{ id: string; sequence: number }[]> {
  return store.sql.query<{ id: string; sequence: number }>(
    'SELECT id, sequence::int AS sequence FROM events WHERE trace_id = $1 ORDER BY sequence',
    [traceId],
  );
}

/** Batches the service accepted for an agent (idempotency keys). */
export async function acceptedBatchCount(store: Store, agentId: string): Promise<number> {
  const [row] = await store.sql.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM accepted_batches WHERE agent_id = $1',
    [agentId],
  );
  return row?.n ?? 0;
}
