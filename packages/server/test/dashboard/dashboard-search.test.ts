import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { newId, traceSnapshot } from '../fixtures/batches.js';
import {
  launchBrowser,
  SCREENSHOTS,
  describeWithBrowser,
  type DashboardBrowser,
} from '../harness/browser.js';
import { describeEngines } from '../harness/engines.js';
import { postBatch } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';

/*
 * Issue 16: an agent with a few thousand runs, as its user narrows them down: the chart of the
 * last 24 hours from the server's aggregates, a text search, status, tag and time filters, each
 * in the page's address.
 */
const RUNS = 3000;
const HOUR = 3_600_000;

describeWithBrowser('the runs list of an agent with a few thousand runs', () => {
  describeEngines('[%s]', (engine) => {
    let server: TestServer;
    let browser: DashboardBrowser;
    let agent: TestAgent;
    let token: string;
    const now = Date.now();

    beforeAll(async () => {
      server = await startTestServer(engine);
      browser = await launchBrowser();
      agent = await server.createAgent({ name: 'Busy bot' });
      token = await server.userToken('heidi', agent.agentId, 'viewer');
      // 3,000 runs over the last 20 hours: every 10th errored with a slippage error, every
      // 7th tagged `vip`, one run a day ago (outside the 24 h chart)
      for (let from = 0; from < RUNS; from += 1000) {
        const items = Array.from({ length: 1000 }, (_, k) => {
          const i = from + k;
          const errored = i % 10 === 0;
          return {
            trace: traceSnapshot({
              status: errored ? 'errored' : 'completed',
              startedAt: new Date(now - 20 * HOUR + i * 20_000).toISOString(),
              durationMs: 1000 + (i % 100) * 10,
              inputSummary: `Swap run ${i}`,
              errorMessage: errored ? `Quote rejected: slippage ${i}` : null,
              tags: i % 7 === 0 ? ['prod', 'vip'] : ['prod'],
              totalCostUsd: '0.001',
              totalLamports: '1000',
            }),
            events: [],
          };
        });
        const answer = await postBatch(server.url, agent.apiKey, { batchId: newId(), items });
        expect(answer.status, answer.text).toBe(202);
      }
      const old = traceSnapshot({
        status: 'completed',
        startedAt: new Date(now - 30 * HOUR).toISOString(),
        inputSummary: 'Yesterday',
      });
      expect(
        (
          await postBatch(server.url, agent.apiKey, {
            batchId: newId(),
            items: [{ trace: old, events: [] }],
          })
        ).status,
      ).toBe(202);
    }, 120_000);
    afterAll(async () => {
      await browser?.close();
      await server?.close();
    });

    it('charts the last 24 hours from the server, and narrows the list by search, status, tag and time', async () => {
      const { page } = await browser.newPage();
      await page.goto(`${server.url}/agents/${agent.agentId}#token=${token}`);
      // the chart's totals: the window's runs, not the one from 30 h ago
      const totals = page.locator('dl.totals');
      await totals.waitFor();
      expect(await totals.getAttribute('data-runs')).toBe(String(RUNS));
      expect(await totals.textContent()).toContain('10.0 %');
      await page.locator('.chart canvas').first().waitFor();
      await page.screenshot({ path: join(SCREENSHOTS, `runs-chart-${engine}.png`) });

      // a text search over error messages, in the address, and back after a reload
      await page.getByRole('searchbox').fill('slippage 2990');
      await page.locator('tbody tr').first().waitFor();
      await expect.poll(() => page.locator('tbody tr').count()).toBe(1);
      expect(await page.locator('tbody tr').first().textContent()).toContain('Swap run 2990');
      expect(new URL(page.url()).searchParams.get('q')).toBe('slippage 2990');
      await page.reload();
      await expect.poll(() => page.locator('tbody tr').count()).toBe(1);

      // status and tag together: errored runs tagged vip (i % 70 === 0), newest first
      await page.goto(
        `${server.url}/agents/${agent.agentId}?status=errored&tag=vip#token=${token}`,
      );
      await page.locator('tbody tr').first().waitFor();
      await expect.poll(() => page.locator('tbody tr').count()).toBe(43);
      expect(await page.locator('tbody tr').first().textContent()).toContain('Swap run 2940');

      // a time range: the first two hours of the 20 (runs 0–359)
      const from = new Date(now - 20 * HOUR).toISOString();
      const to = new Date(now - 18 * HOUR).toISOString();
      await page.goto(
        `${server.url}/agents/${agent.agentId}?from=${from}&to=${to}&q=run%2035#token=${token}`,
      );
      await page.locator('tbody tr').first().waitFor();
      // "run 35" within the range: 35 and 350–359
      await expect.poll(() => page.locator('tbody tr').count()).toBe(11);
    });
  });
});
