import { existsSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

/** Debian's Chromium, headless; under CI=true its absence fails the suite instead of skipping it. */
export async function launchChromium(context: Mocha.Context): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    if (process.env.CI === 'true') throw new Error(`Chromium is required under CI=true and ${CHROMIUM} is missing (.ci/run installs it)`);
    console.warn(`    (skipping: no Chromium at ${CHROMIUM})`);
    context.skip();
  }
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** A new tab with downloads allowed, a dialog from the page failing the test. */
export async function consolePage(browser: Browser, width = 1280): Promise<{ context: BrowserContext; page: Page; dialogs: string[] }> {
  const context = await browser.newContext({ acceptDownloads: true, viewport: { width, height: 900 } });
  const page = await context.newPage();
  const dialogs: string[] = [];
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  return { context, page, dialogs };
}

/** Signs in as a person does: the token typed into the labelled field, then Enter. */
export async function signIn(page: Page, base: string, token: string): Promise<void> {
  await page.goto(`${base}/admin/`);
  const signOut = page.getByRole('button', { name: 'Sign out' });
  const field = page.getByLabel(/token/i);
  await signOut.or(field).first().waitFor();
  if (await signOut.isVisible()) return;
  await field.fill(token);
  await page.keyboard.press('Enter');
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
}
