import {
  TRACE_HASH_VERSION,
  canonicalJson,
  checkTraceHash,
  traceHashOf,
  type Event,
  type Trace,
} from '@flightlog/protocol';
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { at, llmCallEvent, traceSnapshot } from '../fixtures/batches.js';

/** A finished run of three events, carrying its own fingerprint. */
function fingerprintedRun(): { trace: Trace; events: Event[] } {
  const trace = traceSnapshot({ status: 'completed', endedAt: at(3_000), eventCount: 3 });
  const events = [0, 1, 2].map((sequence) => llmCallEvent(trace.id, sequence));
  return { trace: { ...trace, traceHash: traceHashOf(trace, events) }, events };
}

describe('canonical JSON (RFC 8785)', () => {
  it('sorts keys by UTF-16 code units at every depth and writes no white space', () => {
    expect(canonicalJson({ b: 1, a: { d: [true, null], c: 'x' }, '€': 0, '\u00e9': 0, A: 0 })).toBe(
      '{"A":0,"a":{"c":"x","d":[true,null]},"b":1,"é":0,"€":0}',
    );
  });

  it('writes numbers and strings as ECMAScript does (the RFC 8785 rules)', () => {
    expect(canonicalJson([1e21, 1e-7, -0, 0.1, 1 / 3, 4.5, 2 ** 53])).toBe(
      '[1e+21,1e-7,0,0.1,0.3333333333333333,4.5,9007199254740992]',
    );
    expect(canonicalJson('quote " back \\ nul \u0000 line\n é 😀')).toBe(
      '"quote \\" back \\\\ nul \\u0000 line\\n é 😀"',
    );
  });

  it('refuses what JSON cannot hold', () => {
    expect(() => canonicalJson(Number.NaN)).toThrow(/non-finite/);
    expect(() => canonicalJson({ f: () => 1 })).toThrow(/function/);
  });
});

describe('traceHash, canonical form 1', () => {
  it('is SHA-256 of the version line, the run line and one line per event', () => {
    const { trace, events } = fingerprintedRun();
    const runLine = canonicalJson({
      id: trace.id,
      agentId: trace.agentId,
      status: trace.status,
      startedAt: trace.startedAt,
      endedAt: trace.endedAt,
      durationMs: trace.durationMs,
      inputSummary: trace.inputSummary,
      outputSummary: trace.outputSummary,
      errorMessage: trace.errorMessage,
      tags: trace.tags,
      eventCount: trace.eventCount,
      totalTokens: trace.totalTokens,
      totalCostUsd: trace.totalCostUsd,
      totalLamports: trace.totalLamports,
      chainTxCount: trace.chainTxCount,
      toolsCalled: trace.toolsCalled,
    });
    const eventLines = events.map((e) => `${canonicalJson(e)}\n`).join('');
    const expected = createHash('sha256')
      .update(`${TRACE_HASH_VERSION}\n${runLine}\n${eventLines}`)
      .digest('hex');
    expect(trace.traceHash).toBe(expected);
    expect(expected).toMatch(/^[0-9a-f]{64}$/);
  });

  it('does not depend on key order, on absent versus null, or on the fields the server sets later', () => {
    const { trace, events } = fingerprintedRun();
    const reordered = Object.fromEntries(Object.entries(trace).reverse()) as Trace;
    const { outputSummary: _left, ...absent } = trace;
    void _left;
    const later = {
      ...trace,
      merkleProof: '["00"]',
      anchorSignature: 'sig',
      anchorSlot: '7',
      shareToken: 'tok',
    };
    const hash = trace.traceHash;
    expect(traceHashOf(reordered, events)).toBe(hash);
    expect(traceHashOf(later, events)).toBe(hash);
    // an absent field counts as null (the run's outputSummary is null)
    expect(trace.outputSummary).toBeNull();
    expect(traceHashOf(absent as Trace, events)).toBe(hash);
    expect(traceHashOf({ ...trace, endedAt: null }, events)).not.toBe(hash);
  });

  it('checks a run: verified, and the step that fails for a changed, reordered, foreign or missing event', () => {
    const { trace, events } = fingerprintedRun();
    expect(checkTraceHash(trace, events)).toEqual({ kind: 'verified', traceHash: trace.traceHash });

    const [e0, e1, e2] = events as [Event, Event, Event];
    const changed = { ...e1, payload: { ...e1.payload, costUsd: 0.0002 } };
    expect(checkTraceHash(trace, [e0, changed, e2])).toMatchObject({ kind: 'mismatch' });
    expect(checkTraceHash(trace, [e0, e2, e1])).toEqual({
      kind: 'out-of-order',
      index: 2,
      eventId: e1.id,
    });
    // swapping two events' sequences is a different run, though listed in order
    const swapped = [e0, { ...e2, sequence: 1 }, { ...e1, sequence: 2 }];
    expect(checkTraceHash(trace, swapped)).toMatchObject({ kind: 'mismatch' });
    expect(checkTraceHash(trace, [e0, e1])).toMatchObject({ kind: 'mismatch' });
    const foreign = llmCallEvent('01JOTHERTRACE0000000000000', 3);
    expect(checkTraceHash(trace, [...events, foreign])).toEqual({
      kind: 'foreign-event',
      index: 3,
      eventId: foreign.id,
    });
    expect(checkTraceHash({ ...trace, status: 'errored' }, events)).toMatchObject({
      kind: 'mismatch',
    });
    expect(checkTraceHash({ ...trace, traceHash: null }, events)).toEqual({
      kind: 'no-fingerprint',
      computed: trace.traceHash,
    });
  });
});
