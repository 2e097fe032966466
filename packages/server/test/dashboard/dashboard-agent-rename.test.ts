import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  describeWithBrowser,
  launchBrowser,
  SCREENSHOTS,
  seriousAccessibilityViolations,
  type DashboardBrowser,
} from '../harness/browser.js';
import { send } from '../harness/http.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';

/*
 * Issue 17, item 3: an owner renames the agent on its settings page, through the same owner API
 * every client uses, and sees the new name in the heading and in the list of agents without a
 * reload; other roles see the name and no form.
 */
const OWNER = 'olga@example.com';
const VIEWER = 'vic@example.com';
const NEW_NAME = 'Treasury bot <img src=x onerror="window.__pwned=1">';

describeWithBrowser('renaming an agent in the dashboard', () => {
  let server: TestServer;
  let browser: DashboardBrowser;
  let agent: TestAgent;

  beforeAll(async () => {
    server = await startTestServer('pglite', { analysis: { worker: false } });
    browser = await launchBrowser();
    agent = await server.createAgent({ name: 'Swap bot' });
    await server.userToken(OWNER, agent.agentId, 'owner');
    await server.userToken(VIEWER, agent.agentId, 'viewer');
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  async function signedIn(userId: string, path: string, colorScheme?: 'light' | 'dark') {
    const { page, errors } = await browser.newPage(colorScheme ? { colorScheme } : {});
    await page.goto(`${server.url}${path}#token=${await server.userToken(userId)}`);
    return { page, errors };
  }
  const shot = (page: Page, name: string) =>
    page.screenshot({ path: join(SCREENSHOTS, `rename-${name}.png`), fullPage: true });
  const settings = () => `/agents/${agent.agentId}/settings`;

  it('renames the agent from its settings page: the heading and the agents list show it, without a reload', async () => {
    const { page, errors } = await signedIn(OWNER, settings());
    const input = page.getByLabel('Agent name', { exact: true });
    await page.getByRole('heading', { name: 'Swap bot: settings' }).waitFor();
    expect(await input.inputValue()).toBe('Swap bot');
    await shot(page, '1-owner-before');
    // a marker the page keeps only if it is never loaded again
    await page.evaluate('window.__sameDocument = true');

    await input.fill(`  ${NEW_NAME}  `);
    await page.getByRole('button', { name: 'Save' }).click();
    await page
      .getByRole('status')
      .getByText(`Saved: the agent is now called “${NEW_NAME}”.`)
      .waitFor();
    await page.getByRole('heading', { name: `${NEW_NAME}: settings` }).waitFor();
    // kept as typed, without the spaces around it; text, never markup
    expect(await input.inputValue()).toBe(NEW_NAME);
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    const violations = await seriousAccessibilityViolations(page);
    await shot(page, '2-owner-saved');
    expect(violations).toEqual([]);

    await page.getByRole('link', { name: 'Agents', exact: true }).click();
    const row = page.locator(`tr[data-agent-id="${agent.agentId}"]`);
    await row.getByRole('link', { name: NEW_NAME }).waitFor();
    expect(await page.evaluate('window.__sameDocument')).toBe(true);
    await shot(page, '3-agents-list');
    // what every client reads
    const read = await send(server.url, `/v1/agents/${agent.agentId}`, undefined, {
      token: await server.userToken(VIEWER),
    });
    expect(read.body.name).toBe(NEW_NAME);
    expect(errors).toEqual([]);
  });

  it('clears the name with an empty field: the agent is then shown by its id', async () => {
    const { page } = await signedIn(OWNER, settings());
    const input = page.getByLabel('Agent name', { exact: true });
    await input.waitFor();
    await input.fill('');
    await page.getByRole('button', { name: 'Save' }).click();
    await page
      .getByRole('status')
      .getByText('Name cleared: the agent is shown by its id.')
      .waitFor();
    await page.getByRole('heading', { name: `${agent.agentId}: settings` }).waitFor();
    await page.getByRole('link', { name: 'Agents', exact: true }).click();
    await page
      .locator(`tr[data-agent-id="${agent.agentId}"]`)
      .getByRole('link', { name: agent.agentId })
      .waitFor();
  });

  it('says so inline when the server refuses, and the heading keeps the name the server has', async () => {
    const { page } = await signedIn(OWNER, settings());
    const input = page.getByLabel('Agent name', { exact: true });
    await input.fill('Swap bot');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('heading', { name: 'Swap bot: settings' }).waitFor();
    // another owner demotes this one while the page is open
    await server.userToken('second-owner', agent.agentId, 'owner');
    await server.userToken(OWNER, agent.agentId, 'editor');
    await input.fill('Not allowed');
    await page.getByRole('button', { name: 'Save' }).click();
    await page
      .getByRole('alert')
      .getByText('Not saved: Only owners of this agent manage its name, keys and members.')
      .waitFor();
    expect(await page.getByRole('status').textContent()).toBe('');
    await page.getByRole('heading', { name: 'Swap bot: settings' }).waitFor();
    await shot(page, '4-owner-refused');
    await server.userToken(OWNER, agent.agentId, 'owner');
  });

  for (const scheme of ['light', 'dark'] as const)
    it(`shows a viewer the name and no form, ${scheme}`, async () => {
      const { page } = await signedIn(VIEWER, settings(), scheme);
      await page.getByRole('heading', { name: 'Swap bot: settings' }).waitFor();
      await page.getByText("Only owners manage this agent's name, keys and members.").waitFor();
      const name = page.getByRole('region', { name: 'Name' });
      expect((await name.textContent())?.trim()).toBe('NameSwap bot');
      expect(await page.getByLabel('Agent name').count()).toBe(0);
      expect(await page.getByRole('textbox').count()).toBe(0);
      expect(await page.getByRole('button', { name: 'Save' }).count()).toBe(0);
      const violations = await seriousAccessibilityViolations(page);
      await shot(page, `5-viewer-${scheme}`);
      expect(violations).toEqual([]);
    });

  it('passes the accessibility check on the owner page in dark', async () => {
    const { page } = await signedIn(OWNER, settings(), 'dark');
    await page.getByLabel('Agent name', { exact: true }).waitFor();
    await page.locator('tr[data-key-id]').first().waitFor();
    const violations = await seriousAccessibilityViolations(page);
    await shot(page, '6-owner-dark');
    expect(violations).toEqual([]);
  });
});
