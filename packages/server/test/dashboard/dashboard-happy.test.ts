import { join } from 'node:path';
import { mintDevToken } from '../../src/auth/dev-token.js';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { llmCallEvent, newId, runBatch, traceSnapshot } from '../fixtures/batches.js';
import { failedNestedRun, toolCallEvent } from '../fixtures/dashboard-runs.js';
import { newMasterKey, seal } from '../fixtures/runs.js';
import {
  describeWithBrowser,
  launchBrowser,
  SCREENSHOTS,
  type DashboardBrowser,
} from '../harness/browser.js';
import { postBatch } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';

/*
 * Issue 16: the web dashboard, as its user meets it in a real Chromium: a sign-in link, the
 * agents they have a role on, an agent's runs arriving live, one run's steps and its failure.
 */
describeWithBrowser('the dashboard in a browser', () => {
  let server: TestServer;
  let browser: DashboardBrowser;
  let mine: TestAgent;
  let others: TestAgent;
  let token: string;

  beforeAll(async () => {
    server = await startTestServer('pglite');
    browser = await launchBrowser();
    mine = await server.createAgent({ name: 'Swap bot' });
    others = await server.createAgent({ name: 'Another team' });
    token = await server.userToken('alice', mine.agentId, 'viewer');
    await server.userToken('bob', others.agentId, 'owner');
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  const post = async (agent: TestAgent, body: unknown) => {
    const answer = await postBatch(server.url, agent.apiKey, body);
    expect(answer.status, answer.text).toBe(202);
  };

  async function signedIn(path = '/', colorScheme: 'light' | 'dark' = 'light'): Promise<Page> {
    const { page } = await browser.newPage({ colorScheme });
    await page.goto(`${server.url}${path}#token=${token}`);
    return page;
  }

  it('signs in through the link, keeps the token out of the address, and lists only my agents', async () => {
    const page = await signedIn();
    await page.getByRole('table', { name: 'Your agents' }).waitFor();
    expect(page.url()).toBe(`${server.url}/`);
    const rows = page.locator('tr[data-agent-id]');
    expect(await rows.count()).toBe(1);
    await expect(rows.first().textContent()).resolves.toContain('Swap bot');
    await expect(page.content()).resolves.not.toContain('Another team');
    await page.screenshot({ path: join(SCREENSHOTS, 'agents-light.png') });
  });

  it('signs in with a pasted token, and an expired one asks to sign in again', async () => {
    const { page } = await browser.newPage();
    await page.goto(`${server.url}/`);
    await page.getByLabel('Identity token (JWT)').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('table', { name: 'Your agents' }).waitFor();

    // a link followed in the open tab: a refused token asks to sign in again
    await page.goto(`${server.url}/#token=not-a-valid-token`);
    await page.getByText('Sign in again').waitFor();

    // a token that expires while the page is open: the page says so when it does
    const shortLived = await mintDevToken(server.jwtSecret, 'alice', 2);
    await page.goto(`${server.url}/#token=${shortLived}`);
    await page.getByRole('table', { name: 'Your agents' }).waitFor();
    await page.getByText('Sign in again').waitFor({ timeout: 5_000 });
    await page.screenshot({ path: join(SCREENSHOTS, 'sign-in-again.png') });
  });

  it("shows an agent's runs, a new run at the top within a second and a running one updated in place", async () => {
    const finished = runBatch({
      events: 2,
      trace: { status: 'completed', durationMs: 2400, inputSummary: 'Quote SOL/USDC' },
    });
    await post(mine, finished.body);
    const page = await signedIn(`/agents/${mine.agentId}`);
    await page.locator(`tr[data-trace-id="${finished.trace.id}"]`).waitFor();
    await page.locator('[data-live-state="live"]').waitFor();

    const running = runBatch({ events: 1, trace: { inputSummary: 'Rebalance the treasury' } });
    const posted = Date.now();
    await post(mine, running.body);
    await page.locator(`tr[data-trace-id="${running.trace.id}"]`).waitFor({ timeout: 1000 });
    const appearedMs = Date.now() - posted;
    // newest first: the new run is the top row
    expect(await page.locator('tbody tr').first().getAttribute('data-trace-id')).toBe(
      running.trace.id,
    );

    const rowsBefore = await page.locator('tbody tr').count();
    const done = traceSnapshot({
      ...running.trace,
      status: 'completed',
      eventCount: 1,
      durationMs: 1500,
    });
    await post(mine, { batchId: runBatch().body.batchId, items: [{ trace: done, events: [] }] });
    const row = page.locator(`tr[data-trace-id="${running.trace.id}"]`);
    await row.getByText('completed').waitFor({ timeout: 1000 });
    expect(await page.locator('tbody tr').count()).toBe(rowsBefore);
    await page.screenshot({ path: join(SCREENSHOTS, 'runs-light.png') });
    console.log(`a new run appeared ${appearedMs} ms after its 202 was sent for`);
  });

  it('opens a failed run at its first failure, steps nested under their parent', async () => {
    const run = failedNestedRun();
    await post(mine, run.body);
    const page = await signedIn(`/runs/${run.trace.id}`);
    const step = (id: string) => page.locator(`li[data-event-id="${id}"]`);
    await step(run.failing.id).waitFor();
    expect(await step(run.plan.id).getAttribute('data-depth')).toBe('0');
    expect(await step(run.child.id).getAttribute('data-depth')).toBe('1');
    expect(await step(run.failing.id).getAttribute('data-depth')).toBe('1');
    // the failing step is the one shown, with its own error
    await page
      .getByRole('region', { name: 'Selected step' })
      .getByText('quote expired: slippage above 1%')
      .waitFor();
    await page.screenshot({ path: join(SCREENSHOTS, 'run-light.png'), fullPage: true });
    const dark = await signedIn(`/runs/${run.trace.id}`, 'dark');
    await dark.locator(`li[data-event-id="${run.failing.id}"]`).waitFor();
    await dark.screenshot({ path: join(SCREENSHOTS, 'run-dark.png'), fullPage: true });
    const darkRuns = await signedIn(`/agents/${mine.agentId}`, 'dark');
    await darkRuns.locator('tbody tr').first().waitFor();
    await darkRuns.screenshot({ path: join(SCREENSHOTS, 'runs-dark.png') });
  });

  it('opens an encrypted payload in the browser with the right key, refuses a wrong one, and sends the key nowhere', async () => {
    const key = newMasterKey();
    const base = runBatch({
      events: 0,
      trace: { status: 'completed', eventCount: 1, inputSummary: 'Pay for market data' },
    });
    const secret = {
      name: 'pay-invoice',
      input: { wallet: '9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin' },
    };
    const sealed = toolCallEvent(base.trace.id, 0, {
      payloadEncrypted: true,
      payload: seal(secret, key),
    });
    await post(mine, { batchId: newId(), items: [{ trace: base.trace, events: [sealed] }] });

    const { page } = await browser.newPage();
    const sent: string[] = [];
    page.on('request', (request) =>
      sent.push(
        `${request.url()} ${JSON.stringify(request.headers())} ${request.postData() ?? ''}`,
      ),
    );
    await page.goto(`${server.url}/runs/${base.trace.id}#token=${token}`);
    await page.locator(`li[data-event-id="${sealed.id}"] button`).click();
    const detail = page.getByRole('region', { name: 'Selected step' });
    await detail.getByText('Encrypted payload').waitFor();
    expect(await detail.textContent()).not.toContain('9xQeWvG8');

    await page.getByLabel(/Payload key/).fill(newMasterKey().toString('base64'));
    await page.getByRole('button', { name: 'Open' }).click();
    await detail.getByText('This key does not open it.').waitFor();

    await page.getByLabel(/Payload key/).fill(key.toString('base64'));
    await page.getByRole('button', { name: 'Open' }).click();
    await detail
      .getByText('9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin', { exact: false })
      .waitFor();
    await page.screenshot({ path: join(SCREENSHOTS, 'run-encrypted-opened.png') });
    const keyText = key.toString('base64');
    expect(
      sent.filter((line) => line.includes(keyText) || line.includes(encodeURIComponent(keyText))),
    ).toEqual([]);
  });

  it('opens a run of 10,000 steps with only the rows in view in the page, and scrolls to its end', async () => {
    const base = runBatch({ events: 0, trace: { inputSummary: 'A long research run' } });
    const events = Array.from({ length: 10_000 }, (_, i) =>
      llmCallEvent(base.trace.id, i, {
        durationMs: 10,
        startedAt: new Date(Date.parse(base.trace.startedAt) + i * 10).toISOString(),
        endedAt: null,
      }),
    );
    for (let from = 0; from < events.length; from += 1000) {
      const trace = traceSnapshot({ ...base.trace, eventCount: from + 1000 });
      await post(mine, {
        batchId: newId(),
        items: [{ trace, events: events.slice(from, from + 1000) }],
      });
    }
    const { page } = await browser.newPage();
    const started = Date.now();
    await page.goto(`${server.url}/runs/${base.trace.id}#token=${token}`);
    await page.locator(`li[data-event-id="${events[0]!.id}"]`).waitFor();
    const firstRowsMs = Date.now() - started;
    await page.locator('ol[data-rows="10000"]').waitFor({ timeout: 15_000 });
    const allMs = Date.now() - started;
    // a window of rows, not 10,000 elements
    expect(await page.locator('li.step').count()).toBeLessThan(120);
    await page.locator('ol.waterfall').evaluate((list) => (list.scrollTop = list.scrollHeight));
    await page.locator(`li[data-event-id="${events[9_999]!.id}"]`).waitFor();
    expect(await page.locator('li.step').count()).toBeLessThan(120);
    await page.screenshot({ path: join(SCREENSHOTS, 'run-10000-steps.png') });
    console.log(
      `a run of 10,000 steps: first rows ${firstRowsMs} ms after opening, all loaded ${allMs} ms`,
    );
  });

  it('compares a good and a failed run, and shows where they part ways', async () => {
    const run = (
      summary: string,
      steps: Array<[string, 'ok' | 'error', string?]>,
      status: 'completed' | 'errored',
    ) => {
      const base = runBatch({ events: 0 });
      const events = steps.map(([name, stepStatus, error], i) =>
        toolCallEvent(base.trace.id, i, {
          payload: { name },
          status: stepStatus,
          errorMessage: error ?? null,
        }),
      );
      const trace = traceSnapshot({
        ...base.trace,
        status,
        inputSummary: summary,
        eventCount: events.length,
        durationMs: 1000 * events.length,
        toolsCalled: [...new Set(steps.map(([name]) => name))],
      });
      return { trace, body: { batchId: newId(), items: [{ trace, events }] } };
    };
    const good = run(
      'Yesterday: swap 1 SOL',
      [
        ['quote', 'ok'],
        ['sign', 'ok'],
        ['send', 'ok'],
      ],
      'completed',
    );
    const bad = run(
      'Today: swap 1 SOL',
      [
        ['quote', 'ok'],
        ['refresh-quote', 'ok'],
        ['sign', 'error', 'blockhash not found'],
      ],
      'errored',
    );
    await post(mine, good.body);
    await post(mine, bad.body);

    const page = await signedIn(`/agents/${mine.agentId}`);
    await page.getByLabel('Pick Yesterday: swap 1 SOL to compare').check();
    await page.getByLabel('Pick Today: swap 1 SOL to compare').check();
    await page.getByRole('button', { name: 'Compare the 2 picked runs' }).click();
    const divergence = page.locator('h2.divergence');
    await divergence.waitFor();
    // the first difference is the step only today's run took, before the failing one
    expect(await divergence.textContent()).toContain('part ways at step 2');
    expect(await divergence.textContent()).toContain('refresh-quote');
    expect(new URL(page.url()).pathname).toBe('/compare');
    expect(await page.locator('tr[data-fact="Status"]').getAttribute('class')).toContain('differs');
    expect(await page.locator('tr[data-fact="Tools only in this run"]').textContent()).toContain(
      'refresh-quote',
    );
    // the failing step is lined up against its good counterpart, its error shown
    await page.getByText('blockhash not found').waitFor();
    await page.screenshot({ path: join(SCREENSHOTS, 'compare-light.png'), fullPage: true });
    // a deep link: reloading shows the same comparison
    await page.reload();
    await divergence.waitFor();
  });

  it('updates a running run in place as its next batch arrives', async () => {
    const first = runBatch({ events: 1, trace: { inputSummary: 'Still working' } });
    await post(mine, first.body);
    const page = await signedIn(`/runs/${first.trace.id}`);
    await page.locator(`li[data-event-id="${first.events[0]!.id}"]`).waitFor();
    await page.getByText('The autopsy is written once the run has finished.').waitFor();
    // the page holds the agent's stream while the run is running
    await page.locator('.run-header [data-live-state="live"]').waitFor();
    const facts = page.locator('.run-header .facts');
    await facts.getByText('1 event', { exact: true }).waitFor();
    const next = llmCallEvent(first.trace.id, 1);
    const done = traceSnapshot({
      ...first.trace,
      status: 'completed',
      eventCount: 2,
      durationMs: 1800,
    });
    await post(mine, { batchId: newId(), items: [{ trace: done, events: [next] }] });
    await page.locator(`li[data-event-id="${next.id}"]`).waitFor({ timeout: 2_000 });
    await page.locator('.run-header').getByText('completed').waitFor({ timeout: 2_000 });
    await facts.getByText('2 events', { exact: true }).waitFor({ timeout: 2_000 });
  });

  it('pages to older runs, moves through rows with j and k, opens one with Enter and comes back with Esc', async () => {
    const pager = await server.createAgent({ name: 'Pager' });
    const pagerToken = await server.userToken('alice', pager.agentId, 'viewer');
    const items = Array.from({ length: 60 }, (_, i) => ({
      trace: traceSnapshot({
        status: 'completed',
        startedAt: new Date(Date.parse('2026-11-20T10:00:00Z') + i * 60_000).toISOString(),
        inputSummary: `Paged run ${i}`,
      }),
      events: [],
    }));
    await post(pager, { batchId: newId(), items });
    const { page } = await browser.newPage();
    await page.goto(`${server.url}/agents/${pager.agentId}#token=${pagerToken}`);
    await page.locator('tbody tr').first().waitFor();
    expect(await page.locator('tbody tr').count()).toBe(50);
    await page.getByRole('button', { name: 'Older runs' }).click();
    await expect.poll(() => page.locator('tbody tr').count()).toBe(60);
    const ids = await page
      .locator('tbody tr')
      .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-trace-id')));
    expect(new Set(ids).size).toBe(60);
    expect(await page.getByRole('button', { name: 'Older runs' }).count()).toBe(0);

    await page.locator('h1').click();
    await page.keyboard.press('j');
    await page.keyboard.press('j');
    expect(await page.locator('tr.cursor-row').textContent()).toContain('Paged run 58');
    await page.keyboard.press('Enter');
    await page.locator('.run-header').getByText('Paged run 58').waitFor();
    await page.keyboard.press('Escape');
    // back on the list, the cursor on the run just read
    expect(await page.locator('tr.cursor-row').textContent()).toContain('Paged run 58');
    expect(new URL(page.url()).pathname).toBe(`/agents/${pager.agentId}`);
  });

  it('keeps rows still under the pointer: new runs wait until it leaves the list', async () => {
    await post(mine, runBatch({ trace: { inputSummary: 'Already there' } }).body);
    const page = await signedIn(`/agents/${mine.agentId}`);
    await page.locator('[data-live-state="live"]').waitFor();
    await page.locator('tbody tr').first().hover();
    const first = await page.locator('tbody tr').first().getAttribute('data-trace-id');
    const arriving = runBatch({ trace: { inputSummary: 'Arrived under the pointer' } });
    await post(mine, arriving.body);
    await page.getByText('1 new run: shown when the pointer leaves the list').waitFor();
    expect(await page.locator('tbody tr').first().getAttribute('data-trace-id')).toBe(first);
    await page.mouse.move(5, 5);
    await page.locator(`tr[data-trace-id="${arriving.trace.id}"]`).waitFor();
  });
});
