// Live-stream benchmark: how fast and how cheaply the real Flightlog server delivers an agent's
// batches over Server-Sent Events (GET /v1/agents/:id/live), next to bare baselines measured in
// the same run.
//
// For each bus engine (memory; redis at BENCH_REDIS_URL with a LIVE_REDIS_PREFIX of its own,
// skipped loudly when unreachable) it starts the built server as a child process, on PostgreSQL
// (BENCH_DATABASE_URL, a fresh DATABASE_SCHEMA dropped afterwards) when reachable, else on PGlite
// (a fresh temporary DATA_DIR; it limits the ingest rate), creates agents and viewers through the
// admin API (identity JWTs are signed here with the server's JWT_SECRET), and measures:
//
//   idle      memory per idle stream: BENCH_IDLE_STREAMS (5,000) streams opened over raw TCP
//             sockets, spread over 10 users x 10 agents that get no traffic; (RSS after - RSS
//             before) / streams, RSS being the server's own /metrics
//             process_resident_memory_bytes, each reading the median of 3 taken 250 ms apart after
//             a 2 s settle. 200 streams are opened and closed first (warm-up), so the code paths
//             and their allocations exist before the "before" reading. GC cannot be triggered from
//             outside, so garbage in the heap is part of both readings.
//   delivery  BENCH_RATE (200) batches/s evenly paced (open loop) over BENCH_AGENTS (50) agents, one
//             SSE stream open per agent, BENCH_WARMUP_SECONDS (2) + BENCH_SECONDS (10). Per batch
//             it records the scheduled send time, the 202, and each arrival on a stream (SSE is
//             parsed here, over node:http). "from 202" = arrival - 202 received (signed: the server
//             writes the SSE message before it answers the POST, so a message may arrive first);
//             "from send" = arrival - scheduled send time (includes the POST itself: HTTP, inflate,
//             validation, the database commit). Every accepted batch must arrive exactly once, on
//             its own agent's stream: lost / duplicated / misrouted / unknown messages are counted.
//   replay    1000 batches posted to one fresh agent (16 concurrent senders), then the time from
//             opening a new stream to receiving the 1000th replayed message, 3 connections one
//             after the other (median); each must replay exactly the 1000 posted batches. When the
//             server ends the replay (a replay larger than LIVE_MAX_QUEUE_BYTES, 1 MiB by default,
//             is cut as a "too slow" client however fast the client reads), that is reported, and
//             the replay is measured once more on a restarted server (same database and bus) with
//             LIVE_MAX_QUEUE_BYTES=64 MiB, so the figure exists alongside the failure.
//
// Order per bus: idle (on a server that has only been set up), delivery, replay. The machine may
// be shared: the CPU used during each delivery run is split (from /proc) into this benchmark and
// its children, PostgreSQL + Redis, kernel threads and other processes, and a run during which
// other processes used more than 25% of a core is flagged as disturbed.
//
// Batches are the ingest benchmark's: 1 trace + BENCH_EVENTS_PER_BATCH (20) llm_call events,
// gzip, fresh ids each; the SSE message of one is ~20 KB.
//
// Baselines, measured in the same run, on the same machine, with the same messages and client:
//
//   memory bus  delivery: a bare node:http server (this file run as a child with
//               --bare-sse-server): POST /publish/:agent inflates and parses the same gzip body,
//               writes the same `id/event: trace/data: <item JSON>` message to the agent's open
//               SSE responses, then answers 202. No auth, validation, database or bus.
//               replay: the same bare server replays the last 1000 messages it kept in memory.
//   redis bus   delivery: the bare bus, from this process: XADD (MAXLEN 1000, + EXPIRE, one
//               pipeline, as the server publishes) on one connection, one blocking XREAD loop
//               over the 50 agents' streams on another (as the server reads); "from 202" is from
//               the XADD reply. replay: the bare node:http server replaying from Redis (XRANGE of
//               the agent's stream in pages of 100, as the service reads it, one SSE write per
//               entry); the XRANGE alone is shown too.
//   idle        a bare node:http server (child process) holding BENCH_IDLE_STREAMS idle SSE
//               responses open (headers + ": connected"), measured the same way (its /metrics
//               reports process_resident_memory_bytes from process.memoryUsage().rss).
//
// Ratios are service / baseline, "n/a" when the baseline figure is <= 0.05 (the signed "from 202"
// figures of the Redis baseline are below zero: XREAD delivers before the XADD reply arrives);
// the end-to-end ("from send") rows always have a ratio. Targets (from the issue): delivery p99
// (from the 202) < 50 ms, replay of 1000 < 250 ms, < 30 KB per idle stream (KiB here). It is a benchmark, not a test: nothing is asserted,
// anomalies (lost or duplicated messages, cut streams, non-2xx, server warnings) are printed
// loudly. Figures are printed and written to bench/results/live-latest.json. Bounded:
// BENCH_TIMEOUT_SECONDS (330) aborts the run; servers, child processes, sockets, Redis keys,
// schemas and data directories are released on every exit path. Loopback only.
//
// Env: BENCH_SECONDS (10), BENCH_WARMUP_SECONDS (2), BENCH_RATE (200), BENCH_AGENTS (50),
//      BENCH_IDLE_STREAMS (5000), BENCH_EVENTS_PER_BATCH (20), BENCH_TIMEOUT_SECONDS (330),
//      BENCH_BUSES (memory,redis), BENCH_DATABASE_URL (postgres://postgres@127.0.0.1:5432/test),
//
// Layout: live/config.mjs (settings, paths, the run's lifecycle), live/bus.mjs (one bus end to
// end), live/idle.mjs, live/delivery.mjs, live/replay.mjs (the measures), live/redis.mjs (the
// redis bus's Redis and bare bus), live/servers.mjs, live/bare-sse-server.mjs (the child run by
// this file with --bare-sse-server), live/report.mjs; ../load.mjs and ../sse.mjs are shared.

