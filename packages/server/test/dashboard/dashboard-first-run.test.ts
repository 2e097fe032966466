import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  describeWithBrowser,
  launchBrowser,
  SCREENSHOTS,
  type DashboardBrowser,
} from '../harness/browser.js';
import { startServeProcess, type ServeProcess } from '../harness/cli-process.js';
import { freePort } from '../harness/service-location.js';

/*
 * Issue 17, as a newcomer meets it: `flightlog serve` on a fresh DATA_DIR with no configuration
 * at all, the sign-in link read from what it prints, opened in a browser; a new agent created
 * there, the example agent run with the command the page shows, "verified" and its run on the
 * page; then the server restarted, and the same link still signs in.
 */
describeWithBrowser('the first run, from the printed link to a verified agent', () => {
  let browser: DashboardBrowser;
  let dataDir: string;
  let env: Record<string, string>;
  const started: ServeProcess[] = [];

  const serve = async () => {
    const running = await startServeProcess(env);
    started.push(running);
    const deadline = Date.now() + 10_000;
    let link: string | undefined;
    while (!(link = /Sign in\s+(http:\/\/\S+)/.exec(running.output())?.[1])) {
      if (Date.now() > deadline) throw new Error(`no sign-in link: ${running.output()}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return { running, link };
  };

  beforeAll(async () => {
    browser = await launchBrowser();
    dataDir = join(mkdtempSync(join(tmpdir(), 'flightlog-first-minute-')), 'data');
    // nothing configured but where the data goes and a fixed port (the link must outlive a restart)
    env = { HOST: '', PORT: String(await freePort()), DATA_DIR: dataDir, FLIGHTLOG_BANNER: 'on' };
  });
  afterAll(async () => {
    for (const process of started)
      if (process.child.exitCode === null) process.child.kill('SIGKILL');
    await browser?.close();
    rmSync(join(dataDir, '..'), { recursive: true, force: true });
  });

  it('signs in through the link, creates an agent, sees the example agent verified and its run, and the link survives a restart', async () => {
    const first = await serve();
    const { page } = await browser.newPage();
    await page.goto(first.link);
    await page.getByRole('heading', { name: 'No agents yet' }).waitFor();
    await page.screenshot({ path: join(SCREENSHOTS, 'first-run-1-signed-in.png') });
    await page.getByRole('link', { name: 'New agent' }).first().click();
    await page.getByLabel('Name').fill('My swap agent');
    await page.getByRole('button', { name: 'Create agent' }).click();
    await page.getByText('Waiting for the first flush…').waitFor();
    await page.screenshot({ path: join(SCREENSHOTS, 'first-run-2-created.png') });

    const command = (await page.getByLabel('Example command', { exact: true }).textContent()) ?? '';
    const agentEnv: Record<string, string> = {};
    for (const [, name, value] of command.matchAll(/^(FLIGHTLOG_[A-Z_]+)=(\S+) \\$/gm))
      agentEnv[name!] = value!;
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['examples/swap-agent.mjs', 'swap'],
      {
        env: { PATH: process.env.PATH ?? '', ...agentEnv },
        timeout: 30_000,
      },
    );
    const { traceId } = JSON.parse(stdout.trim().split('\n')[0]!) as { traceId: string };
    await page.getByText('Verified ✓').waitFor();
    await page.locator(`.first-run a[href="/runs/${traceId}"]`).waitFor();
    await page.screenshot({ path: join(SCREENSHOTS, 'first-run-3-verified.png') });

    // the run itself, on its page
    await page.locator('.first-run a').click();
    await page.locator('.run-header').waitFor();

    // restarted: the same link (the secret kept in DATA_DIR) still signs in, the agent is there
    first.running.child.kill('SIGTERM');
    expect(await first.running.exited).toBe(0);
    const second = await serve();
    const { page: again } = await browser.newPage();
    await again.goto(first.link);
    await again.getByRole('link', { name: 'My swap agent' }).waitFor();
    expect(second.link.split('#')[0]).toBe(first.link.split('#')[0]);
    second.running.child.kill('SIGTERM');
    expect(await second.running.exited).toBe(0);
  }, 90_000);
});
