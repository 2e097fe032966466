// Replay: 1000 batches posted to one fresh agent, then the time from opening a new stream to
// receiving the 1000th replayed message, 3 connections one after the other. When the server
// ends the replay (larger than LIVE_MAX_QUEUE_BYTES), it is measured once more on a restarted
// server with a 64 MiB cap, so the figure exists alongside the failure.

import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { pool, post } from '../load.mjs';
import { openSse } from '../sse.mjs';
import { median } from '../support.mjs';
import { makeBatch, traceIdOf } from './batches.mjs';
import { CFG, messageOf } from './config.mjs';
import { measureXrange } from './redis.mjs';
import { adminClient, startServer } from './servers.mjs';

/**
 * @typedef {import('../support.mjs').ServerHandle} ServerHandle
 * @typedef {import('../load.mjs').SendResult} SendResult
 * @typedef {import('../sse.mjs').OnSseMessage} OnSseMessage
 * @typedef {import('../sse.mjs').SseStream} SseStream
 * @typedef {import('./batches.mjs').Batch} Batch
 * @typedef {import('./servers.mjs').CreatedAgent} CreatedAgent
 * @typedef {import('./bus.mjs').BusRun} BusRun
 */

/**
 * One replay connection that opened: ms until the last expected message (null: it never came,
 * `cut` when the server ended the stream first), from the request's start.
 * @typedef {object} ReplayRunDone
 * @property {undefined} [error]
 * @property {number | null} ms
 * @property {number} headersMs
 * @property {number | null} firstMs
 * @property {number} received
 * @property {number} missing
 * @property {number} duplicated
 * @property {boolean} cut
 * @property {number} bytes
 */

/**
 * A replay connection that could not open: why, and no figures.
 * @typedef {{ error: string } & { [K in Exclude<keyof ReplayRunDone, 'error'>]?: undefined }}
 *   ReplayRunFailed
 */

/** @typedef {ReplayRunDone | ReplayRunFailed} ReplayRun */

/**
 * How the replayed batches were posted: seconds for all, answers by status.
 * @typedef {{ seconds: number, statusCodes: Record<string, number> }} PostSummary
 */

/**
 * One side's replay figures; `medianMs` only when every connection got every message. `post`
 * is set by the caller once measured, `maxQueueBytes` on the raised-cap server's.
 * @typedef {object} ReplayResult
 * @property {number} messages
 * @property {ReplayRun[]} runs
 * @property {number | null} medianMs
 * @property {number} complete
 * @property {PostSummary} [post]
 * @property {number} [maxQueueBytes]
 */

/**
 * Replay: `connect(onMessage)` opens a new stream; time until the 1000th message, 3 times.
 * @param {string} label
 * @param {(onMessage: OnSseMessage) => Promise<SseStream>} connect
 * @param {string[]} expectedIds
 * @returns {Promise<ReplayResult>}
 */
export async function measureReplay(label, connect, expectedIds) {
  /** @type {ReplayRun[]} */
  const runs = [];
  for (let k = 0; k < CFG.replayConnections; k++) {
    const run = await replayOnce(connect, expectedIds);
    runs.push(run);
    if (!run.error) await sleep(200);
  }
  const complete = runs.filter((r) => r.ms !== null && !r.error);
  /** @type {ReplayResult} */
  const result = {
    messages: expectedIds.length,
    runs,
    medianMs: complete.length === runs.length ? median(complete.map((r) => r.ms)) : null,
    complete: complete.length,
  };
  console.log(
    `   replay   ${label.padEnd(26)} ` +
      runs.map(fmtReplayRun).join(', ') +
      (result.medianMs !== null ? ` -> median ${result.medianMs.toFixed(1)} ms` : ''),
  );
  return result;
}

/** @param {ReplayRun} r */
const fmtReplayRun = (r) =>
  r.error
    ? `FAILED (${r.error})`
    : r.ms === null
      ? `!!! ${r.cut ? 'CUT by the server' : 'timed out'} after ${r.received} messages`
      : // openSse's errors all have a message (no error: it opened, ms is set), and the
        // first message came before the last
        `${/** @type {number} */ (r.ms).toFixed(1)} ms (first ${
          /** @type {number} */ (r.firstMs).toFixed(1)
        })` + (r.missing || r.duplicated ? ` !!! missing ${r.missing} dup ${r.duplicated}` : '');

/**
 * One connection: from opening the stream to the last expected message, or its end.
 * @param {(onMessage: OnSseMessage) => Promise<SseStream>} connect
 * @param {string[]} expectedIds
 * @returns {Promise<ReplayRun>}
 */
