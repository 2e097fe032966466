import type { AgentStats, StatsTotals, Trace } from '@flightlog/protocol';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeEngines } from '../harness/engines.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { newId, traceSnapshot } from '../fixtures/batches.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

const EMPTY: StatsTotals = {
  runs: 0,
  errored: 0,
  p50DurationMs: null,
  p95DurationMs: null,
  costUsd: '0',
  lamports: '0',
};

/**
 * The windows end with the current UTC hour, read by the database when it answers: a test
 * that places runs by the hour waits out the last seconds of an hour, so that the hour it
 * computed is still the current one when the server answers.
 */
async function currentHourStart(): Promise<number> {
  const untilNextHour = HOUR - (Date.now() % HOUR);
  if (untilNextHour < 20_000)
    await new Promise((resolve) => setTimeout(resolve, untilNextHour + 50));
  return Date.now() - (Date.now() % HOUR);
}

const iso = (ms: number) => new Date(ms).toISOString();

/** A run that started at `startMs`; a finished one lasted `durationMs`. */
function run(
  startMs: number,
  status: Trace['status'],
  durationMs: number | null,
  money: { costUsd?: string; lamports?: string } = {},
): Trace {
  return traceSnapshot({
    startedAt: iso(startMs),
    status,
    ...(status === 'running'
      ? {}
      : { endedAt: iso(startMs + (durationMs ?? 0)), durationMs: durationMs ?? 0 }),
    totalCostUsd: money.costUsd ?? '0',
    totalLamports: money.lamports ?? '0',
  });
}

