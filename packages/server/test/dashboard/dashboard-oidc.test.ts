import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dashboardCsp } from '../../src/http/dashboard-routes.js';
import {
  describeWithBrowser,
  launchBrowser,
  SCREENSHOTS,
  type DashboardBrowser,
} from '../harness/browser.js';
import { startOidcProvider, type TestOidcProvider } from '../harness/oidc-provider.js';
import { startTestServer, type TestAgent, type TestServer } from '../harness/test-server.js';

/*
 * Issue 16: when the server trusts an OpenID Connect provider, the dashboard signs in there
 * (authorization code with PKCE, in the browser) — tested against a real provider
 * (`oidc-provider`) on a loopback port, its login page driven in a real Chromium.
 */

/** A server that trusts `provider`'s ID tokens, and that provider with the dashboard registered. */
async function trustingServer(provider: TestOidcProvider): Promise<TestServer> {
  const server = await startTestServer('pglite', {
    auth: {
      jwtJwksUrl: provider.jwksUrl,
      jwtIssuer: provider.issuer,
      jwtAudience: provider.clientId,
      dashboardOidcClientId: provider.clientId,
    },
  });
  provider.registerDashboard(server.url);
  return server;
}

/** The page's CSP at `url`, directive by directive (the body read, so the connection is free). */
async function cspAt(url: string): Promise<Map<string, string>> {
  const answer = await fetch(url);
  expect(answer.status, url).toBe(200);
  await answer.arrayBuffer();
  return directives(answer.headers.get('content-security-policy') ?? '');
}

const directives = (csp: string) =>
  new Map(
    csp.split(';').map((part) => {
      const [name = '', ...values] = part.trim().split(/\s+/);
      return [name, values.join(' ')] as const;
    }),
  );

describe('how the dashboard signs in, as the server tells it', () => {
  let provider: TestOidcProvider;
  let oidc: TestServer;
  let plain: TestServer;

  beforeAll(async () => {
    provider = await startOidcProvider();
    oidc = await trustingServer(provider);
    plain = await startTestServer('pglite');
  });
  afterAll(async () => {
    await oidc?.close();
    await plain?.close();
    await provider?.close();
  });

  it('answers GET /v1/dashboard/config without a credential, with public facts only', async () => {
    const withProvider = await fetch(`${oidc.url}/v1/dashboard/config`);
    expect(withProvider.status).toBe(200);
    expect(await withProvider.json()).toEqual({
      signIn: 'oidc',
      issuer: provider.issuer,
      clientId: provider.clientId,
      scope: 'openid',
      // no anchoring on this server (the cluster, when on: see dashboard-proof.test.ts)
      anchoring: null,
    });
    const withoutProvider = await fetch(`${plain.url}/v1/dashboard/config`);
    expect(await withoutProvider.json()).toEqual({ signIn: 'token', anchoring: null });
    // a credential is not needed, and one that is not valid changes nothing
    const withJunk = await fetch(`${plain.url}/v1/dashboard/config`, {
      headers: { authorization: 'Bearer not-a-token' },
    });
    expect(withJunk.status).toBe(200);
    await withJunk.arrayBuffer();
  });

  it("lets the page reach the provider's origin, and nothing else new", async () => {
    const issuerOrigin = new URL(provider.issuer).origin;
    for (const path of ['/', '/auth/callback', '/agents/x', '/assets/app.js']) {
      const csp = await cspAt(`${oidc.url}${path}`);
      const plainCsp = await cspAt(`${plain.url}${path}`);
      expect(csp.get('connect-src'), path).toBe(`'self' ${issuerOrigin}`);
      // every other directive exactly as without a provider
      csp.delete('connect-src');
      plainCsp.delete('connect-src');
      expect(csp, path).toEqual(plainCsp);
    }
    expect(directives(dashboardCsp({ signIn: 'token' })).get('connect-src')).toBe("'self'");
  });
});

