import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  checkTraceHash,
  traceHashOf,
  type Event,
  type Trace,
  type TraceFingerprints,
} from '@flightlog/protocol';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { at, llmCallEvent, newId, traceSnapshot } from '../fixtures/batches.js';
import { newMasterKey, seal } from '../fixtures/runs.js';
import { startTestWorker } from '../harness/analysis.js';
import { runCli } from '../harness/cli-process.js';
import { describeEngines } from '../harness/engines.js';
import { postBatch, send } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { waitFor } from '../harness/wait.js';
import type { AnalysisWorker } from '../../src/analysis/analysis-worker.js';
import { KEPT_FINGERPRINTS } from '../../src/store/fingerprint-store.js';

/*
 * A finished run gets its fingerprint (`traceHash`) from the server, a changed run a new one with
 * the old kept, and `flightlog verify` checks an export offline (issue 25, part 2).
 */
describeEngines('run fingerprints [%s]', (engine) => {
  let server: TestServer;
  let worker: AnalysisWorker;
  let dir: string;
  beforeAll(async () => {
    server = await startTestServer(engine);
    // the analysis worker fingerprints each finished run before its autopsy
    worker = startTestWorker(server.store);
    dir = mkdtempSync(join(tmpdir(), 'flightlog-verify-'));
  });
  afterAll(async () => {
    await worker.stop(5_000);
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const post = async (agent: TestAgent, trace: Trace, events: Event[]) => {
    const res = await postBatch(server.url, agent.apiKey, {
      batchId: newId(),
      items: [{ trace, events }],
    });
    expect(res.status, res.text).toBe(202);
  };
  const read = async (traceId: string, token: string) => {
    const res = await send(server.url, `/v1/traces/${traceId}?limit=1000`, undefined, { token });
    expect(res.status, res.text).toBe(200);
    return res.body as { trace: Trace; events: Event[] };
  };
  const history = async (traceId: string, token: string) => {
    const res = await send(server.url, `/v1/traces/${traceId}/fingerprints`, undefined, { token });
    expect(res.status, res.text).toBe(200);
    return res.body as TraceFingerprints;
  };
  /**
   * The run once its fingerprint is that of the run as it reads now (and not `not`): a worker
   * may fingerprint an intermediate state first, which the test then waits past.
   */
  const fingerprinted = (traceId: string, token: string, not: string | null = null) =>
    waitFor(async () => {
      const run = await read(traceId, token);
      const hash = run.trace.traceHash;
      return hash !== null && hash !== not && hash === traceHashOf(run.trace, run.events)
        ? run
        : undefined;
    }, 'the run to be fingerprinted as it is');
  const exportFile = async (agentId: string, token: string, name: string) => {
    const res = await send(server.url, `/v1/agents/${agentId}/export`, undefined, { token });
    expect(res.status, res.text).toBe(200);
    const path = join(dir, name);
    writeFileSync(path, res.text);
    return { path, text: res.text };
  };

  it('fingerprints a finished run (a client cannot set it), keeps each fingerprint it had, and verify checks the export', async () => {
    const agent = await server.createAgent();
    const token = await server.userToken(`viewer-${newId()}`, agent.agentId);
    const trace = traceSnapshot({ status: 'running', eventCount: 2 });
    const events = [0, 1, 2, 3].map((sequence) => llmCallEvent(trace.id, sequence));
    await post(agent, trace, events.slice(0, 2));
    const forged = { traceHash: 'f'.repeat(64), shareToken: 'guessable', anchorSlot: '1' };
    const finished = {
      ...trace,
      ...forged,
      status: 'completed' as const,
      endedAt: at(2_000),
      durationMs: 2_000,
    };
    await post(agent, finished, []);

    const first = await fingerprinted(trace.id, token);
    expect(first.trace).toMatchObject({ shareToken: null, anchorSlot: null, merkleProof: null });
    expect(first.trace.traceHash).toBe(traceHashOf(first.trace, first.events));
    expect(first.trace.traceHash).not.toBe(forged.traceHash);
    // a running run has none: the running snapshot above was never fingerprinted
    expect(await history(trace.id, token)).toMatchObject({
      traceHash: first.trace.traceHash,
      fingerprints: [
        { n: 1, traceHash: first.trace.traceHash, status: 'completed', eventCount: 2 },
      ],
    });

    // The agent sends more of the run, and ends it again through the complete endpoint (each
    // finalisation fingerprints the run as stored): a new fingerprint, the old one kept.
    await post(agent, { ...finished, eventCount: 4 }, events.slice(2));
    const completed = await send(
      server.url,
      `/v1/traces/${trace.id}/complete`,
      { status: 'errored', errorMessage: 'slippage too high' },
      { token: agent.apiKey },
    );
    expect(completed.status, completed.text).toBe(200);
    const second = await fingerprinted(trace.id, token, first.trace.traceHash as string);
    expect(second.events).toHaveLength(4);
    expect(second.trace.traceHash).toBe(traceHashOf(second.trace, second.events));
    const kept = await history(trace.id, token);
    expect(kept.traceHash).toBe(second.trace.traceHash);
    const rows = kept.fingerprints.map((h) => [h.n, h.traceHash, h.status, h.eventCount]);
    expect(rows[0]).toEqual([1, first.trace.traceHash, 'completed', 2]);
    expect(rows.at(-1)).toEqual([rows.length, second.trace.traceHash, 'errored', 4]);
    // the batch that added the events may have been fingerprinted on its own before the
    // complete call: then as completed with 4 events, in between
    if (rows.length === 3) expect(rows[1]).toMatchObject([2, expect.any(String), 'completed', 4]);
    expect([2, 3]).toContain(rows.length);
    // fingerprinting the same run again adds nothing
    expect(await server.store.fingerprints.fingerprint(trace.id)).toEqual({
      kind: 'unchanged',
      traceHash: second.trace.traceHash,
    });

    // Offline: an export, and one run as the read API answers it, verify with no server at all.
    const running = traceSnapshot();
    await post(agent, running, [llmCallEvent(running.id, 0)]);
    const { path, text } = await exportFile(agent.agentId, token, 'export.ndjson');
    const ok = await runCli(['verify', path], {});
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toContain(`verified       ${trace.id} ${second.trace.traceHash}`);
    expect(ok.stdout).toContain(`no fingerprint ${running.id} (status running`);
    expect(ok.stdout).toContain('1 verified, 0 failed, 1 without a fingerprint');
    const single = join(dir, 'run.json');
    writeFileSync(single, JSON.stringify(await read(trace.id, token), null, 2));
    const one = await runCli(['verify', single], {});
    expect(one.code, one.stderr).toBe(0);
    expect(one.stdout).toContain('1 verified, 0 failed');

    // One byte changed in an event, events reordered, a line that is not a run: each says why.
    const line = text.split('\n').find((l) => l.includes(trace.id)) as string;
    const run = JSON.parse(line) as { trace: Trace; events: Event[] };
    const tampered = line.replace('Route via Orca', 'Route via 0rca');
    expect(tampered).not.toBe(line);
    const reordered = JSON.stringify({ ...run, events: [...run.events].reverse() });
    const bad = join(dir, 'bad.ndjson');
    writeFileSync(bad, `${tampered}\n${reordered}\n{"hello":1}\n`);
    const failed = await runCli(['verify', bad], {});
    expect(failed.code).toBe(1);
    const [l1, l2, l3] = failed.stdout.split('\n');
    expect(l1).toContain(
      `FAILED         ${trace.id} (traceHash): the run's data does not give its traceHash`,
    );
    expect(l2).toContain(
      `FAILED         ${trace.id} (traceHash): event ${run.events[2]?.id} (#1) is out of`,
    );
    expect(l3).toBe('FAILED         line 3: not a run: it has no "trace" object');
    expect(failed.stdout).toContain('0 verified, 3 failed');

    const notRuns = join(dir, 'notes.txt');
    writeFileSync(notRuns, 'these are\nnot runs\n');
    const refused = await runCli(['verify', notRuns], {});
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('is neither NDJSON (one run a line) nor one JSON run');
    const missing = await runCli(['verify', join(dir, 'nothing.ndjson')], {});
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('cannot read');
  });

  it('fingerprints a finished run again when a later batch changes it: a newer snapshot, or late events under an older one', async () => {
    const agent = await server.createAgent();
    const token = await server.userToken(`viewer-${newId()}`, agent.agentId);
    const trace = traceSnapshot({ status: 'completed', endedAt: at(3_000), eventCount: 2 });
    const events = [0, 1, 2, 3].map((sequence) => llmCallEvent(trace.id, sequence));
    await post(agent, trace, events.slice(0, 2));
    const first = await fingerprinted(trace.id, token);

    await post(agent, { ...trace, eventCount: 3, outputSummary: 'done, late' }, [
      events[2] as Event,
    ]);
    const second = await fingerprinted(trace.id, token, first.trace.traceHash as string);
    expect(second.events).toHaveLength(3);
    expect(second.trace.traceHash).toBe(traceHashOf(second.trace, second.events));

    // an older snapshot does not overwrite the run, but its event is stored: part of the run;
    // encrypted, it is hashed as stored, so the fingerprint is checked without the key
    const envelope = seal(
      { name: 'vault.lookup', input: { seedHint: 'SECRET-1' } },
      newMasterKey(),
    );
    const sealed = { ...(events[3] as Event), payloadEncrypted: true, payload: envelope };
    await post(agent, { ...trace, status: 'running', eventCount: 1 }, [sealed]);
    const third = await fingerprinted(trace.id, token, second.trace.traceHash as string);
    expect(third.events).toHaveLength(4);
    expect(third.events[3]).toMatchObject({ payloadEncrypted: true, payload: envelope });
    expect(third.trace.outputSummary).toBe('done, late');
    expect(third.trace.traceHash).toBe(traceHashOf(third.trace, third.events));
    expect((await history(trace.id, token)).fingerprints.map((h) => h.eventCount)).toEqual([
      2, 3, 4,
    ]);
    // nothing is left marked once the worker is through
    await waitFor(async () => {
      const [row] = await server.store.sql.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM fingerprint_due WHERE trace_id = $1',
        [trace.id],
      );
      return row?.n === 0 ? true : undefined;
    }, 'the mark to be cleared');
  });

  it('drops the current fingerprint of a finished run a client then reports timed out: no stale hash is served, the history stays', async () => {
    const agent = await server.createAgent();
    const token = await server.userToken(`viewer-${newId()}`, agent.agentId);
    const trace = traceSnapshot({ status: 'completed', endedAt: at(2_000), eventCount: 1 });
    await post(agent, trace, [llmCallEvent(trace.id, 0)]);
    const first = await fingerprinted(trace.id, token);

    await post(
      agent,
      { ...trace, status: 'timeout', eventCount: 2, outputSummary: 'rewritten after the fact' },
      [llmCallEvent(trace.id, 1)],
    );
    const run = await read(trace.id, token);
    expect(run.trace.status).toBe('timeout');
    expect(run.events).toHaveLength(2);
    // a stale hash would make `flightlog verify` call an untouched export tampered
    expect(run.trace.traceHash).toBeNull();
    expect(checkTraceHash(run.trace, run.events).kind).toBe('no-fingerprint');
    const { traceHash, fingerprints } = await history(trace.id, token);
    expect(traceHash).toBeNull();
    expect(fingerprints.map((h) => h.traceHash)).toEqual([first.trace.traceHash]);
    // and the worker, which fingerprints only completed and errored runs, leaves it so
    await waitFor(async () => {
      const [row] = await server.store.sql.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM fingerprint_due WHERE trace_id = $1',
        [trace.id],
      );
      return row?.n === 0 ? true : undefined;
    }, 'the mark to be cleared');
    expect((await read(trace.id, token)).trace.traceHash).toBeNull();
  });

  it(`keeps a run's first and latest fingerprints, ${KEPT_FINGERPRINTS} in all, however often a client changes it`, async () => {
    const agent = await server.createAgent();
    const token = await server.userToken(`viewer-${newId()}`, agent.agentId);
    const trace = traceSnapshot({ status: 'completed', endedAt: at(2_000), eventCount: 1 });
    await post(agent, trace, [llmCallEvent(trace.id, 0)]);
    const first = await fingerprinted(trace.id, token);
    // two states, back and forth: every change is a fingerprint the history has not just seen
    const changes = KEPT_FINGERPRINTS + 5;
    for (let i = 1; i <= changes; i++) {
      await post(agent, { ...trace, outputSummary: i % 2 === 1 ? 'B' : null }, []);
      // fingerprinted here at once (the worker may have been first: then it is unchanged)
      const outcome = await server.store.fingerprints.fingerprint(trace.id);
      expect(['fingerprinted', 'unchanged']).toContain(outcome.kind);
    }
    const { fingerprints } = await history(trace.id, token);
    const last = 1 + changes;
    expect(fingerprints).toHaveLength(KEPT_FINGERPRINTS);
    expect(fingerprints[0]).toMatchObject({ n: 1, traceHash: first.trace.traceHash });
    expect(fingerprints.slice(1).map((h) => h.n)).toEqual(
      Array.from({ length: KEPT_FINGERPRINTS - 1 }, (_, i) => last - KEPT_FINGERPRINTS + 2 + i),
    );
  });

  it('leaves a changed run claimed by a worker that died to the next worker, after the lease', async () => {
    const agent = await server.createAgent();
    const token = await server.userToken(`viewer-${newId()}`, agent.agentId);
    const trace = traceSnapshot({ status: 'completed', endedAt: at(1_000), eventCount: 1 });
    await post(agent, trace, [llmCallEvent(trace.id, 0)]);
    await fingerprinted(trace.id, token);
    await worker.stop(5_000);
    try {
      await post(agent, { ...trace, eventCount: 2 }, [llmCallEvent(trace.id, 1)]);
      // a worker takes it for 300 ms, then dies before fingerprinting it
      const claimed = await server.store.fingerprints.claimDue(100, 300);
      expect(claimed.map((d) => d.traceId)).toContain(trace.id);
      expect(
        (await server.store.fingerprints.claimDue(100, 300)).map((d) => d.traceId),
      ).not.toContain(trace.id);
    } finally {
      worker = startTestWorker(server.store);
    }
    await waitFor(async () => {
      const run = await read(trace.id, token);
      return run.events.length === 2 && run.trace.traceHash === traceHashOf(run.trace, run.events)
        ? run
        : undefined;
    }, 'the changed run to be fingerprinted by the next worker');
  });

  it("shows a run's fingerprints to its agent's members only, and a deleted run leaves none behind", async () => {
    const agent = await server.createAgent();
    const owner = await server.userToken(`owner-${newId()}`, agent.agentId, 'owner');
    const other = await server.createAgent();
    const outsider = await server.userToken(`outsider-${newId()}`, other.agentId, 'owner');
    const trace = traceSnapshot({ status: 'completed', endedAt: at(1_000), eventCount: 1 });
    await post(agent, trace, [llmCallEvent(trace.id, 0)]);
    await fingerprinted(trace.id, owner);
    expect((await history(trace.id, owner)).fingerprints).toHaveLength(1);
    const refused = await send(server.url, `/v1/traces/${trace.id}/fingerprints`, undefined, {
      token: outsider,
    });
    // the same answer as for a run that does not exist
    const none = await send(server.url, `/v1/traces/${newId()}/fingerprints`, undefined, {
      token: outsider,
    });
    expect(refused.status).toBe(404);
    expect(refused.body.detail).toBe(none.body.detail);
    const res = await send(server.url, `/v1/traces/${trace.id}`, undefined, {
      token: owner,
      method: 'DELETE',
    });
    expect(res.status, res.text).toBe(204);
    const gone = await send(server.url, `/v1/traces/${trace.id}/fingerprints`, undefined, {
      token: owner,
    });
    expect(gone.status).toBe(404);
    const [left] = await server.store.sql.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM trace_hashes WHERE trace_id = $1',
      [trace.id],
    );
    expect(left?.n).toBe(0);
  });
});
