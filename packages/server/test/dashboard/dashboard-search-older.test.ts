import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  launchBrowser,
  SCREENSHOTS,
  describeWithBrowser,
  seriousAccessibilityViolations,
  type DashboardBrowser,
} from '../harness/browser.js';
import { describeEngines } from '../harness/engines.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import { SCAN_ROWS } from '../../src/store/trace-store.js';

/*
 * A search of an agent with more runs than one page of a search reads (SCAN_ROWS): the first
 * page ends before it finds anything, and the runs page says how far back it looked instead of
 * "no runs match", with a button that searches on from there, until the search has read every
 * run.
 */
const RUNS = 2.5 * SCAN_ROWS;
/** The two runs the search finds: in the second window of SCAN_ROWS runs and in the third. */
const FOUND = [1.5 * SCAN_ROWS, 2.4 * SCAN_ROWS];

describeWithBrowser('searching older runs, one bounded page at a time', () => {
  describeEngines('[%s]', (engine) => {
    let server: TestServer;
    let browser: DashboardBrowser;
    let agent: TestAgent;
    let token: string;
    const newest = Date.now() - 60_000;
    const startOf = (i: number) => new Date(newest - i * 1_000).toISOString();

    beforeAll(async () => {
      server = await startTestServer(engine);
      browser = await launchBrowser();
      agent = await server.createAgent({ name: 'Busy bot' });
      token = await server.userToken('ivan', agent.agentId, 'viewer');
      // one a second back from a minute ago; written directly: the ingest API would only be slower
      await server.store.sql.query(
        `INSERT INTO traces (id, agent_id, status, started_at, ended_at, duration_ms,
           input_summary, tags, event_count, total_tokens, total_cost_usd, total_lamports,
           chain_tx_count, tools_called)
         SELECT $1 || '-' || lpad(i::text, 6, '0'), $1, 'completed',
           $2::timestamptz - make_interval(secs => i),
           $2::timestamptz - make_interval(secs => i) + interval '1 s', 1000,
           'Swap ' || i || ' SOL for USDC' ||
             CASE WHEN i = ANY ($4::int[]) THEN ' with promo 5%_off' ELSE '' END,
           '{prod}', 3, 1200, 0.001, 1000, 1, '{}'
         FROM generate_series(1, $3::int) AS i`,
        [agent.agentId, new Date(newest).toISOString(), RUNS, FOUND],
      );
      await server.store.sql.query('ANALYZE traces');
    }, 120_000);
    afterAll(async () => {
      await browser?.close();
      await server?.close();
    });

    it('says how far back it searched, and searches older runs on request, by pointer or keyboard', async () => {
      const { page, errors } = await browser.newPage();
      await page.goto(`${server.url}/agents/${agent.agentId}?q=5%25_#token=${token}`);
      const note = page.locator('#search-edge-note');
      const older = page.getByRole('button', { name: 'Search older' });

      // the first page read the newest SCAN_ROWS runs and found none: not "no runs match"
      await expect.poll(() => note.textContent()).toContain('No matching runs so far.');
      expect(await note.textContent()).toContain('Searched runs back to');
      expect(await note.locator('time').getAttribute('datetime')).toBe(startOf(SCAN_ROWS));
      expect(await page.getByText('No runs match these filters').count()).toBe(0);
      expect(await page.locator('tbody tr').count()).toBe(0);
      expect(await older.getAttribute('aria-describedby')).toBe('search-edge-note');
      expect(await seriousAccessibilityViolations(page)).toEqual([]);
      await page.screenshot({ path: join(SCREENSHOTS, `search-older-none-yet-${engine}.png`) });

      // one step on: the next window holds one match
      await older.click();
      await expect.poll(() => page.locator('tbody tr').count()).toBe(1);
      expect(await page.locator('tbody tr').first().textContent()).toContain(
        `Swap ${FOUND[0]} SOL`,
      );
      await expect.poll(() => note.textContent()).not.toContain('No matching runs so far');
      expect(await note.locator('time').getAttribute('datetime')).toBe(startOf(2 * SCAN_ROWS));
      await page.screenshot({
        path: join(SCREENSHOTS, `search-older-partial-${engine}.png`),
        fullPage: true,
      });

      // the keyboard alone: the button keeps focus and Enter reads the last window
      await older.focus();
      await page.keyboard.press('Enter');
      await expect.poll(() => page.locator('tbody tr').count()).toBe(2);
      expect(await page.locator('tbody tr').nth(1).textContent()).toContain(`Swap ${FOUND[1]} SOL`);
      // every run searched: nothing more to offer, nothing said about an edge
      await expect.poll(() => older.count()).toBe(0);
      expect(await note.count()).toBe(0);
      expect(await page.getByRole('button', { name: 'Older runs' }).count()).toBe(0);
      expect(errors).toEqual([]);
    });

    it('reads well in the dark scheme too, and ends with "no runs match" only when all were searched', async () => {
      const { page } = await browser.newPage({ colorScheme: 'dark' });
      // a text no run has: three windows of nothing, then the plain empty state
      await page.goto(`${server.url}/agents/${agent.agentId}?q=%25_%25_%25_#token=${token}`);
      const note = page.locator('#search-edge-note');
      await expect.poll(() => note.textContent()).toContain('No matching runs so far.');
      expect(await seriousAccessibilityViolations(page)).toEqual([]);
      await page.screenshot({
        path: join(SCREENSHOTS, `search-older-none-yet-dark-${engine}.png`),
      });
      const older = page.getByRole('button', { name: 'Search older' });
      await older.click();
      await expect
        .poll(() => note.locator('time').getAttribute('datetime'))
        .toBe(startOf(2 * SCAN_ROWS));
      expect(await note.textContent()).toContain('No matching runs so far.');
      await older.click();
      await page.getByText('No runs match these filters').waitFor();
      expect(await note.count()).toBe(0);
    });
  });
});