async function replayOnce(connect, expectedIds) {
  /** @type {Map<string | undefined, number>} */
  const seen = new Map();
  let count = 0;
  /** @type {number | undefined} */
  let firstAt;
  /** @type {number | undefined} */
  let doneAt;
  // set by the promise's executor, which runs at once
  /** @type {(() => void) | undefined} */
  let resolveDone;
  /** @type {Promise<void>} */
  const done = new Promise((resolve) => (resolveDone = resolve));
  const t0 = performance.now();
  /** @type {SseStream} */
  let stream;
  try {
    stream = await connect((m, now) => {
      if (m.event !== 'trace') return;
      count++;
      firstAt ??= now;
      const id = traceIdOf(m.data);
      seen.set(id, (seen.get(id) ?? 0) + 1);
      if (count === expectedIds.length) {
        doneAt = now;
        /** @type {() => void} */ (resolveDone)();
      }
    });
  } catch (error) {
    return { error: messageOf(error) };
  }
  const headersAt = performance.now();
  stream.onEnd = resolveDone;
  if (stream.ended) /** @type {() => void} */ (resolveDone)();
  await Promise.race([done, sleep(20_000)]);
  // a little longer, to see messages beyond the 1000th (there should be none)
  if (doneAt !== undefined) await sleep(100);
  const endedEarly = doneAt === undefined && stream.ended;
  stream.close();
  return {
    ms: doneAt === undefined ? null : doneAt - t0,
    headersMs: headersAt - t0,
    firstMs: firstAt === undefined ? null : firstAt - t0,
    received: count,
    missing: expectedIds.filter((id) => !seen.has(id)).length,
    duplicated: [...seen.values()].filter((n) => n > 1).length,
    cut: endedEarly,
    bytes: stream.bytes,
  };
}

/**
 * The replay comparison of one bus: `serviceRaisedCap` when the default queue cap cut the
 * service's replay, `xrange` (the bus alone, ms) on Redis.
 * @typedef {object} ReplayComparison
 * @property {ReplayResult} service
 * @property {ReplayResult} baseline
 * @property {string} baselineKind
 * @property {ReplayResult} [serviceRaisedCap]
 * @property {{ runs: number[], medianMs: number | null }} [xrange]
 */

/**
 * Posts every batch of `list`, CFG.replaySenders at a time.
 * @param {Batch[]} list
 * @param {(batch: Batch) => Promise<SendResult>} send
 * @returns {Promise<PostSummary>}
 */
async function postAll(list, send) {
  const t = performance.now();
  /** @type {Record<string, number>} */
  const codes = {};
  await pool(list.length, CFG.replaySenders, async (i) => {
    const r = await send(/** @type {Batch} */ (list[i]));
    codes[r.status] = (codes[r.status] ?? 0) + 1;
  });
  return { seconds: (performance.now() - t) / 1000, statusCodes: codes };
}

/**
 * Posts `list` to agent `agentX` of server `srv`, then measures its replay as `token`'s user.
 * @param {BusRun} run
 * @param {{ srv: ServerHandle, token: string, agentX: CreatedAgent, label: string,
 *   list: Batch[] }} target
 * @returns {Promise<ReplayResult>}
 */
async function serviceReplayOn({ postAgent, sseAgent }, { srv, token, agentX, label, list }) {
  const posted = await postAll(list, (b) =>
    post(
      `${srv.base}/v1/traces/batch`,
      b.gz,
      {
        authorization: `Bearer ${agentX.apiKey}`,
        'content-type': 'application/json',
        'content-encoding': 'gzip',
      },
      postAgent,
    ),
  );
  console.log(
    `   replay   posted ${list.length} batches to the service in ${posted.seconds.toFixed(1)} s ` +
      `(${JSON.stringify(posted.statusCodes)})`,
  );
  await sleep(500);
  const measured = await measureReplay(
    label,
    (onMessage) =>
      openSse(
        `${srv.base}/v1/agents/${agentX.agentId}/live`,
        { authorization: `Bearer ${token}` },
        { agent: sseAgent, onMessage },
      ),
    list.map((b) => b.traceId),
  );
  measured.post = posted;
  return measured;
}

/**
 * The bare server's replay of the same batches: from memory, or from Redis (XRANGE).
 * @param {BusRun} run
 * @param {Batch[]} replayBatches
 * @returns {Promise<ReplayResult>}
 */
