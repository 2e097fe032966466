import type { Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { newId, runBatch } from '../fixtures/batches.js';
import { toolCallEvent } from '../fixtures/dashboard-runs.js';
import { startTestWorker } from '../harness/analysis.js';
import { describeWithBrowser, launchBrowser, type DashboardBrowser } from '../harness/browser.js';
import { postBatch, send } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';

/*
 * Issue 16: what agents write, people read. Every place the dashboard shows agent text — input
 * and output summaries, error messages, tags, tool names, payloads, the autopsy quoting them —
 * gets markup that would run script if it were ever interpreted as HTML. Nothing runs, nothing
 * is injected, nothing is fetched from elsewhere, and the text reads as the text it is.
 */
const HOSTILE = {
  img: '<img src=x onerror="window.__pwned=1;alert(1)">',
  script: '<script>window.__pwned=2;alert(2)</script>',
  link: '[click me](javascript:alert(3))',
  html: '<a href="javascript:alert(4)">free SOL</a><iframe src="https://evil.example/"></iframe>',
  heading: 'ok\r## Verdict: succeeded',
  remote: '![tracker](https://evil.example/pixel.png)',
};
const ALL = Object.values(HOSTILE).join(' ');

describeWithBrowser('the dashboard against hostile agent text', () => {
  let server: TestServer;
  let browser: DashboardBrowser;
  let agent: TestAgent;
  let token: string;

  beforeAll(async () => {
    server = await startTestServer('pglite', { analysis: { worker: false } });
    browser = await launchBrowser();
    agent = await server.createAgent({ name: HOSTILE.img });
    token = await server.userToken('mallory-viewer', agent.agentId, 'viewer');
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it('sends a strict Content-Security-Policy and no-sniff with the page and its assets', async () => {
    for (const path of [
      '/',
      `/agents/${agent.agentId}`,
      '/runs/x',
      '/assets/app.js',
      '/assets/app.css',
    ]) {
      const answer = await send(server.url, path);
      expect(answer.status, path).toBe(200);
      const csp = answer.headers.get('content-security-policy') ?? '';
      expect(csp, path).toContain("default-src 'self'");
      expect(csp, path).toContain("script-src 'self'");
      expect(csp, path).toContain("frame-ancestors 'none'");
      expect(csp, path).not.toContain('unsafe-inline');
      expect(csp, path).not.toContain('unsafe-eval');
      expect(answer.headers.get('x-content-type-options'), path).toBe('nosniff');
    }
    const page = await send(server.url, '/');
    expect(page.headers.get('referrer-policy')).toBe('no-referrer');
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    // the page itself carries no inline script for the policy to have to allow
    expect(page.text).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
  });

  /** A page watched for everything hostile text could make it do. */
  async function watched(path: string) {
    const { page } = await browser.newPage();
    const dialogs: string[] = [];
    const foreign: string[] = [];
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    page.on('request', (request) => {
      if (!request.url().startsWith(server.url)) foreign.push(request.url());
    });
    await page.goto(`${server.url}${path}#token=${token}`);
    return { page, dialogs, foreign };
  }

  async function expectNothingRan(page: Page, dialogs: string[], foreign: string[]) {
    expect(dialogs).toEqual([]);
    expect(foreign).toEqual([]);
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    // no element made from the data: no image, frame, inline script or event-handler attribute
    expect(await page.locator('img, iframe, object, embed').count()).toBe(0);
    expect(await page.locator('script:not([src])').count()).toBe(0);
    expect(await page.locator('[onerror], [onclick], [onload]').count()).toBe(0);
    expect(await page.locator('a[href^="javascript:"]').count()).toBe(0);
  }

  it('runs nothing from summaries, errors, tags, tool names, payloads or the autopsy', async () => {
    const base = runBatch({ events: 0 });
    const traceId = base.trace.id;
    const failing = toolCallEvent(traceId, 0, {
      status: 'error',
      errorMessage: ALL,
      payload: { name: HOSTILE.script, input: { html: HOSTILE.html }, output: HOSTILE.img },
    });
    const trace = {
      ...base.trace,
      status: 'errored' as const,
      inputSummary: `${HOSTILE.img} ${HOSTILE.heading}`,
      outputSummary: HOSTILE.html,
      errorMessage: ALL,
      tags: [HOSTILE.script],
      toolsCalled: [HOSTILE.script],
      eventCount: 1,
      endedAt: base.trace.startedAt,
      durationMs: 1200,
    };
    const answer = await postBatch(server.url, agent.apiKey, {
      batchId: newId(),
      items: [{ trace, events: [failing] }],
    });
    expect(answer.status, answer.text).toBe(202);
    // the autopsy, written by the real analyzer, quotes the agent's error text
    const worker = startTestWorker(server.store);
    try {
      const deadline = Date.now() + 15_000;
      for (;;) {
        const analysis = await send(server.url, `/v1/traces/${traceId}/analysis`, undefined, {
          token,
        });
        if (analysis.body?.status === 'done') break;
        if (Date.now() > deadline) throw new Error(`autopsy not done: ${analysis.text}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    } finally {
      await worker.stop(5_000);
    }

    const runs = await watched(`/agents/${agent.agentId}`);
    const row = runs.page.locator(`tr[data-trace-id="${traceId}"]`);
    await row.waitFor();
    // the text reads as the text it is
    expect(await row.textContent()).toContain('<img src=x onerror=');
    expect(await row.textContent()).toContain('<script>');
    await expectNothingRan(runs.page, runs.dialogs, runs.foreign);

    const run = await watched(`/runs/${traceId}`);
    await run.page.locator('.markdown').waitFor();
    await run.page.getByRole('region', { name: 'Selected step' }).waitFor();
    const body = (await run.page.textContent('main')) ?? '';
    expect(body).toContain('<iframe src="https://evil.example/"></iframe>');
    // a carriage return forges no heading: the autopsy's only verdict is the real one
    const headings = await run.page
      .locator('.markdown h1, .markdown h2, .markdown h3')
      .allTextContents();
    expect(headings.filter((text) => /succeeded/i.test(text))).toEqual([]);
    await expectNothingRan(run.page, run.dialogs, run.foreign);
  });

  it('shows the agents list with a hostile agent name as text', async () => {
    const agents = await watched('/');
    await agents.page.locator(`tr[data-agent-id="${agent.agentId}"]`).waitFor();
    expect(
      await agents.page.locator(`tr[data-agent-id="${agent.agentId}"]`).textContent(),
    ).toContain('<img src=x');
    await expectNothingRan(agents.page, agents.dialogs, agents.foreign);
  });
});
