import type { Trace } from '@flightlog/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEngines } from '../harness/engines.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { at, newId, traceSnapshot } from '../fixtures/batches.js';
import { decodeCursor, type TraceFilters } from '../../src/store/trace-store.js';

interface Page {
  traces: Trace[];
  nextCursor: string | null;
  searchedTo: string | null;
}

describeEngines('runs list filters and search [%s]', (engine) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(engine);
  });
  afterAll(() => server.close());

  const listPage = (agentId: string, token: string, query: string) =>
    send(server.url, `/v1/agents/${agentId}/traces${query}`, undefined, { token });

  async function agentWithOwner(): Promise<{ agent: TestAgent; owner: string }> {
    const agent = await server.createAgent();
    return { agent, owner: await server.userToken(`owner-${newId()}`, agent.agentId, 'owner') };
  }

  /** Stores the traces in one batch (distinct trace ids: one statement). */
  async function ingest(agent: TestAgent, traces: Trace[]): Promise<void> {
    const res = await postBatch(server.url, agent.apiKey, {
      batchId: newId(),
      items: traces.map((trace) => ({ trace, events: [] })),
    });
    expect(res.status).toBe(202);
  }

  /** The ids of every page of a filtered walk, in order, asserting each page's size. */
  async function walkIds(agentId: string, token: string, query: string): Promise<string[]> {
    const ids: string[] = [];
    let cursor: string | null = null;
    for (let pages = 0; ; pages++) {
      expect(pages).toBeLessThan(50);
      const suffix: string = cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`;
      const res = await listPage(agentId, token, `?${query}${suffix}`);
      expect(res.status, res.text).toBe(200);
      const page = res.body as Page;
      ids.push(...page.traces.map((t) => t.id));
      cursor = page.nextCursor;
      if (cursor === null) break;
    }
    return ids;
  }

  const idsNewestFirst = (traces: Trace[]) =>
    [...traces]
      .sort((a, b) => b.startedAt.localeCompare(a.startedAt) || (a.id < b.id ? 1 : -1))
      .map((t) => t.id);

  const finished = (status: 'completed' | 'errored' | 'timeout', ms: number) => ({
    status,
    endedAt: at(ms + 500),
    durationMs: 500,
  });

  describe('tag', () => {
    it('lists the runs whose tags include the tag exactly, across pages', async () => {
      const { agent, owner } = await agentWithOwner();
      const tagged = Array.from({ length: 5 }, (_, i) =>
        traceSnapshot({ startedAt: at(i * 1_000), tags: ['swap', `n${i}`] }),
      );
      const others = [
        traceSnapshot({ startedAt: at(500), tags: ['swapper'] }),
        traceSnapshot({ startedAt: at(1_500), tags: ['Swap'] }),
        traceSnapshot({ startedAt: at(2_500), tags: [] }),
      ];
      await ingest(agent, [...tagged, ...others]);
      expect(await walkIds(agent.agentId, owner, 'tag=swap&limit=2')).toEqual(
        idsNewestFirst(tagged),
      );
      const one = await listPage(agent.agentId, owner, '?tag=n3');
      expect(one.body.traces.map((t: Trace) => t.id)).toEqual([tagged[3]?.id]);
      const none = await listPage(agent.agentId, owner, '?tag=missing');
      expect(none.body).toEqual({ traces: [], nextCursor: null, searchedTo: null });
    });
  });

  describe('from / to', () => {
    it('bounds startedAt with from inclusive and to exclusive', async () => {
      const { agent, owner } = await agentWithOwner();
      const traces = Array.from({ length: 6 }, (_, i) =>
        traceSnapshot({ startedAt: at(i * 60_000) }),
      );
      await ingest(agent, traces);
      const window = `from=${at(60_000)}&to=${at(240_000)}`;
      expect(await walkIds(agent.agentId, owner, `${window}&limit=2`)).toEqual(
        idsNewestFirst(traces.slice(1, 4)),
      );
      // other spellings of the same instants (an offset, no fraction) bound the same way
      const offset = `from=${encodeURIComponent('2026-11-01T13:01:00+01:00')}`;
      expect(await walkIds(agent.agentId, owner, offset)).toEqual(idsNewestFirst(traces.slice(1)));
      expect(await walkIds(agent.agentId, owner, `to=2026-11-01T12:01:00Z`)).toEqual([
        traces[0]?.id,
      ]);
      expect(await walkIds(agent.agentId, owner, `from=${at(0)}&to=${at(0)}`)).toEqual([]);
    });
  });

  describe('q', () => {
    it('finds a substring of the input, output or error, whatever its case, and nothing else', async () => {
      const { agent, owner } = await agentWithOwner();
      const input = traceSnapshot({ startedAt: at(1_000), inputSummary: 'Swap 1 SOL for USDC' });
      const output = traceSnapshot({
        startedAt: at(2_000),
        inputSummary: 'Quote a price',
        ...finished('completed', 2_000),
        outputSummary: 'Got 142.17 usdc back',
      });
      const error = traceSnapshot({
        startedAt: at(3_000),
        inputSummary: 'Pay the invoice',
        ...finished('errored', 3_000),
        errorMessage: 'RPC timeout while sending the USDC transfer',
      });
      const unrelated = traceSnapshot({
        startedAt: at(4_000),
        inputSummary: 'Summarise the news',
        tags: ['usdc'],
      });
      await ingest(agent, [input, output, error, unrelated]);
      for (const q of ['usdc', 'USDC', 'UsDc']) {
        const res = await listPage(agent.agentId, owner, `?q=${q}`);
        expect(res.status).toBe(200);
        expect(res.body.traces.map((t: Trace) => t.id)).toEqual([error.id, output.id, input.id]);
      }
      const middle = await listPage(agent.agentId, owner, `?q=${encodeURIComponent('1 sol f')}`);
      expect(middle.body.traces.map((t: Trace) => t.id)).toEqual([input.id]);
      const none = await listPage(agent.agentId, owner, '?q=eur');
      expect(none.body.traces).toEqual([]);
      const empty = await listPage(agent.agentId, owner, '?q=');
      expect(empty.body.traces).toHaveLength(4);
    });

    it('takes %, _ and \\ literally, and matches accented letters in either case', async () => {
      const { agent, owner } = await agentWithOwner();
      const percent = traceSnapshot({ startedAt: at(1_000), inputSummary: 'Raise fees by 5%' });
      const five = traceSnapshot({ startedAt: at(2_000), inputSummary: 'Raise fees by 50 bps' });
      const underscore = traceSnapshot({ startedAt: at(3_000), inputSummary: 'call get_quote' });
      const dash = traceSnapshot({ startedAt: at(4_000), inputSummary: 'call get-quote' });
      const slash = traceSnapshot({ startedAt: at(5_000), inputSummary: 'path C:\\tmp\\x' });
      const accent = traceSnapshot({ startedAt: at(6_000), inputSummary: 'Réserver un Hôtel' });
      await ingest(agent, [percent, five, underscore, dash, slash, accent]);
      const search = async (q: string) =>
        (await listPage(agent.agentId, owner, `?q=${encodeURIComponent(q)}`)).body.traces.map(
          (t: Trace) => t.id,
        );
      expect(await search('5%')).toEqual([percent.id]);
      expect(await search('get_quote')).toEqual([underscore.id]);
      expect(await search('C:\\tmp')).toEqual([slash.id]);
      expect(await search('%')).toEqual([percent.id]);
      expect(await search('HÔTEL')).toEqual([accent.id]);
      expect(await search('réserver')).toEqual([accent.id]);
    });

    it("searches only the agent's own runs", async () => {
      const mine = await agentWithOwner();
      const theirs = await agentWithOwner();
      const own = traceSnapshot({ inputSummary: 'needle in my run' });
      await ingest(mine.agent, [own]);
      await ingest(theirs.agent, [traceSnapshot({ inputSummary: 'needle in their run' })]);
      const res = await listPage(mine.agent.agentId, mine.owner, '?q=needle');
      expect(res.body.traces.map((t: Trace) => t.id)).toEqual([own.id]);
    });
  });

  describe('filters together', () => {
    it('combine with each other, with status and with cursor paging: each match once, none missed', async () => {
      const { agent, owner } = await agentWithOwner();
      const statuses = ['completed', 'errored', 'timeout'] as const;
      const traces: Trace[] = [];
      for (let i = 0; i < 40; i++) {
        const ms = Math.floor(i / 2) * 1_000; // pairs share a startedAt: ties broken by id
        traces.push(
          traceSnapshot({
            startedAt: at(ms),
            ...finished(statuses[i % 3] as (typeof statuses)[number], ms),
            tags: i % 2 === 0 ? ['prod', 'swap'] : ['dev'],
            inputSummary: i % 4 < 2 ? `Swap ${i} SOL` : `Bridge ${i} ETH`,
            errorMessage: i % 5 === 0 ? 'slippage too high on swap' : null,
          }),
        );
      }
      await ingest(agent, traces);
      const from = at(3_000);
      const to = at(17_000);
      const expected = traces.filter(
        (t) =>
          t.status === 'completed' &&
          t.tags.includes('prod') &&
          t.startedAt >= from &&
          t.startedAt < to &&
          [t.inputSummary, t.outputSummary, t.errorMessage].some((s) =>
            s?.toLowerCase().includes('swap'),
          ),
      );
      expect(expected.length).toBeGreaterThan(2);
      const query = `status=completed&tag=prod&from=${from}&to=${to}&q=SWAP`;
      for (const limit of [1, 2, 3, 200]) {
        const ids = await walkIds(agent.agentId, owner, `${query}&limit=${limit}`);
        expect(ids, `limit=${limit}`).toEqual(idsNewestFirst(expected));
      }
      const slipped = traces.filter((t) => t.errorMessage !== null && t.tags.includes('prod'));
      expect(slipped.length).toBeGreaterThan(2);
      expect(await walkIds(agent.agentId, owner, 'q=slippage&tag=prod&limit=2')).toEqual(
        idsNewestFirst(slipped),
      );
    });
  });

  describe('a filtered page reads a bounded window of runs, in time order', () => {
    // The store reads at most SCAN_ROWS runs (and SCAN_BYTES of what the filters test) per
    // filtered page; small bounds make windows, partial pages and their seams happen on a few runs.
    it('gives the same walk whatever the bounds, for matches among the newest, the oldest or spread', async () => {
      const { agent } = await agentWithOwner();
      const traces = Array.from({ length: 30 }, (_, i) =>
        traceSnapshot({
          startedAt: at(Math.floor(i / 3) * 1_000), // threes share a startedAt
          tags: [i >= 24 ? 'newest' : i < 6 ? 'oldest' : 'middle', i % 4 === 0 ? 'four' : 'x'],
          inputSummary: `run ${i} ${i < 6 ? 'Legacy gateway' : 'current path'}${i % 9 === 0 ? ' 5%_off' : ''}`,
          ...(i % 7 === 0 ? finished('errored', i * 1_000) : {}),
        }),
      );
      await ingest(agent, traces);
      const cases: [TraceFilters, (t: Trace) => boolean][] = [
        [{ tag: 'newest' }, (t) => t.tags.includes('newest')],
        [{ tag: 'oldest' }, (t) => t.tags.includes('oldest')],
        [{ tag: 'four' }, (t) => t.tags.includes('four')],
        [{ text: 'legacy GATEWAY' }, (t) => t.inputSummary.includes('Legacy gateway')],
        [{ text: 'run 1' }, (t) => t.inputSummary.startsWith('run 1')],
        // no three letters or digits in a row: no trigram index could serve these
        [{ text: 'N 2' }, (t) => t.inputSummary.startsWith('run 2')],
        [{ text: '%_' }, (t) => t.inputSummary.includes('%_')],
        [{ text: '%_%_%_' }, () => false],
        [
          { text: 'path', tag: 'four', status: 'errored' },
          (t) =>
            t.inputSummary.includes('path') && t.tags.includes('four') && t.status === 'errored',
        ],
        [
          { tag: 'x', from: at(2_000), to: at(8_000) },
          (t) => t.tags.includes('x') && t.startedAt >= at(2_000) && t.startedAt < at(8_000),
        ],
        [
          { text: '_', status: 'errored', from: at(1_000) },
          (t) => t.inputSummary.includes('_') && t.status === 'errored' && t.startedAt >= at(1_000),
        ],
        [{ tag: 'none' }, () => false],
      ];
      const bounds: { scanRows: number; scanBytes: number }[] = [
        ...[1, 3, 7, 10_000].map((scanRows) => ({ scanRows, scanBytes: 1 << 30 })),
        // a byte budget smaller than any run still reads one run a page; others a few runs
        ...[1, 100].map((scanBytes) => ({ scanRows: 10_000, scanBytes })),
      ];
      for (const [filters, keep] of cases) {
        const expected = idsNewestFirst(traces.filter(keep));
        for (const bound of bounds)
          for (const limit of [1, 2, 50]) {
            const ids: string[] = [];
            let after: [string, string] | undefined;
            for (let pages = 0; ; pages++) {
              expect(pages).toBeLessThan(70);
              const page = await server.store.traces.listTraces(agent.agentId, {
                ...filters,
                limit,
                ...bound,
                ...(after ? { after } : {}),
              });
              expect(page.traces.length).toBeLessThanOrEqual(limit);
              // a page ended by the bound says so, and only such a page
              if (page.nextCursor !== null && page.traces.length < limit)
                expect(page.searchedTo).not.toBeNull();
              if (page.searchedTo !== null) expect(page.nextCursor).not.toBeNull();
              ids.push(...page.traces.map((t) => t.id));
              if (page.nextCursor === null) break;
              after = decodeCursor(page.nextCursor);
            }
            const label = `${JSON.stringify(filters)} ${JSON.stringify(bound)} limit ${limit}`;
            expect(ids, label).toEqual(expected);
          }
      }
    }, 120_000); // thousands of page reads: past 30 s on a machine at load 10
  });

  describe('bad values', () => {
    it.each([
      ['from=yesterday', '/querystring/from'],
      ['from=2026-11-01', '/querystring/from'],
      ['from=2026-02-30T00:00:00Z', '/querystring/from'],
      ['to=2026-11-01T25:00:00Z', '/querystring/to'],
      [`from=${at(2_000)}&to=${at(1_000)}`, '/querystring/to'],
      [`q=${'x'.repeat(201)}`, '/querystring/q'],
      ['q=a%00b', '/querystring/q'],
      [`tag=${'t'.repeat(257)}`, '/querystring/tag'],
      ['tag=a%00b', '/querystring/tag'],
    ])('answers 400 problem+json to %s, naming %s', async (query, pointer) => {
      const { agent, owner } = await agentWithOwner();
      const res = await listPage(agent.agentId, owner, `?${query}`);
      expect(isProblem(res, 400), res.text).toBe(true);
      expect(res.body.errors.map((e: { pointer: string }) => e.pointer)).toEqual([pointer]);
    });

    it('accepts a q of exactly 200 characters', async () => {
      const { agent, owner } = await agentWithOwner();
      const long = 'é'.repeat(200);
      await ingest(agent, [traceSnapshot({ inputSummary: `before ${long} after` })]);
      const res = await listPage(agent.agentId, owner, `?q=${encodeURIComponent(long)}`);
      expect(res.status, res.text).toBe(200);
      expect(res.body.traces).toHaveLength(1);
    });

    it('answers 404 to a user with no role, with or without filters', async () => {
      const { agent } = await agentWithOwner();
      await ingest(agent, [traceSnapshot({ inputSummary: 'secret plan', tags: ['x'] })]);
      const stranger = await server.userToken(`stranger-${newId()}`);
      const res = await listPage(agent.agentId, stranger, '?q=secret&tag=x');
      expect(isProblem(res, 404)).toBe(true);
      expect(res.text).not.toContain('secret plan');
    });
  });

  // migration 006's indexes: the list no longer reads them (a search page reads a bounded
  // window in time order, see runs-search-bounds.test.ts), but the migration still makes them
  it('keeps the trigram and tag indexes of migration 006 on this engine', async () => {
    const rows = await server.store.sql.query<{ indexname: string }>(
      `SELECT indexname FROM pg_indexes
       WHERE tablename = 'traces' AND indexname IN ('traces_text_trgm_idx', 'traces_tags_idx')
         AND schemaname = current_schema()
       ORDER BY indexname`,
    );
    expect(rows.map((r) => r.indexname)).toEqual(['traces_tags_idx', 'traces_text_trgm_idx']);
  });
});
