import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { mintDevToken } from '../../src/auth/dev-token.js';
import { runBatch } from '../fixtures/batches.js';
import {
  describeWithBrowser,
  launchBrowser,
  SCREENSHOTS,
  type DashboardBrowser,
} from '../harness/browser.js';
import { isProblem, postBatch, send } from '../harness/http.js';
import { exportSpans, recordingTracer } from '../harness/otel.js';
import { startTestServer, type TestServer } from '../harness/test-server.js';

/*
 * Issue 17, item 3: a person allowed to create agents does it in the dashboard, copies the key
 * and verify token shown once, and watches the first flush turn "waiting" into "verified ✓" with
 * the run; owners then manage keys and members on the agent's settings page. Editors and viewers
 * can do neither, on the page or through the API.
 */
const CREATOR = 'ana@example.com';
const HOSTILE_NAME = 'Swap bot <img src=x onerror="window.__pwned=1">';

describeWithBrowser('onboarding an agent in the dashboard', () => {
  let server: TestServer;
  let browser: DashboardBrowser;
  let agentId: string;
  let apiKey: string;

  beforeAll(async () => {
    server = await startTestServer('pglite', {
      analysis: { worker: false },
      auth: { agentCreators: [CREATOR], apiKeyCacheMs: 200 },
    });
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  const tokenOf = (userId: string) => mintDevToken(server.jwtSecret, userId);
  async function signedIn(userId: string, path: string): Promise<Page> {
    const { page } = await browser.newPage();
    await page.goto(`${server.url}${path}#token=${await tokenOf(userId)}`);
    return page;
  }
  const shot = (page: Page, name: string) =>
    page.screenshot({ path: join(SCREENSHOTS, `onboarding-${name}.png`), fullPage: true });

  it('creates an agent, shows its key once, and turns "waiting" into "verified ✓" with the first run', async () => {
    const page = await signedIn(CREATOR, '/');
    await page.getByRole('heading', { name: 'No agents yet' }).waitFor();
    await shot(page, '1-agents-empty');
    await page.getByRole('link', { name: 'New agent' }).first().click();
    await page.getByRole('heading', { name: 'New agent' }).waitFor();
    await page.getByLabel('Name').fill(HOSTILE_NAME);
    await shot(page, '2-name');
    await page.getByRole('button', { name: 'Create agent' }).click();

    await page.getByText('Waiting for the first flush…').waitFor();
    agentId = (await page.getByLabel('Agent id', { exact: true }).textContent()) ?? '';
    apiKey = (await page.getByLabel('API key', { exact: true }).textContent()) ?? '';
    const verifyToken =
      (await page.getByLabel('Verify token', { exact: true }).textContent()) ?? '';
    expect(apiKey).toMatch(/^flk_/);
    expect(verifyToken).toMatch(/^flv_/);
    // the name is text, never markup
    await page.getByRole('heading', { name: `${HOSTILE_NAME} is created` }).waitFor();
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    const snippet = (await page.getByLabel('Client snippet', { exact: true }).textContent()) ?? '';
    expect(snippet).toContain('new FlightlogClient({');
    expect(snippet).toContain(`apiKey: "${apiKey}"`);
    expect(snippet).toContain(`agentId: "${agentId}"`);
    expect(snippet).toContain(`verifyToken: "${verifyToken}"`);
    expect(snippet).toContain(`ingestUrl: "${server.url}"`);
    expect(await page.getByLabel('Example command', { exact: true }).textContent()).toContain(
      `FLIGHTLOG_API_KEY=${apiKey}`,
    );
    await shot(page, '3-created-waiting');

    // the agent's first flush, as the example agent would send it
    const { body, trace } = runBatch({
      trace: { inputSummary: 'Swap 1 SOL for USDC' },
      batch: { agentId, verifyToken },
    });
    const sentAt = Date.now();
    const accepted = await postBatch(server.url, apiKey, body);
    expect(accepted.status).toBe(202);
    expect(accepted.headers.get('flightlog-verify')).toBe('verified');
    await page.getByText('Verified ✓').waitFor({ timeout: 3_000 });
    const verifiedInMs = Date.now() - sentAt;
    process.stdout.write(`[onboarding] verified on the page ${verifiedInMs} ms after the flush\n`);
    // the target is 1 s (typically 75–320 ms here, printed above); the bound leaves room for a
    // machine running the rest of the suite beside it
    expect(verifiedInMs).toBeLessThan(2_000);
    const firstRun = page.getByRole('link', { name: 'Swap 1 SOL for USDC' });
    await firstRun.waitFor();
    expect(await firstRun.getAttribute('href')).toBe(`/runs/${trace.id}`);
    await shot(page, '4-verified');

    // the agents list now shows it, verified
    await page.getByRole('link', { name: 'Agents', exact: true }).click();
    const row = page.locator(`tr[data-agent-id="${agentId}"]`);
    await row.waitFor();
    expect(await row.textContent()).toContain('owner');
  });

  it('verifies an agent run by examples/swap-agent.mjs with the command the page shows', async () => {
    const page = await signedIn(CREATOR, '/agents/new');
    await page.getByLabel('Name').fill('Example swap agent');
    await page.getByRole('button', { name: 'Create agent' }).click();
    await page.getByText('Waiting for the first flush…').waitFor();
    // the variables of the page's command, as a person would paste them
    const command = (await page.getByLabel('Example command', { exact: true }).textContent()) ?? '';
    const env: Record<string, string> = {};
    for (const [, name, value] of command.matchAll(/^(FLIGHTLOG_[A-Z_]+)=(\S+) \\$/gm))
      env[name!] = value!;
    expect(Object.keys(env).sort()).toEqual([
      'FLIGHTLOG_AGENT_ID',
      'FLIGHTLOG_API_KEY',
      'FLIGHTLOG_INGEST_URL',
      'FLIGHTLOG_VERIFY_TOKEN',
    ]);
    const started = Date.now();
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['examples/swap-agent.mjs', 'swap'],
      { env: { ...process.env, ...env }, timeout: 20_000 },
    );
    const { traceId } = JSON.parse(stdout.trim().split('\n')[0]!) as { traceId: string };
    await page.getByText('Verified ✓').waitFor({ timeout: 3_000 });
    process.stdout.write(
      `[onboarding] example agent: verified on the page ${Date.now() - started} ms after it started\n`,
    );
    const firstRun = page.locator('.first-run a');
    await firstRun.waitFor();
    expect(await firstRun.getAttribute('href')).toBe(`/runs/${traceId}`);
    await shot(page, '4b-verified-example-agent');
  });

  it('verifies an agent that exports OpenTelemetry with the two variables the page shows', async () => {
    const page = await signedIn(CREATOR, '/agents/new');
    await page.getByLabel('Name').fill('OpenTelemetry agent');
    await page.getByRole('button', { name: 'Create agent' }).click();
    await page.getByText('Waiting for the first flush…').waitFor();
    const variables =
      (await page.getByLabel('OpenTelemetry variables', { exact: true }).textContent()) ?? '';
    const env: Record<string, string> = {};
    for (const [, name, value] of variables.matchAll(/^(OTEL_[A-Z_]+)=(.+)$/gm))
      env[name!] = value!.replace(/^"(.*)"$/, '$1'); // as a shell reads the quoted value
    expect(Object.keys(env).sort()).toEqual([
      'OTEL_EXPORTER_OTLP_ENDPOINT',
      'OTEL_EXPORTER_OTLP_HEADERS',
    ]);
    expect(env.OTEL_EXPORTER_OTLP_ENDPOINT).toBe(`${server.url}/v1/otlp`);
    // the real exporter, configured by nothing but those variables
    const saved = { ...process.env };
    Object.assign(process.env, env);
    try {
      const exporter = new OTLPTraceExporter();
      const recorder = recordingTracer('onboarded-by-otel');
      const root = recorder.tracer.startSpan('agent.run', {
        attributes: { 'flightlog.input_summary': 'Summarise the inbox' },
      });
      root.end();
      expect(await exportSpans(exporter, recorder.finished())).toMatchObject({ ok: true });
      await exporter.shutdown();
      await page.getByText('Verified ✓').waitFor({ timeout: 3_000 });
      const firstRun = page.locator('.first-run a');
      await firstRun.waitFor();
      expect(await firstRun.getAttribute('href')).toBe(`/runs/${root.spanContext().traceId}`);
      await shot(page, '4c-verified-opentelemetry');
    } finally {
      process.env = saved;
    }
  });

  it('lets the owner issue and revoke keys (the revoked one refused) and manage members, never the last owner', async () => {
    const page = await signedIn(CREATOR, `/agents/${agentId}`);
    await page.getByRole('link', { name: 'Settings' }).click();
    await page.getByRole('heading', { name: 'API keys' }).waitFor();
    await page.getByRole('button', { name: 'New key' }).click();
    const issued = (await page.getByLabel('New API key', { exact: true }).textContent()) ?? '';
    expect(issued).toMatch(/^flk_/);
    expect((await postBatch(server.url, issued, runBatch().body)).status).toBe(202);
    await page.locator('tr[data-key-id]').nth(1).waitFor();

    // revoke the first key: two clicks, then the ingest API refuses it
    const first = page.locator('tr[data-key-id]').first();
    await first.getByRole('button', { name: 'Revoke' }).click();
    await first.getByRole('button', { name: 'Revoke: sure?' }).click();
    await first.getByText('revoked').waitFor();
    expect(isProblem(await postBatch(server.url, apiKey, runBatch().body), 401)).toBe(true);
    expect((await postBatch(server.url, issued, runBatch().body)).status).toBe(202);

    // grant an editor and a viewer, change a role, and fail to remove the last owner
    for (const [user, role] of [
      ['ed@example.com', 'editor'],
      ['vi@example.com', 'viewer'],
      ['tmp@example.com', 'viewer'],
    ] as const) {
      await page.getByLabel('User id to grant').fill(user);
      await page.getByLabel('Role to grant').selectOption(role);
      await page.getByRole('button', { name: 'Grant' }).click();
      await page.locator(`tr[data-user-id="${user}"]`).waitFor();
    }
    await page.getByLabel('Role of tmp@example.com').selectOption('editor');
    await page.getByRole('button', { name: 'Remove tmp@example.com' }).click();
    await page.locator('tr[data-user-id="tmp@example.com"]').waitFor({ state: 'detached' });
    await page.getByRole('button', { name: `Remove ${CREATOR}` }).click();
    await page
      .getByRole('alert')
      .getByText(/last owner/)
      .waitFor();
    await page.getByLabel(`Role of ${CREATOR}`).selectOption('viewer');
    await page
      .getByRole('alert')
      .getByText(/last owner/)
      .waitFor();
    // the page shows what the server kept
    await expect.poll(() => page.getByLabel(`Role of ${CREATOR}`).inputValue()).toBe('owner');
    await shot(page, '5-settings-owner');
    const members = await send(server.url, `/v1/agents/${agentId}/members`, undefined, {
      token: await tokenOf(CREATOR),
    });
    expect(members.body.members).toEqual([
      { userId: CREATOR, role: 'owner' },
      { userId: 'ed@example.com', role: 'editor' },
      { userId: 'vi@example.com', role: 'viewer' },
    ]);
  });

  it('shows editors and viewers that only owners manage keys and members, and the API refuses them', async () => {
    for (const user of ['ed@example.com', 'vi@example.com']) {
      const page = await signedIn(user, `/agents/${agentId}/settings`);
      await page.getByText("Only owners manage this agent's name, keys and members.").waitFor();
      expect(await page.getByRole('button', { name: 'New key' }).count()).toBe(0);
      expect(await page.getByRole('button', { name: 'Grant' }).count()).toBe(0);
      if (user.startsWith('vi')) await shot(page, '6-settings-viewer');
      const token = await tokenOf(user);
      const key = await send(server.url, `/v1/agents/${agentId}/keys`, undefined, {
        method: 'POST',
        token,
      });
      expect(isProblem(key, 403)).toBe(true);
      const grant = await send(
        server.url,
        `/v1/agents/${agentId}/members/friend`,
        { role: 'owner' },
        { method: 'PUT', token },
      );
      expect(isProblem(grant, 403)).toBe(true);
      // not a creator: no "New agent" button, and the page says why a direct visit fails
      const list = await signedIn(user, '/');
      await list.getByRole('table', { name: 'Your agents' }).waitFor();
      expect(await list.getByRole('link', { name: 'New agent' }).count()).toBe(0);
      const direct = await signedIn(user, '/agents/new');
      await direct
        .getByRole('alert')
        .getByText(/AGENT_CREATORS/)
        .waitFor();
      await direct.getByText(user, { exact: false }).first().waitFor();
      expect(await direct.getByRole('button', { name: 'Create agent' }).count()).toBe(0);
      if (user.startsWith('ed')) await shot(direct, '7-not-a-creator');
    }
  });
});