describeEngines('agent stats [%s]', (engine) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(engine);
  });
  afterAll(() => server.close());

  const stats = (agentId: string, token: string | undefined, query = '') =>
    send(server.url, `/v1/agents/${agentId}/stats${query}`, undefined, token ? { token } : {});

  async function agentWithOwner(): Promise<{ agent: TestAgent; owner: string }> {
    const agent = await server.createAgent();
    return { agent, owner: await server.userToken(`owner-${newId()}`, agent.agentId, 'owner') };
  }

  async function ingest(agent: TestAgent, traces: Trace[]): Promise<void> {
    const res = await postBatch(server.url, agent.apiKey, {
      batchId: newId(),
      items: traces.map((trace) => ({ trace, events: [] })),
    });
    expect(res.status, res.text).toBe(202);
  }

  it('answers 24 hourly buckets of zeros, ending with the current hour, for an agent with no runs', async () => {
    const { agent, owner } = await agentWithOwner();
    const hour = await currentHourStart();
    const res = await stats(agent.agentId, owner, '?window=24h');
    expect(res.status, res.text).toBe(200);
    const body = res.body as AgentStats;
    expect(body.window).toBe('24h');
    expect(body.bucketSeconds).toBe(3_600);
    expect(body.from).toBe(iso(hour - 23 * HOUR));
    expect(body.to).toBe(iso(hour + HOUR));
    expect(body.buckets.map((b) => b.start)).toEqual(
      Array.from({ length: 24 }, (_, i) => iso(hour - (23 - i) * HOUR)),
    );
    for (const bucket of body.buckets) expect(bucket).toEqual({ start: bucket.start, ...EMPTY });
    expect(body.totals).toEqual(EMPTY);
    // no window: the last 24 hours
    const plain = await stats(agent.agentId, owner);
    expect(plain.status).toBe(200);
    expect(plain.body.window).toBe('24h');
  });

  it('counts, errors, percentiles and exact sums per hour and in total', async () => {
    const { agent, owner } = await agentWithOwner();
    const other = await agentWithOwner();
    const hour = await currentHourStart();
    const current = [
      run(hour, 'completed', 100, { costUsd: '0.10', lamports: '18446744073709551615' }),
      run(hour + 1, 'errored', 300, { costUsd: '0.2', lamports: '1' }),
      run(hour + 2, 'running', null, { costUsd: '0.000000001' }),
    ];
    const previous = [run(hour - 1, 'timeout', 1_000)];
    const fiveAgo = Array.from({ length: 20 }, (_, i) =>
      run(hour - 5 * HOUR + i * 1_000, 'completed', (i + 1) * 100, { lamports: '5000' }),
    );
    const first = [run(hour - 23 * HOUR, 'completed', 7, { costUsd: '1.5' })];
    const outside = [
      run(hour - 23 * HOUR - 1, 'completed', 9, { costUsd: '1000' }),
      run(hour + HOUR, 'completed', 9, { costUsd: '1000' }), // a client clock ahead of ours
    ];
    await ingest(agent, [...current, ...previous, ...fiveAgo, ...first, ...outside]);
    await ingest(other.agent, [run(hour, 'errored', 5, { costUsd: '99' })]);

    const res = await stats(agent.agentId, owner, '?window=24h');
    expect(res.status, res.text).toBe(200);
    const body = res.body as AgentStats;
    const bucket = (hoursAgo: number) => body.buckets[23 - hoursAgo];
    expect(bucket(0)).toEqual({
      start: iso(hour),
      runs: 3,
      errored: 1,
      p50DurationMs: 200, // of the finished runs: 100 and 300
      p95DurationMs: percentile([100, 300], 0.95), // 290, as floats compute it
      costUsd: '0.300000001',
      lamports: '18446744073709551616',
    });
    expect(bucket(1)).toEqual({
      start: iso(hour - HOUR),
      runs: 1,
      errored: 1,
      p50DurationMs: 1_000,
      p95DurationMs: 1_000,
      costUsd: '0',
      lamports: '0',
    });
    expect(bucket(5)).toEqual({
      start: iso(hour - 5 * HOUR),
      runs: 20,
      errored: 0,
      p50DurationMs: 1_050, // 100, 200, …, 2000: interpolated
      p95DurationMs: percentile(
        fiveAgo.map((t) => t.durationMs as number),
        0.95,
      ), // ≈ 1905
      costUsd: '0',
      lamports: '100000',
    });
    expect(bucket(23)).toEqual({
      start: iso(hour - 23 * HOUR),
      runs: 1,
      errored: 0,
      p50DurationMs: 7,
      p95DurationMs: 7,
      costUsd: '1.5',
      lamports: '0',
    });
    const empty = body.buckets.filter((_, i) => ![0, 18, 22, 23].includes(i));
    expect(empty).toHaveLength(20);
    for (const b of empty) expect(b).toEqual({ start: b.start, ...EMPTY });

    const finishedDurations = [100, 300, 1_000, 7, ...fiveAgo.map((t) => t.durationMs as number)];
    expect(finishedDurations).toHaveLength(24);
    expect(body.totals).toEqual({
      runs: 25,
      errored: 2,
      p50DurationMs: percentile(finishedDurations, 0.5),
      p95DurationMs: percentile(finishedDurations, 0.95),
      costUsd: '1.800000001',
      lamports: '18446744073709651616',
    });
  });

  it('answers 7 daily buckets ending with the current UTC day', async () => {
    const { agent, owner } = await agentWithOwner();
    const hour = await currentHourStart();
    const day = hour - (hour % DAY);
    await ingest(agent, [
      run(day, 'completed', 10, { lamports: '3' }),
      run(day + 1_000, 'errored', 30, { lamports: '4' }),
      run(day - 6 * DAY, 'timeout', 50, { costUsd: '0.5' }),
      run(day - 6 * DAY - 1, 'completed', 70, { costUsd: '100' }),
    ]);
    const res = await stats(agent.agentId, owner, '?window=7d');
    expect(res.status, res.text).toBe(200);
    const body = res.body as AgentStats;
    expect(body.bucketSeconds).toBe(86_400);
    expect(body.from).toBe(iso(day - 6 * DAY));
    expect(body.to).toBe(iso(day + DAY));
    expect(body.buckets.map((b) => b.start)).toEqual(
      Array.from({ length: 7 }, (_, i) => iso(day - (6 - i) * DAY)),
    );
    expect(body.buckets[6]).toEqual({
      start: iso(day),
      runs: 2,
      errored: 1,
      p50DurationMs: 20,
      p95DurationMs: percentile([10, 30], 0.95), // ≈ 29
      costUsd: '0',
      lamports: '7',
    });
    expect(body.buckets[0]).toMatchObject({ runs: 1, errored: 1, costUsd: '0.5' });
    expect(body.buckets.slice(1, 6).every((b) => b.runs === 0)).toBe(true);
    expect(body.totals).toMatchObject({ runs: 3, errored: 2, costUsd: '0.5', lamports: '7' });
  });

  it.each(['30d', '24H', '1h', ''])('answers 400 naming the field for window=%s', async (w) => {
    const { agent, owner } = await agentWithOwner();
    const res = await stats(agent.agentId, owner, `?window=${w}`);
    expect(isProblem(res, 400), res.text).toBe(true);
    expect(res.body.errors.map((e: { pointer: string }) => e.pointer)).toEqual([
      '/querystring/window',
    ]);
  });

  it.each(['viewer', 'editor'] as const)('lets a %s read', async (role) => {
    const { agent } = await agentWithOwner();
    const token = await server.userToken(`${role}-${newId()}`, agent.agentId, role);
    expect((await stats(agent.agentId, token, '?window=7d')).status).toBe(200);
  });

  it('answers 404 to a user with no role, the same as for no agent at all', async () => {
    const { agent } = await agentWithOwner();
    const stranger = await server.userToken(`stranger-${newId()}`);
    const res = await stats(agent.agentId, stranger);
    expect(isProblem(res, 404)).toBe(true);
    const missing = await stats(`no-such-agent-${newId()}`, stranger);
    expect(isProblem(missing, 404)).toBe(true);
    expect(res.body.detail).toBe(missing.body.detail);
  });

  it('answers 401 without a token', async () => {
    const { agent } = await agentWithOwner();
    expect(isProblem(await stats(agent.agentId, undefined), 401)).toBe(true);
  });
});

/** percentile_cont: linear interpolation between the closest ranks. */
function percentile(values: number[], fraction: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const position = fraction * (sorted.length - 1);
  const below = Math.floor(position);
  const lower = sorted[below] as number;
  const upper = sorted[Math.min(below + 1, sorted.length - 1)] as number;
  return lower + (upper - lower) * (position - below);
}
