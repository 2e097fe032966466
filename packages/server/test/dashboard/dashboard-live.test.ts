import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runBatch } from '../fixtures/batches.js';
import {
  describeWithBrowser,
  launchBrowser,
  SCREENSHOTS,
  type DashboardBrowser,
} from '../harness/browser.js';
import { postgresAvailable } from '../harness/engines.js';
import { postBatch, send } from '../harness/http.js';
import { startServedOnOwnRedis } from '../harness/redis-served.js';
import { TcpProxy } from '../harness/tcp-proxy.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';

/*
 * Issue 16: the runs list holds its agent's live stream through what happens to streams: a
 * connection cut under it (it resumes where it was, with Last-Event-ID: no gap, no duplicate
 * row), the live bus going away (a visible banner that clears when delivery resumes), and the
 * viewer's role taken away (the stream ends and the page says so).
 */
const rowIds = (page: import('playwright-core').Page) =>
  page
    .locator('tbody tr')
    .evaluateAll((rows) => rows.map((row) => row.getAttribute('data-trace-id')));

describeWithBrowser('the runs list live, through cuts, outages and revocation', () => {
  let browser: DashboardBrowser;
  beforeAll(async () => {
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
  });

  describe('in process', () => {
    let server: TestServer;
    let agent: TestAgent;
    let proxy: TcpProxy;
    beforeAll(async () => {
      server = await startTestServer('pglite');
      agent = await server.createAgent({ name: 'Cut bot' });
      proxy = new TcpProxy('127.0.0.1', Number(new URL(server.url).port));
      await proxy.start();
    });
    afterAll(async () => {
      await proxy?.close();
      await server?.close();
    });

    it('resumes after the connection is cut, with every run once and none missing', async () => {
      const token = await server.userToken('carol', agent.agentId, 'viewer');
      const first = runBatch({ trace: { inputSummary: 'before the cut' } });
      expect((await postBatch(server.url, agent.apiKey, first.body)).status).toBe(202);
      const { page } = await browser.newPage();
      const origin = `http://127.0.0.1:${proxy.port}`;
      await page.goto(`${origin}/agents/${agent.agentId}#token=${token}`);
      await page.locator(`tr[data-trace-id="${first.trace.id}"]`).waitFor();
      await page.locator('[data-live-state="live"]').waitFor();

      await proxy.cut();
      await page.locator('[data-live-state="interrupted"]').waitFor();
      await page.getByText('Live stream interrupted').waitFor();
      // stored while the page could not hear: posted straight to the server
      const missed = Array.from({ length: 3 }, (_, i) =>
        runBatch({ trace: { inputSummary: `during the cut ${i}` } }),
      );
      for (const batch of missed)
        expect((await postBatch(server.url, agent.apiKey, batch.body)).status).toBe(202);
      await proxy.restore();

      for (const batch of missed)
        await page.locator(`tr[data-trace-id="${batch.trace.id}"]`).waitFor({ timeout: 10_000 });
      await page.locator('[data-live-state="live"]').waitFor();
      expect(await page.getByText('Live stream interrupted').count()).toBe(0);
      const ids = await rowIds(page);
      expect(new Set(ids).size).toBe(ids.length);
      for (const id of [first.trace.id, ...missed.map((b) => b.trace.id)])
        expect(ids).toContain(id);
    });

    it('pauses: the list holds still and counts what arrived, then shows it on resume', async () => {
      const token = await server.userToken('dave', agent.agentId, 'viewer');
      const { page } = await browser.newPage();
      await page.goto(`${server.url}/agents/${agent.agentId}#token=${token}`);
      await page.locator('[data-live-state="live"]').waitFor();
      await page.getByRole('button', { name: 'Pause' }).click();
      const before = await rowIds(page);
      const arrivals = Array.from({ length: 2 }, () => runBatch());
      for (const batch of arrivals)
        expect((await postBatch(server.url, agent.apiKey, batch.body)).status).toBe(202);
      await page.getByText('2 new runs arrived while paused.').waitFor();
      expect(await rowIds(page)).toEqual(before);
      await page.getByRole('button', { name: /Resume \(2 new\)/ }).click();
      for (const batch of arrivals)
        await page.locator(`tr[data-trace-id="${batch.trace.id}"]`).waitFor();
    });

    it('ends the stream and says so when the viewer loses the role', async () => {
      const token = await server.userToken('erin', agent.agentId, 'viewer');
      const { page } = await browser.newPage();
      await page.goto(`${server.url}/agents/${agent.agentId}#token=${token}`);
      await page.locator('[data-live-state="live"]').waitFor();
      const revoked = await send(
        server.url,
        `/admin/v1/agents/${agent.agentId}/members/erin`,
        undefined,
        {
          method: 'DELETE',
          token: server.adminToken,
        },
      );
      expect(revoked.status).toBe(204);
      await page.getByText('you no longer have access to this agent').waitFor({ timeout: 10_000 });
      // and nothing new reaches the page
      const after = runBatch();
      expect((await postBatch(server.url, agent.apiKey, after.body)).status).toBe(202);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(await page.locator(`tr[data-trace-id="${after.trace.id}"]`).count()).toBe(0);
    });
  });

  describe.runIf(postgresAvailable())('on PostgreSQL with the Redis bus', () => {
    it('shows "live stream interrupted" while Redis is down, and clears it when delivery resumes', async () => {
      const served = await startServedOnOwnRedis('postgres');
      const { server, redis, agent } = served;
      try {
        const { page } = await browser.newPage();
        await page.goto(`${server.url}/agents/${agent.agentId}#token=${served.token}`);
        await page.locator('[data-live-state="live"]').waitFor();

        await redis.kill();
        const banner = page.getByText('Live stream interrupted');
        await banner.waitFor({ timeout: 10_000 });
        await page.screenshot({ path: join(SCREENSHOTS, 'runs-interrupted.png') });
        const during = runBatch({ trace: { inputSummary: 'stored while Redis was down' } });
        expect((await postBatch(server.url, agent.apiKey, during.body)).status).toBe(202);

        await redis.restart();
        await page.locator(`tr[data-trace-id="${during.trace.id}"]`).waitFor({ timeout: 15_000 });
        await banner.waitFor({ state: 'detached' });
      } finally {
        await served.dispose();
      }
    });
  });
});
