import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { ok, runCli } from '../support/cli.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

/** What the console shows a token short of admin: no license key, no unencrypted archive, no hidden characters. */
describe('the admin console and what a scoped token obtains, in headless Chromium', function () {
  this.timeout(120_000);
  let work: string;
  let serve: ServeProcess;
  let browser: Browser;
  let page: Page | undefined;
  let license: { id: string; key: string; key_prefix: string };
  const hardwareId = 'HW-\u202eexe.gnp';
  const databaseUrl = () => path.join(work, 'data', 'db.sqlite');
  const token = async (name: string, scope: string) =>
    ok(await runCli(['token', 'create', '--name', name, '--scope', scope, '--json'], { env: { LICENSE_DATABASE_URL: databaseUrl() } })).json().token as string;
  /** Signs in, in a context of its own (no session left over), and returns the text of every API answer the page receives. */
  const signIn = async (bearer: string): Promise<string[]> => {
    await page?.context().close();
    page = await (await browser.newContext({ acceptDownloads: true, viewport: { width: 1200, height: 800 } })).newPage();
    const answers: string[] = [];
    // Every API answer passes through here on its way to the page, so the test sees what the page got.
    await page.route('**/api/**', async (route) => {
      const response = await route.fetch();
      answers.push(await response.text());
      await route.fulfill({ response });
    });
    await page.goto(`${serve.url}/admin/`);
    await page.getByLabel('Admin token').fill(bearer);
    await page.keyboard.press('Enter');
    await page.getByText('Signed in.').waitFor();
    return answers;
  };

  before(async function () {
    if (!existsSync(CHROMIUM)) {
      if (process.env.CI === 'true') throw new Error(`Chromium is required under CI=true and ${CHROMIUM} is missing (.ci/run installs it)`);
      console.warn(`    (skipping: no Chromium at ${CHROMIUM})`);
      this.skip();
    }
    work = mkdtempSync(path.join(tmpdir(), 'license-admin-exposure-'));
    // No backup key: the default, under which every backup holds the signing key in the clear.
    serve = await startServe({ LICENSE_DATABASE_URL: databaseUrl(), LICENSE_BACKUP_PATH: path.join(work, 'backups'), LICENSE_CLIENT_RATE_LIMIT: '0' });
    const admin = serve.token!;
    const customer = (await api(serve.url, 'POST', '/api/customers', { token: admin, body: { name: 'Initech' } })).body;
    license = (await api(serve.url, 'POST', '/api/licenses', {
      token: admin, body: { customer_id: customer.id, type: 'time_based', valid_until: '2099-01-01', max_machines: 2, with_decryption_key: true },
    })).body;
    const validated = await api(serve.url, 'POST', '/api/v1/validate', { body: { license_key: license.key, hardware_id: hardwareId, version: '1.0', machine_name: 'front\u200bdesk' } });
    assert.equal(validated.body.valid, true, validated.text);
    assert.equal((await api(serve.url, 'POST', '/api/backups', { token: admin })).status, 201);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  });
  after(async () => {
    await browser?.close();
    await serve?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('never receives or shows a license key when signed in with a read token, on any view', async () => {
    const answers = await signIn(await token('auditor', 'read'));
    for (const [route, heading, ready] of [
      ['/admin/licenses', 'Licenses', `#license-list tr[data-license-id="${license.id}"]`],
      [`/admin/licenses/${license.id}`, `License ${license.key_prefix}…`, '#license-machines tbody tr'],
      ['/admin/machines', 'Machines', '#machine-list tbody tr[data-machine-id]'],
      ['/admin/customers', 'Customers', '#customer-list tbody tr[data-customer-id]'],
      ['/admin/audit', 'Audit log', '#audit-list tbody tr[data-audit-id]'],
      ['/admin/', 'Attention', 'main'],
    ] as const) {
      await page!.goto(`${serve.url}${route}`);
      await page!.getByRole('heading', { level: 1, name: heading }).waitFor();
      await page!.locator(ready).first().waitFor();
      assert.ok(!(await page!.content()).includes(license.key), `${route} shows the key`);
    }
    assert.ok(answers.some((text) => text.includes(license.key_prefix)), 'the page got the licenses');
    for (const text of answers) for (const form of [license.key, license.key.replace(/-/g, '')]) assert.ok(!text.includes(form), `an answer to the page holds the key: ${text.slice(0, 200)}`);
  });

  it('shows a hardware ID holding a bidi override, and a machine name with a zero-width space, escaped', async () => {
    await page!.goto(`${serve.url}/admin/machines`);
    const row = page!.locator('#machine-list tbody tr[data-machine-id]').first();
    await row.waitFor();
    const cells = await row.locator('td').allTextContents();
    assert.equal(cells[0], 'HW-\\u202eexe.gnp');
    assert.equal(cells[1], 'front\\u200bdesk');
    await page!.getByRole('link', { name: 'HW-\\u202eexe.gnp' }).click();
    await page!.getByRole('heading', { level: 1, name: 'Machine HW-\\u202eexe.gnp' }).waitFor();
    await page!.goto(`${serve.url}/admin/licenses/${license.id}`);
    await page!.locator('#license-machines td', { hasText: 'front\\u200bdesk' }).waitFor();
    // The audit entry's details quote them too.
    await page!.goto(`${serve.url}/admin/audit?action=machine.activated`);
    await page!.locator('#audit-list dd', { hasText: 'HW-\\u202eexe.gnp' }).waitFor();
    for (const route of ['/admin/machines', `/admin/licenses/${license.id}`, '/admin/audit?action=machine.activated']) {
      await page!.goto(`${serve.url}${route}`);
      await page!.locator('main td', { hasText: 'HW-\\u202eexe.gnp' }).first().waitFor();
      const text = await page!.locator('main').innerText();
      assert.ok(!text.includes('\u202e') && !text.includes('\u200b'), `${route} shows an invisible character`);
    }
  });

  it('offers an unencrypted backup\'s download to an admin token only, and says why on the button', async () => {
    await signIn(await token('ci-backups', 'backups'));
    await page!.goto(`${serve.url}/admin/backups`);
    const button = page!.locator('#backup-list tbody tr[data-backup-id]').first().getByRole('button', { name: 'Download (admin only)' });
    await button.waitFor();
    assert.equal(await button.isDisabled(), true, 'a backups token cannot press it');
    assert.match((await button.getAttribute('title'))!, /Not encrypted: this archive holds the private signing key .* only an admin token may download it/);
    assert.equal(await page!.getByRole('button', { name: /^Restore/ }).count(), 0, 'restoring needs the restore scope');

    await signIn(serve.token!);
    await page!.goto(`${serve.url}/admin/backups`);
    const row = page!.locator('#backup-list tbody tr[data-backup-id]').first();
    const forAdmin = row.getByRole('button', { name: 'Download (admin only)' });
    await forAdmin.waitFor();
    assert.equal(await forAdmin.isEnabled(), true);
    const [download] = await Promise.all([page!.waitForEvent('download'), forAdmin.click()]);
    const listed = (await api(serve.url, 'GET', '/api/backups', { token: serve.token })).body.backups[0];
    assert.deepEqual(readFileSync((await download.path())!), readFileSync(path.join(work, 'backups', listed.file)));
  });
});
