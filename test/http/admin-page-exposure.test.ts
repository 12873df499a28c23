import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { ok, runCli } from '../support/cli.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

/** What the admin page shows a token short of admin: no license key, no unencrypted archive, no hidden characters. */
describe('the admin page and what a scoped token obtains, in headless Chromium', function () {
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

  it('never receives or shows a license key when signed in with a read token', async () => {
    const answers = await signIn(await token('auditor', 'read'));
    await page!.locator('#license-table tr', { hasText: `${license.key_prefix}…` }).waitFor();
    await page!.locator('#machine-table tbody tr').first().waitFor();
    const texts = [...answers];
    assert.ok(texts.some((text) => text.includes(license.key_prefix)), 'the page got the licenses');
    for (const text of texts) for (const form of [license.key, license.key.replace(/-/g, '')]) assert.ok(!text.includes(form), `an answer to the page holds the key: ${text.slice(0, 200)}`);
    assert.ok(!(await page!.content()).includes(license.key));
  });

  it('shows a hardware ID holding a bidi override, and a machine name with a zero-width space, escaped', async () => {
    const row = page!.locator('#machine-table tbody tr').first();
    const cells = await row.locator('td').allTextContents();
    assert.equal(cells[1], 'HW-\\u202eexe.gnp');
    assert.equal(cells[2], 'front\\u200bdesk');
    assert.ok(!(await page!.locator('#machine-table').innerText()).includes('\u202e'));
  });

  it('offers an unencrypted backup\'s download to an admin token only, and says why on the button', async () => {
    await signIn(await token('ci-backups', 'backups'));
    const button = page!.locator('#backup-table tbody tr').first().getByRole('button', { name: 'Download (admin only)' });
    await button.waitFor();
    assert.equal(await button.isDisabled(), true, 'a backups token cannot press it');
    assert.match((await button.getAttribute('title'))!, /Not encrypted: this archive holds the private signing key .* only an admin token may download it/);

    await signIn(serve.token!);
    const row = page!.locator('#backup-table tbody tr').first();
    const forAdmin = row.getByRole('button', { name: 'Download (admin only)' });
    await forAdmin.waitFor();
    assert.equal(await forAdmin.isEnabled(), true);
    const [download] = await Promise.all([page!.waitForEvent('download'), forAdmin.click()]);
    const listed = (await api(serve.url, 'GET', '/api/backups', { token: serve.token })).body.backups[0];
    assert.deepEqual(readFileSync((await download.path())!), readFileSync(path.join(work, 'backups', listed.file)));
  });
});