describeWithBrowser('signing in to the dashboard through an OpenID Connect provider', () => {
  let provider: TestOidcProvider;
  let server: TestServer;
  let browser: DashboardBrowser;
  let mine: TestAgent;

  beforeAll(async () => {
    provider = await startOidcProvider();
    server = await trustingServer(provider);
    browser = await launchBrowser();
    mine = await server.createAgent({ name: 'Treasury bot' });
    const others = await server.createAgent({ name: 'Another team' });
    // the provider's `sub` for the login "ada" is "ada": her role is granted to that subject
    await server.userToken('ada', mine.agentId, 'viewer');
    await server.userToken('bob', others.agentId, 'owner');
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await provider?.close();
  });

  /** A fresh tab that may reach the dashboard and the provider, and nothing else. */
  async function freshTab(): Promise<{ page: Page; context: BrowserContext; errors: string[] }> {
    const tab = await browser.newPage();
    const allowed = [server.url, provider.issuer];
    // the provider's development login page asks for a web font; this machine has no internet,
    // and nothing the dashboard does may need another origin
    await tab.context.route(
      (url) => !allowed.includes(url.origin),
      (route) => route.fulfill({ status: 204 }),
    );
    return tab;
  }

  /** At the provider's login page: any password; the login becomes the `sub`. */
  async function logInAtProvider(page: Page, login: string): Promise<void> {
    await page.waitForURL(`${provider.issuer}/**`);
    await page.locator('input[name="login"]').fill(login);
    await page.locator('input[name="password"]').fill('correct horse battery staple');
    await page.getByRole('button', { name: 'Sign-in' }).click();
    await page.getByRole('button', { name: 'Continue' }).click();
  }

  const signInButton = (page: Page) =>
    page.getByRole('button', { name: `Sign in with ${new URL(provider.issuer).host}` });

  /** What the tab keeps in its sessionStorage (run in the page; this side has no DOM types). */
  const stored = (page: Page) =>
    page.evaluate(
      '({ token: sessionStorage.getItem("flightlog.token"), keys: Object.keys(sessionStorage) })',
    ) as Promise<{ token: string | null; keys: string[] }>;

  it("signs in at the provider and comes back signed in, seeing that user's agents", async () => {
    const { page, errors } = await freshTab();
    await page.goto(`${server.url}/`);
    await signInButton(page).waitFor();
    await page.screenshot({ path: join(SCREENSHOTS, 'sign-in-oidc.png') });
    await signInButton(page).click();
    await logInAtProvider(page, 'ada');

    await page.getByRole('table', { name: 'Your agents' }).waitFor();
    // the code and state are gone from the address, the tab is back where it started
    expect(page.url()).toBe(`${server.url}/`);
    const rows = page.locator('tr[data-agent-id]');
    expect(await rows.count()).toBe(1);
    await expect(rows.first().textContent()).resolves.toContain('Treasury bot');
    await expect(page.content()).resolves.not.toContain('Another team');
    await page.locator('header.top').getByText('ada').waitFor();

    // what the tab keeps: the provider's ID token for this dashboard, and nothing of the sign-in
    const { token, keys } = await stored(page);
    expect(keys).toEqual(['flightlog.token']);
    const claims = JSON.parse(Buffer.from(token!.split('.')[1]!, 'base64url').toString()) as {
      iss: string;
      aud: string;
      sub: string;
    };
    expect(claims).toMatchObject({ iss: provider.issuer, aud: provider.clientId, sub: 'ada' });
    expect(errors).toEqual([]);
    await page.screenshot({ path: join(SCREENSHOTS, 'agents-after-oidc.png') });
  });

  it('comes back to the deep link the user started from', async () => {
    const { page } = await freshTab();
    await page.goto(`${server.url}/agents/${mine.agentId}?status=errored`);
    await signInButton(page).click();
    await logInAtProvider(page, 'ada');
    await page.waitForURL(`${server.url}/agents/${mine.agentId}?status=errored`);
    await page.locator('header.top').getByText('ada').waitFor();
    // the agent's runs, read with the provider's token: its live stream is open
    await page.locator('[data-live-state="live"]').waitFor();
  });

  it('refuses an answer whose state is not the one this tab sent, and keeps no token', async () => {
    const { page } = await freshTab();
    await page.goto(`${server.url}/`);
    await signInButton(page).click();
    await page.waitForURL(`${provider.issuer}/**`);
    // an answer made up elsewhere (login CSRF): the right issuer, a code, another state
    await page.goto(
      `${server.url}/auth/callback?${new URLSearchParams({
        code: 'a-code-for-someone-else',
        state: 'not-the-state-this-tab-sent',
        iss: provider.issuer,
      })}`,
    );
    await page.getByRole('alert').getByText('its state does not match').waitFor();
    expect(page.url()).toBe(`${server.url}/auth/callback`);
    const { token, keys } = await stored(page);
    expect(token).toBeNull();
    expect(keys).toEqual([]);
    await page.screenshot({ path: join(SCREENSHOTS, 'sign-in-oidc-refused.png') });
    // from there, a sign-in again is one click away
    await page.getByRole('link', { name: 'Sign in again' }).click();
    await signInButton(page).waitFor();
  });

  it('says so when the user cancels at the provider, and keeps no token', async () => {
    const { page } = await freshTab();
    await page.goto(`${server.url}/`);
    await signInButton(page).click();
    await page.waitForURL(`${provider.issuer}/**`);
    await page.getByRole('link', { name: '[ Cancel ]' }).click();
    await page.waitForURL(`${server.url}/auth/callback`);
    // the provider's own words (access_denied), shown as text
    await page
      .getByRole('alert')
      .getByText('The identity provider did not sign you in: End-User aborted interaction')
      .waitFor();
    expect((await stored(page)).keys).toEqual([]);
  });

  it('asks to sign in again when the ID token expires, and signs in again through the provider', async () => {
    const { page } = await freshTab();
    provider.setIdTokenTtl(3);
    try {
      await page.goto(`${server.url}/`);
      await signInButton(page).click();
      await logInAtProvider(page, 'ada');
      await page.getByRole('table', { name: 'Your agents' }).waitFor();
    } finally {
      provider.setIdTokenTtl(3600);
    }
    await page.getByText('Sign in again').waitFor({ timeout: 6_000 });
    expect((await stored(page)).token).toBeNull();
    // the provider still knows her (its session): back in without a login page
    await signInButton(page).click();
    await page.getByRole('table', { name: 'Your agents' }).waitFor();
    expect(page.url()).toBe(`${server.url}/`);
  });
});
