import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { at, llmCallEvent, newId, runBatch, traceSnapshot } from '../fixtures/batches.js';
import { failedNestedRun, toolCallEvent } from '../fixtures/dashboard-runs.js';
import { startTestWorker } from '../harness/analysis.js';
import {
  SCREENSHOTS,
  describeWithBrowser,
  launchBrowser,
  type DashboardBrowser,
} from '../harness/browser.js';
import { postBatch, send } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';
import type { AnalysisWorker } from '../../src/analysis/analysis-worker.js';

/*
 * A run's public page (issue 25, part 1): the share link shows that one run read-only to anyone,
 * asks the server for nothing but that run, runs none of what the agent wrote, follows a running
 * run, and says so at once when the link is ended.
 */
const HOSTILE = '<img src=x onerror="window.__pwned=1;alert(1)"><script>window.__pwned=2</script>';

describeWithBrowser('a shared run in the browser', () => {
  let server: TestServer;
  let browser: DashboardBrowser;
  let worker: AnalysisWorker;
  let agent: TestAgent;
  let owner: string;

  beforeAll(async () => {
    server = await startTestServer('pglite');
    worker = startTestWorker(server.store);
    browser = await launchBrowser();
    agent = await server.createAgent({ name: 'swap-agent' });
    owner = await server.userToken('owner-ana', agent.agentId, 'owner');
  });
  afterAll(async () => {
    await browser?.close();
    await worker?.stop(5_000);
    await server?.close();
  });

  const store = async (body: unknown) => {
    const res = await postBatch(server.url, agent.apiKey, body);
    expect(res.status, res.text).toBe(202);
  };
  const shareOf = async (traceId: string) => {
    const res = await send(server.url, `/v1/traces/${traceId}/share`, {}, { token: owner });
    expect(res.status, res.text).toBe(201);
    return res.body as { shareToken: string; path: string };
  };

  /** A fresh browser (no sign-in) on the link, with every request it makes and every dialog. */
  async function openLink(path: string) {
    const { page, errors } = await browser.newPage();
    const requests: string[] = [];
    const dialogs: string[] = [];
    page.on('request', (request) => requests.push(request.url()));
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    await page.goto(`${server.url}${path}`);
    return { page, errors, requests, dialogs };
  }

  it('shows the run, its steps and its autopsy to someone signed out, and asks for nothing else', async () => {
    const run = failedNestedRun();
    run.trace.inputSummary = `Swap 1 SOL ${HOSTILE}`;
    run.trace.errorMessage = `slippage ${HOSTILE}`;
    run.failing.errorMessage = `quote expired ${HOSTILE}`;
    await store(run.body);
    // another run of the same agent, which the page must never reach
    const other = runBatch({ trace: { inputSummary: 'the other run, never shown' } });
    await store(other.body);
    const { path, shareToken } = await shareOf(run.trace.id);

    const { page, errors, requests, dialogs } = await openLink(path);
    await page.getByText('Shared run, read-only').waitFor();
    await page.getByText('Swap 1 SOL').first().waitFor();
    await page.getByRole('heading', { name: /Autopsy/ }).waitFor();
    await page.locator('.autopsy .markdown, .autopsy p').first().waitFor();
    // the agent's text is text: it reads as written, and ran nothing
    expect(await page.locator('.run-header').innerText()).toContain('<img src=x onerror=');
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    expect(dialogs).toEqual([]);
    expect(await page.locator('img, iframe, script:not([src])').count()).toBe(0);
    // nothing of the dashboard but this run: no agent links, no sign-in, no other run
    expect(await page.locator(`a[href^="/agents"]`).count()).toBe(0);
    expect(await page.getByText('Sign out').count()).toBe(0);
    expect(await page.getByText('the other run, never shown').count()).toBe(0);
    // the failing step opens, as on a member's page
    await page.getByText('quote expired').first().waitFor();
    await page.screenshot({ path: join(SCREENSHOTS, 'shared-run.png'), fullPage: true });

    const api = requests.filter((url) => new URL(url).pathname.startsWith('/v1/'));
    expect(api.length).toBeGreaterThan(0);
    // the run through its token, and the dashboard's public configuration (how to sign in, the
    // cluster runs are anchored on: the proof's explorer link), which takes no credential
    for (const url of api)
      expect(new URL(url).pathname).toMatch(/^\/v1\/(shared\/(trace|analysis)|dashboard\/config)$/);
    // the token travels as the credential only: no API address carries it
    for (const url of api) expect(url).not.toContain(shareToken);
    const robots = `document.querySelector('meta[name="robots"]')?.getAttribute('content')`;
    expect(await page.evaluate(robots)).toBe('noindex, nofollow');
    expect(errors).toEqual([]);
  });

  it("the public page is served with noindex and no referrer, and a member's page shows the link and ends it", async () => {
    const { trace, body } = runBatch({
      trace: { status: 'completed', endedAt: at(1_000), durationMs: 1_000 },
    });
    await store(body);
    const { path } = await shareOf(trace.id);
    const served = await send(server.url, path);
    expect(served.status).toBe(200);
    expect(served.headers.get('x-robots-tag')).toBe('noindex, nofollow');
    expect(served.headers.get('referrer-policy')).toBe('no-referrer');
    expect(served.headers.get('content-security-policy')).toContain("script-src 'self'");

    // the owner's page of the run shows the link, and ends it
    const { page } = await browser.newPage();
    await page.goto(`${server.url}/runs/${trace.id}#token=${owner}`);
    const link = page.getByLabel('Public link of this run');
    await link.waitFor();
    expect(await link.inputValue()).toBe(`${server.url}${path}`);
    await page.screenshot({ path: join(SCREENSHOTS, 'run-shared-by-owner.png') });
    await page.getByRole('button', { name: 'Stop sharing' }).click();
    await page.getByRole('button', { name: 'Share' }).waitFor();

    const { page: visitor } = await openLink(path);
    await visitor.getByText('This link shares nothing').waitFor();
    await visitor.screenshot({ path: join(SCREENSHOTS, 'shared-run-ended.png') });
  });

  it('a running shared run updates on the page, and the page says so when the link is ended meanwhile', async () => {
    const trace = traceSnapshot({ status: 'running', eventCount: 1 });
    await store({ batchId: newId(), items: [{ trace, events: [llmCallEvent(trace.id, 0)] }] });
    const { path } = await shareOf(trace.id);
    const { page, errors } = await openLink(path);
    await page.getByText('1 event').first().waitFor();

    await store({
      batchId: newId(),
      items: [
        {
          trace: { ...trace, eventCount: 2 },
          events: [toolCallEvent(trace.id, 1, { payload: { name: 'jupiter.swap', input: {} } })],
        },
      ],
    });
    await page.getByText('2 events').first().waitFor({ timeout: 15_000 });
    await page.getByText('jupiter.swap').first().waitFor();

    const ended = await send(server.url, `/v1/traces/${trace.id}/share`, undefined, {
      method: 'DELETE',
      token: owner,
    });
    expect(ended.status).toBe(204);
    await page.getByText('This link shares nothing').waitFor({ timeout: 15_000 });
    expect(errors).toEqual([]);
  });
});