import { performance } from 'node:perf_hooks';
import { machineInfo, reachable, redactUrl, runBenchmark, writeJsonAtomic } from './support.mjs';
import { runBareServer } from './live/bare-sse-server.mjs';
import { loadBatchMaker } from './live/batches.mjs';
import { benchBus } from './live/bus.mjs';
import { BARE_FLAG, CFG, RESULTS_FILE, ROOT, startLifecycle } from './live/config.mjs';
import { destroyOpenSockets } from './live/idle.mjs';
import { report } from './live/report.mjs';

/**
 * @typedef {import('./live/bus.mjs').BusResult} BusResult
 * @typedef {import('./live/report.mjs').RunMeta} RunMeta
 */

/**
 * PostgreSQL when reachable, else PGlite, loudly.
 * @returns {Promise<string>}
 */
async function chooseDatabase() {
  const pgUrl = new URL(CFG.databaseUrl);
  const pgPort = Number(pgUrl.port || 5432);
  if (await reachable(pgUrl.hostname, pgPort)) return 'postgres';
  console.log(
    `\n${'!'.repeat(78)}\n!!! PostgreSQL at ${pgUrl.hostname}:${pgPort} is unreachable: the server runs on PGlite\n` +
      `!!! (a fresh temporary DATA_DIR), which limits the ingest rate\n${'!'.repeat(78)}`,
  );
  return 'pglite';
}

async function main() {
  await loadBatchMaker();
  const { default: pg } = await import('pg');
  const { Redis } = await import('ioredis');
  const { SignJWT } = await import('jose');

  /** @type {RunMeta} */
  const meta = machineInfo(ROOT);
  const database = await chooseDatabase();
  meta.database = database;
  console.log(
    `Flightlog live-stream benchmark: buses ${CFG.buses.join(', ')} on ${database}; ` +
      `${CFG.rate}/s over ${CFG.agents} streams for ${CFG.warmupSeconds}+${CFG.seconds} s, ` +
      `replay ${CFG.replayDepth}, ${CFG.idleStreams} idle streams`,
  );
  const started = performance.now();
  /** @type {BusResult[]} */
  const results = [];
  for (const bus of CFG.buses) results.push(await benchBus(bus, { database, pg, Redis, SignJWT }));
  meta.totalSeconds = Math.round((performance.now() - started) / 100) / 10;
  const measured = results.find((r) => r.messageBytes);
  meta.messageBytes = measured?.messageBytes;
  meta.bodyGzipBytes = measured?.bodyGzipBytes;

  report(results, meta);
  writeJsonAtomic(RESULTS_FILE, {
    ...meta,
    config: {
      ...CFG,
      databaseUrl: redactUrl(CFG.databaseUrl),
      redisUrl: redactUrl(CFG.redisUrl),
    },
    buses: Object.fromEntries(results.map((r) => [r.bus, r])),
  });
  console.log(`\nwrote ${RESULTS_FILE} (total ${meta.totalSeconds} s)`);
}

if (process.argv[2] === BARE_FLAG) {
  await runBareServer();
} else {
  const lifecycle = startLifecycle();
  lifecycle.onCleanup(destroyOpenSockets);
  await runBenchmark(lifecycle, main);
}
