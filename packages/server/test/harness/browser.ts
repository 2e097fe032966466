import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { describe } from 'vitest';

/** Debian's Chromium (`apt-get install -y chromium`); Playwright's own download cannot work here. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Where the browser tests leave their screenshots, to be looked at by a person. */
export const SCREENSHOTS = join(process.cwd(), 'test-output', 'dashboard');

/**
 * A browser suite: declared skipped, with one loud line, when Chromium is missing on a local
 * machine; under CI it fails instead (`.ci/run` installs Chromium when it is missing).
 */
export function describeWithBrowser(title: string, body: () => void): void {
  if (existsSync(CHROMIUM)) {
    describe(title, body);
    return;
  }
  if (process.env.CI === 'true')
    throw new Error(`${CHROMIUM} is missing: CI needs Chromium for the dashboard tests`);
  process.stdout.write(
    `!!! SKIPPING "${title}": no Chromium at ${CHROMIUM} (apt-get install -y chromium) !!!\n`,
  );
  describe.skip(title, body);
}

export interface DashboardBrowser {
  browser: Browser;
  /** A fresh context (no storage shared with other pages) and a page in it. */
  newPage(options?: {
    colorScheme?: 'light' | 'dark';
  }): Promise<{ context: BrowserContext; page: Page; errors: string[] }>;
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<DashboardBrowser> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    // Playwright gives each launch a fresh, empty user-data-dir of its own (and removes it)
  });
  mkdirSync(SCREENSHOTS, { recursive: true });
  return {
    browser,
    async newPage(options = {}) {
      const context = await browser.newContext({
        viewport: { width: 1280, height: 800 },
        colorScheme: options.colorScheme ?? 'light',
      });
      // a page that waits for what never comes fails in seconds, not at the test's timeout
      context.setDefaultTimeout(10_000);
      const page = await context.newPage();
      // a script error in the page is a failure of the page: printed, and kept for the test
      const errors: string[] = [];
      page.on('pageerror', (error) => {
        errors.push(error.message);
        process.stdout.write(`[page error] ${error.message}\n`);
      });
      page.on('console', (message) => {
        if (message.type() === 'error') process.stdout.write(`[page console] ${message.text()}\n`);
      });
      return { context, page, errors };
    },
    async close() {
      await browser.close();
    },
  };
}

/** axe-core's rules broken on the page that it rates serious or critical, as `rule: target`. */
export async function seriousAccessibilityViolations(page: Page): Promise<string[]> {
  const { source } = (await import('axe-core')) as unknown as { source: string };
  // evaluated through the DevTools protocol: the page's CSP does not apply to it
  await page.evaluate(source);
  const result = (await page.evaluate(
    "axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21aa'] } })",
  )) as {
    violations: Array<{ id: string; impact: string | null; nodes: Array<{ target: unknown }> }>;
  };
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .flatMap((v) => v.nodes.map((node) => `${v.id}: ${JSON.stringify(node.target)}`));
}
