import { gzipSync } from 'node:zlib';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { RunBatch } from '../fixtures/batches.js';
import { showcaseRuns } from '../fixtures/dashboard-runs.js';
import type { AnalysisWorker } from '../../src/analysis/analysis-worker.js';
import { startTestWorker } from '../harness/analysis.js';
import {
  describeWithBrowser,
  launchBrowser,
  SCREENSHOTS,
  seriousAccessibilityViolations,
  type DashboardBrowser,
} from '../harness/browser.js';
import { postBatch, send } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';

/*
 * Issue 16: the dashboard is small, and usable by everyone in both colour schemes: each page
 * checked by axe-core (WCAG 2.1 A/AA) in light and dark, with no serious or critical violation.
 */
/** What shows once each page has what it loads. */
const READY: Record<string, string> = {
  agents: 'tr[data-agent-id]',
  runs: 'tbody tr',
  run: '.markdown',
  failed: '.markdown',
  compare: 'h2.divergence',
};

describeWithBrowser('the dashboard is small and accessible', () => {
  let server: TestServer;
  let browser: DashboardBrowser;
  let agent: TestAgent;
  let token: string;
  let worker: AnalysisWorker | undefined;
  const paths: Record<string, string> = {};

  beforeAll(async () => {
    server = await startTestServer('pglite');
    browser = await launchBrowser();
    agent = await server.createAgent({ name: 'Treasury bot' });
    token = await server.userToken('grace', agent.agentId, 'owner');
    const runs = showcaseRuns();
    for (const run of runs)
      expect((await postBatch(server.url, agent.apiKey, run.body)).status).toBe(202);
    const [good, , failed] = runs as [RunBatch, RunBatch, RunBatch];
    // the finished runs' autopsies, written by the real analyzer, so the run pages show them
    worker = startTestWorker(server.store);
    Object.assign(paths, {
      agents: '/',
      runs: `/agents/${agent.agentId}`,
      run: `/runs/${runs[1]!.trace.id}`,
      failed: `/runs/${failed.trace.id}`,
      compare: `/compare?a=${good.trace.id}&b=${failed.trace.id}`,
    });
  });
  afterAll(async () => {
    await worker?.stop(5_000);
    await browser?.close();
    await server?.close();
  });

  it('weighs under 150 KB gzipped, all of it from this server', async () => {
    let total = 0;
    // the page and everything it links: all of it under /assets/ on this server
    const page = await send(server.url, '/');
    const linked = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(linked.length).toBeGreaterThanOrEqual(2);
    for (const path of linked) expect(path).toMatch(/^\/assets\//);
    for (const path of ['/', ...linked]) {
      const answer = await send(server.url, path);
      expect(answer.status, path).toBe(200);
      total += gzipSync(answer.text).byteLength;
    }
    console.log(`the dashboard: ${(total / 1024).toFixed(1)} KiB gzipped`);
    expect(total).toBeLessThan(150 * 1024);
  });

  for (const scheme of ['light', 'dark'] as const)
    it(`has no serious accessibility violation on any page, ${scheme}`, async () => {
      const { page } = await browser.newPage({ colorScheme: scheme });
      await page.goto(`${server.url}/`);
      await page.getByRole('button', { name: 'Sign in' }).waitFor();
      const found: Record<string, string[]> = {
        'sign-in': await seriousAccessibilityViolations(page),
      };
      await page.screenshot({ path: join(SCREENSHOTS, `sign-in-${scheme}.png`) });
      for (const [name, path] of Object.entries(paths)) {
        await page.goto(`${server.url}${path}#token=${token}`);
        await page.locator(READY[name]!).first().waitFor();
        found[name] = await seriousAccessibilityViolations(page);
        await page.screenshot({ path: join(SCREENSHOTS, `${name}-${scheme}.png`), fullPage: true });
      }
      expect(found).toEqual({
        'sign-in': [],
        agents: [],
        runs: [],
        run: [],
        failed: [],
        compare: [],
      });
    });
});
