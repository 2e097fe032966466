import type { Trace } from '@flightlog/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEngines } from '../harness/engines.js';
import { send } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import type { SqlClient } from '../../src/store/sql-client.js';
import { SCAN_BYTES, SCAN_ROWS, TraceStore } from '../../src/store/trace-store.js';

/*
 * Whatever a user searches for, one page of the runs list does bounded work: at most SCAN_ROWS
 * of the agent's runs (in time order) and SCAN_BYTES of the text or tags it tests. A search that
 * finds too few runs within that answers the hits it has with a cursor at the edge of what it
 * read (`searchedTo`), and the walk goes on from there: complete, in order, each run once.
 *
 * Asserted structurally (where each page stopped, how many pages a walk takes), never as a time.
 */
const RUNS = 50_000;
const T0 = Date.parse('2026-11-01T12:00:00.000Z');
/** The startedAt of an agent's i-th newest bulk run (1-based): one a second, back from T0. */
const startOf = (i: number): string => new Date(T0 - i * 1_000).toISOString();
/** The runs with "5%_off" in their input: one among the newest, one mid-way, one near the oldest. */
const MARKED = [3, 17_000, 49_999];

interface Page {
  traces: Trace[];
  nextCursor: string | null;
  searchedTo: string | null;
}

describeEngines('a runs search does bounded work per page [%s]', (engine) => {
  let server: TestServer;
  let heavy: TestAgent;
  let wide: TestAgent;
  let token: string;
  /** Bytes of text one run of `wide` holds (input, output and error alike, ASCII). */
  const WIDE_TEXT = 60_000;
  const WIDE_RUNS = 40;

  beforeAll(async () => {
    server = await startTestServer(engine);
    heavy = await server.createAgent({ name: 'heavy' });
    wide = await server.createAgent({ name: 'wide' });
    token = await server.userToken(`searcher-${heavy.agentId}`, heavy.agentId, 'viewer');
    await server.userToken(`searcher-${heavy.agentId}`, wide.agentId, 'viewer');
    // written directly, in one statement: 50,000 runs through the ingest API would only slow this
    await server.store.sql.query(
      `INSERT INTO traces (id, agent_id, status, started_at, ended_at, duration_ms,
         input_summary, output_summary, error_message, tags, event_count, total_tokens,
         total_cost_usd, total_lamports, chain_tx_count, tools_called)
       SELECT $1 || '-' || lpad(i::text, 6, '0'), $1,
         CASE WHEN i % 20 = 0 THEN 'errored' ELSE 'completed' END,
         $2::timestamptz - make_interval(secs => i),
         $2::timestamptz - make_interval(secs => i) + interval '2 s', 2000,
         'Swap ' || i || ' SOL for USDC via orca' ||
           CASE WHEN i = ANY ($4::int[]) THEN ' at 5%_off' ELSE '' END,
         'Got USDC back',
         CASE WHEN i % 20 = 0 THEN 'slippage too high' END,
         ARRAY[CASE WHEN i % 2 = 0 THEN 'prod' ELSE 'dev' END], 12, 3400, 0.0013, 5000, 1,
         ARRAY['jupiter.quote']
       FROM generate_series(1, $3::int) AS i`,
      [heavy.agentId, new Date(T0).toISOString(), RUNS, MARKED],
    );
    // a few runs whose texts are as long as the protocol allows; the oldest one says "needle"
    await server.store.sql.query(
      `INSERT INTO traces (id, agent_id, status, started_at, input_summary, output_summary,
         error_message, tags, event_count, total_tokens, total_cost_usd, total_lamports,
         chain_tx_count, tools_called)
       SELECT $1 || '-' || lpad(i::text, 6, '0'), $1, 'errored',
         $2::timestamptz - make_interval(secs => i), repeat('x', $4), repeat('y', $4),
         CASE WHEN i = $3 THEN repeat('z', $4 - 6) || 'needle' ELSE repeat('z', $4) END,
         '{}', 0, 0, 0, 0, 0, '{}'
       FROM generate_series(1, $3::int) AS i`,
      [wide.agentId, new Date(T0).toISOString(), WIDE_RUNS, WIDE_TEXT],
    );
    await server.store.sql.query('ANALYZE traces');
  }, 180_000);
  afterAll(() => server?.close());

  const list = async (agentId: string, query: string): Promise<Page> => {
    const res = await send(server.url, `/v1/agents/${agentId}/traces?${query}`, undefined, {
      token,
    });
    expect(res.status, res.text).toBe(200);
    return res.body as Page;
  };

  /** Every page of a walk, following nextCursor until it is null. */
  async function walk(agentId: string, query: string): Promise<Page[]> {
    const pages: Page[] = [];
    let cursor: string | null = null;
    do {
      expect(pages.length).toBeLessThan(100);
      const suffix: string = cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`;
      const page = await list(agentId, `${query}${suffix}`);
      pages.push(page);
      cursor = page.nextCursor;
    } while (cursor !== null);
    return pages;
  }

  const ids = (pages: Page[]) => pages.flatMap((page) => page.traces.map((t) => t.id));
  const heavyId = (i: number) => `${heavy.agentId}-${String(i).padStart(6, '0')}`;

  describe('a search that finds nothing among 50,000 runs', () => {
    it.each([
      ['q=%25_%25_%25_', 'no trigram: % and _ are plain characters'],
      ['q=ok', 'two letters'],
      ['q=!!', 'no letter at all'],
      ['q=usdc%20usdc', 'every trigram on every run, the text on none'],
      ['tag=absent', 'a tag no run has'],
      ['tag=prod&q=%25_%25_%25_', 'a tag and a text'],
    ])('%s (%s) reads SCAN_ROWS runs a page, then hands on a cursor', async (query) => {
      const first = await list(heavy.agentId, `${query}&limit=50`);
      expect(first.traces).toEqual([]);
      // the page stopped at its bound: the SCAN_ROWS-th newest run, not the agent's oldest
      expect(first.searchedTo).toBe(startOf(SCAN_ROWS));
      expect(first.nextCursor).toEqual(expect.any(String));

      const pages = await walk(heavy.agentId, `${query}&limit=50`);
      expect(pages).toHaveLength(Math.ceil(RUNS / SCAN_ROWS));
      expect(ids(pages)).toEqual([]);
      expect(pages.slice(0, -1).map((page) => page.searchedTo)).toEqual(
        pages.slice(0, -1).map((_, k) => startOf((k + 1) * SCAN_ROWS)),
      );
      // the last page read to the oldest run: nothing left, nothing to say about an edge
      expect(pages.at(-1)).toEqual({ traces: [], nextCursor: null, searchedTo: null });
    });

    it('counts only the runs the index narrows to: status and from/to read no window at all', async () => {
      // 2,500 errored runs: one window holds them all
      const errored = await list(heavy.agentId, 'q=%25_%25_%25_&status=errored');
      expect(errored).toEqual({ traces: [], nextCursor: null, searchedTo: null });
      const range = await list(
        heavy.agentId,
        `q=%25_%25_%25_&from=${startOf(40_000)}&to=${startOf(35_000)}`,
      );
      expect(range).toEqual({ traces: [], nextCursor: null, searchedTo: null });
    });

    it('stops at SCAN_BYTES of text too, whatever the number of runs', async () => {
      const perRun = 3 * WIDE_TEXT;
      const window = Math.ceil(SCAN_BYTES / perRun);
      expect(window).toBeLessThan(WIDE_RUNS);
      const first = await list(wide.agentId, 'q=needle');
      expect(first.traces).toEqual([]);
      expect(first.searchedTo).toBe(startOf(window));
      const pages = await walk(wide.agentId, 'q=needle');
      expect(pages).toHaveLength(Math.ceil(WIDE_RUNS / window));
      expect(ids(pages)).toEqual([`${wide.agentId}-${String(WIDE_RUNS).padStart(6, '0')}`]);
    });
  });

  describe('following the cursors to the end', () => {
    /** The oracle: the same filters as plain SQL over the whole agent, newest first. */
    async function expected(where: string, params: unknown[]): Promise<string[]> {
      const rows = await server.store.sql.query<{ id: string }>(
        `SELECT id FROM traces WHERE agent_id = $1 AND ${where}
         ORDER BY started_at DESC, id DESC`,
        [heavy.agentId, ...params],
      );
      return rows.map((row) => row.id);
    }
    const contains = (n: number) =>
      `(strpos(lower(input_summary), lower($${n})) > 0
        OR strpos(lower(coalesce(output_summary, '')), lower($${n})) > 0
        OR strpos(lower(coalesce(error_message, '')), lower($${n})) > 0)`;

    it('finds exactly the matching runs, in order, once each: a text no index can serve', async () => {
      const pages = await walk(heavy.agentId, 'q=%25_&limit=2');
      expect(ids(pages)).toEqual(MARKED.map(heavyId));
      expect(ids(pages)).toEqual(await expected(contains(2), ['%_']));
      // the first match is on the first page; later ones wait for their window
      expect(pages[0]?.traces.map((t) => t.id)).toEqual([heavyId(3)]);
      expect(pages[0]?.searchedTo).toBe(startOf(SCAN_ROWS));
    });

    it('with status, tag, from and to together, partial pages and full ones alike', async () => {
      const to = startOf(2);
      const marked = await walk(
        heavy.agentId,
        `q=5%25_OFF&tag=dev&status=completed&to=${to}&limit=1`,
      );
      expect(ids(marked)).toEqual([heavyId(3), heavyId(49_999)]);
      expect(ids(marked)).toEqual(
        await expected(
          `${contains(2)} AND 'dev' = ANY (tags) AND status = 'completed'
           AND started_at < $3::timestamptz`,
          ['5%_OFF', to],
        ),
      );

      const from = startOf(30_000);
      const until = startOf(5_000);
      const common = await walk(
        heavy.agentId,
        `q=usdc%20VIA&tag=prod&status=errored&from=${from}&to=${until}&limit=200`,
      );
      const want = await expected(
        `${contains(2)} AND 'prod' = ANY (tags) AND status = 'errored'
           AND started_at >= $3::timestamptz AND started_at < $4::timestamptz`,
        ['usdc VIA', from, until],
      );
      expect(want).toHaveLength(1_250);
      expect(ids(common)).toEqual(want);
      expect(new Set(ids(common)).size).toBe(want.length);
      // matches this common fill every page: none of them ends at the bound
      expect(common.map((page) => page.searchedTo)).toEqual(common.map(() => null));
    });

    it('leaves the plain list and full pages as they were: searchedTo null', async () => {
      const plain = await list(heavy.agentId, 'limit=50');
      expect(plain.traces).toHaveLength(50);
      expect(plain.searchedTo).toBeNull();
      const full = await list(heavy.agentId, 'q=usdc&limit=50');
      expect(full.traces.map((t) => t.id)).toEqual(
        Array.from({ length: 50 }, (_, k) => heavyId(k + 1)),
      );
      expect(full.searchedTo).toBeNull();
      expect(full.nextCursor).toEqual(expect.any(String));
    });
  });

  describe('several searches at once', () => {
    /** The real store's client, noting when each statement ends: the engine's order. */
    function noting(sql: SqlClient, ends: string[], onSearch: () => void): SqlClient {
      return {
        engine: sql.engine,
        async query<Row>(text: string, params?: readonly unknown[]): Promise<Row[]> {
          const kind = text.includes(' AS edge') ? 'search' : 'other';
          if (kind === 'search') onSearch();
          try {
            return await sql.query<Row>(text, params);
          } finally {
            ends.push(kind);
          }
        },
        transaction: (work) => sql.transaction(work),
        ping: () => sql.ping(),
        close: () => sql.close(),
      };
    }

    it.runIf(engine === 'pglite')(
      'keep at most one search ahead of anyone else on PGlite, which runs one statement at a time',
      async () => {
        const ends: string[] = [];
        let firstSearch!: () => void;
        const searching = new Promise<void>((resolve) => (firstSearch = resolve));
        const traces = new TraceStore(noting(server.store.sql, ends, () => firstSearch()));
        const searches = Array.from({ length: 4 }, () =>
          traces.listTraces(heavy.agentId, { text: '%_%_%_', limit: 50 }),
        );
        // another user's statement, sent while the first search runs and three more wait
        await searching;
        const other = server.store.sql
          .query('SELECT count(*) FROM agents')
          .then(() => ends.push('other'));
        await Promise.all([...searches, other]);
        expect(ends).toEqual(['search', 'other', 'search', 'search', 'search']);
      },
    );
  });
});
