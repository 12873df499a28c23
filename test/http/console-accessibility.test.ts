import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { consolePage, launchChromium, signIn } from '../support/browser.js';
import { seedConsoleDemo, type ConsoleDemo } from '../support/console-demo.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';
import { ok, runCli } from '../support/cli.js';

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

interface Violation {
  readonly id: string;
  readonly impact: string | null;
  readonly help: string;
  readonly nodes: ReadonlyArray<{ target: unknown[] }>;
}

/** axe-core's serious and critical findings on the page as it is now (WCAG 2.x A and AA rules). */
async function seriousViolations(page: Page): Promise<string[]> {
  // Evaluated through the DevTools protocol, which the page's CSP (no inline script) does not govern.
  await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(context: unknown, options: unknown): Promise<{ violations: Violation[] }> } }).axe;
    const result = await axe.run((globalThis as unknown as { document: unknown }).document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] } });
    return result.violations;
  });
  return violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map((violation) => `${violation.impact} ${violation.id}: ${violation.help} (${violation.nodes.map((node) => JSON.stringify(node.target)).join(', ')})`);
}

async function settled(page: Page): Promise<void> {
  await page.waitForFunction(() => {
    const doc = (globalThis as unknown as { document: { querySelector(s: string): unknown; body: { textContent: string | null } } }).document;
    return !doc.querySelector('[aria-busy="true"]') && !doc.body.textContent?.includes('Loading…');
  });
}

describe('the console under axe-core', function () {
  this.timeout(180_000);
  let work: string;
  let serve: ServeProcess;
  let browser: Browser;
  let page: Page;
  let demo: ConsoleDemo;
  let records: { delivery: string; token: string; entitlement: string };

  before(async function () {
    browser = await launchChromium(this);
    work = mkdtempSync(path.join(tmpdir(), 'license-console-axe-'));
    const databaseUrl = path.join(work, 'data', 'db.sqlite');
    serve = await startServe({
      LICENSE_DATABASE_URL: databaseUrl,
      LICENSE_BACKUP_PATH: path.join(work, 'backups'),
      LICENSE_BACKUP_ENCRYPTION_KEY: '56'.repeat(32),
    });
    // A webhook whose receiver is gone: deliveries retrying, for the deliveries' pages.
    writeFileSync(path.join(work, 'notifications.yaml'), 'webhooks:\n  - name: crm\n    url: http://127.0.0.1:9/hook\n    secret: a-secret-of-the-crm-webhook\nrules:\n  - event: license.*\n    webhook: crm\n');
    ok(await runCli(['notifications', 'set', '--file', path.join(work, 'notifications.yaml')], { env: { LICENSE_DATABASE_URL: databaseUrl } }));
    demo = await seedConsoleDemo(serve.url, serve.token!, work);
    assert.equal((await api(serve.url, 'POST', '/api/backups', { token: serve.token })).status, 201);
    const first = async (route: string) => (await api(serve.url, 'GET', route, { token: serve.token })).body[0].id as string;
    records = { delivery: await first('/api/notifications/deliveries?limit=1'), token: await first('/api/tokens?limit=1'), entitlement: await first('/api/entitlements?limit=1') };
    ({ page } = await consolePage(browser));
  });
  after(async () => {
    await browser?.close();
    await serve?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('finds nothing serious on the sign-in page, whose token field is labelled', async () => {
    await page.goto(`${serve.url}/admin/`);
    await page.getByLabel(/token/).waitFor();
    assert.deepEqual(await seriousViolations(page), []);
  });

  // axe at the wide width only: no style rule changes between 640 and 1280 px (admin.css),
  // so at 1024 px axe would read the same page again; the layout is what can differ.
  for (const [width, axe] of [[1280, true], [1024, false]] as const) {
    it(`finds ${axe ? 'nothing serious on any view' : 'no view'} at ${width} px${axe ? ', and no view' : ' that'} scrolls sideways`, async () => {
      await page.setViewportSize({ width, height: 900 });
      await signIn(page, serve.url, serve.token!);
      const views = [
        '/admin/', '/admin/licenses', '/admin/licenses?status=expiring&within=30d', `/admin/licenses/${demo.licenseId}`, '/admin/licenses/new',
        '/admin/customers', `/admin/customers/${demo.customerId}`, '/admin/customers/new', '/admin/machines', `/admin/machines/${demo.machineId}`,
        '/admin/entitlements', `/admin/entitlements/${records.entitlement}`, '/admin/audit', '/admin/deliveries', `/admin/deliveries/${records.delivery}`,
        '/admin/backups', '/admin/signing-keys', '/admin/tokens', `/admin/tokens/${records.token}`,
      ];
      const found: Record<string, string[]> = {};
      for (const view of views) {
        await page.goto(`${serve.url}${view}`);
        await page.getByRole('heading', { level: 1 }).waitFor();
        await settled(page);
        const violations = axe ? await seriousViolations(page) : [];
        const overflow = await page.evaluate(() => {
          const root = (globalThis as unknown as { document: { documentElement: { scrollWidth: number; clientWidth: number } } }).document.documentElement;
          return root.scrollWidth - root.clientWidth;
        });
        if (overflow > 1) violations.push(`the page scrolls sideways by ${overflow} px`);
        if (violations.length > 0) found[view] = violations;
      }
      assert.deepEqual(found, {});
    });
  }

  it('finds nothing serious in the dialogs of the lists', async () => {
    const found: Record<string, string[]> = {};
    for (const [view, button, dialog] of [
      ['/admin/licenses', 'Bulk action…', 'Bulk action'],
      ['/admin/licenses', 'Import CSV…', 'Import licenses from CSV'],
      ['/admin/machines', 'Bulk action…', 'Bulk action'],
      ['/admin/tokens', 'New token', 'New token'],
      ['/admin/entitlements', 'New entitlement', 'New entitlement'],
    ] as const) {
      await page.goto(`${serve.url}${view}`);
      await settled(page);
      await page.getByRole('button', { name: button, exact: true }).click();
      const open = page.getByRole('dialog', { name: dialog });
      await open.waitFor();
      const violations = await seriousViolations(page);
      if (violations.length > 0) found[`${view} ${button}`] = violations;
      await page.keyboard.press('Escape');
      await open.waitFor({ state: 'hidden' });
    }
    assert.deepEqual(found, {});
  });

  it('finds nothing serious in the license page\'s dialogs', async () => {
    await page.goto(`${serve.url}/admin/licenses/${demo.licenseId}`);
    await settled(page);
    const found: Record<string, string[]> = {};
    for (const [button, dialog] of [['Extend', 'Extend the license'], ['Edit', 'Edit license'], ['Check out .lic', 'Check out an offline license file'], ['Suspend', /Suspend license/]] as const) {
      await page.getByRole('button', { name: button, exact: true }).click();
      const open = page.getByRole('dialog', { name: dialog });
      await open.waitFor();
      const violations = await seriousViolations(page);
      if (violations.length > 0) found[button] = violations;
      await page.keyboard.press('Escape');
      await open.waitFor({ state: 'hidden' });
    }
    assert.deepEqual(found, {});
  });
});