async function bareReplay({ busName, bare, postAgent, sseAgent }, replayBatches) {
  const barePost = await postAll(replayBatches, (b) =>
    post(
      `${bare.base}/publish/replay`,
      b.gz,
      { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      postAgent,
    ),
  );
  await sleep(300);
  const measured = await measureReplay(
    busName === 'memory' ? 'bare node:http (memory)' : 'bare node:http (XRANGE)',
    (onMessage) => openSse(`${bare.base}/live/replay`, {}, { agent: sseAgent, onMessage }),
    replayBatches.map((b) => b.traceId),
  );
  measured.post = barePost;
  return measured;
}

/**
 * The service's replay, the bare server's, and on Redis the bus alone, into `result` (a
 * failure keeps the figures up to there).
 * @param {BusRun} run
 * @param {import('./bus.mjs').BusResult} result
 * @returns {Promise<ReplayComparison>}
 */
export async function compareReplay(run, result) {
  const replayBatches = Array.from({ length: CFG.replayDepth }, () =>
    makeBatch(0, run.replayAgent.agentId),
  );
  const service = await serviceReplayOn(run, {
    srv: run.server,
    token: run.viewerToken,
    agentX: run.replayAgent,
    label: 'service',
    list: replayBatches,
  });
  run.ensureAlive();
  /** @type {ReplayComparison} */
  const replay = {
    service,
    baseline: await bareReplay(run, replayBatches),
    baselineKind:
      run.busName === 'memory'
        ? 'bare node:http server replaying the last 1000 messages kept in memory'
        : "bare node:http server replaying the agent's Redis stream (XRANGE in pages of 100, one SSE write per entry)",
  };
  result.replay = replay;
  // the redis bus has set `redis`
  if (run.busName === 'redis')
    replay.xrange = await measureXrange(
      /** @type {import('./redis.mjs').RunRedis} */ (run.redis),
      replayBatches,
      run.warn,
    );
  warnReplay(replay, replayBatches.length, run.warn);
  if (service.runs.some((r) => r.cut)) {
    const tally = run.server.output.byMessage['live stream client too slow; disconnecting'];
    if (tally) run.warn(`server log: "live stream client too slow; disconnecting" x ${tally}`);
  }
  run.ensureAlive();
  return replay;
}

/**
 * Failed, cut, incomplete replays and posts not accepted, loudly.
 * @param {ReplayComparison} replay
 * @param {number} expected messages per replay
 * @param {(warning: string) => void} warn
 */
function warnReplay(replay, expected, warn) {
  for (const [side, r] of Object.entries({ service: replay.service, baseline: replay.baseline })) {
    for (const [k, run] of r.runs.entries()) {
      if (run.error) warn(`replay ${side} connection ${k + 1}: ${run.error}`);
      else if (run.ms === null)
        warn(
          `replay ${side} connection ${k + 1}: ${run.cut ? 'the server ENDED the stream' : 'timed out'} after ` +
            `${run.received} of ${expected} messages (${(run.bytes / 2 ** 20).toFixed(1)} MiB received)`,
        );
      else if (run.missing || run.duplicated)
        warn(
          `replay ${side} connection ${k + 1}: ${run.missing} missing, ${run.duplicated} duplicated`,
        );
    }
    // both were posted, and have their `post` set
    const { statusCodes } = /** @type {PostSummary} */ (r.post);
    if (Object.keys(statusCodes).some((code) => code !== '202'))
      warn(`replay ${side}: posts answered ${JSON.stringify(statusCodes)}`);
  }
}

/**
 * The default LIVE_MAX_QUEUE_BYTES ended the replay: measure it once more on a server (same
 * database and bus) whose cap is high enough, so the replay still has a figure.
 * @param {BusRun} run
 * @param {ReplayComparison} replay
 */
export async function replayWithRaisedCap(run, replay) {
  const cap = 64 * 2 ** 20;
  console.log(`   replay   restarting the server with LIVE_MAX_QUEUE_BYTES=${cap} (64 MiB)`);
  const raised = await startServer({ ...run.serverEnv, LIVE_MAX_QUEUE_BYTES: String(cap) });
  const client = adminClient(raised, run.deps.SignJWT);
  const agentX = await client.createAgent();
  await client.grant(agentX.agentId, run.viewer);
  const again = await serviceReplayOn(run, {
    srv: raised,
    token: await client.tokenFor(run.viewer),
    agentX,
    label: 'service, queue cap 64 MiB',
    list: Array.from({ length: CFG.replayDepth }, () => makeBatch(0, agentX.agentId)),
  });
  again.maxQueueBytes = cap;
  replay.serviceRaisedCap = again;
  for (const [k, r] of again.runs.entries())
    if (r.error || r.ms === null || r.missing || r.duplicated)
      run.warn(
        `replay with a 64 MiB queue cap, connection ${k + 1}: ${r.error ?? `${r.received} received, ${r.missing} missing, ${r.duplicated} duplicated`}`,
      );
  const raisedExit = await raised.stop();
  if (raisedExit.code !== 0)
    run.warn(
      `second server exited with code ${raisedExit.code} signal ${raisedExit.signal} on SIGTERM`,
    );
}
