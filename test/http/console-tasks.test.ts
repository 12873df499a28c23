import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { LicenseClient } from '../../src/client/index.js';
import { verifyLicenseFile } from '../../src/lib/offline/verify.js';
import { cellText, parseCsv } from '../../src/lib/csv.js';
import { consolePage, launchChromium, signIn } from '../support/browser.js';
import { seedConsoleDemo, type ConsoleDemo } from '../support/console-demo.js';
import { forEachEngine } from '../support/engines.js';
import { FakeClock } from '../support/fake-clock.js';
import { IN_PROCESS_ADMIN_TOKEN, startInProcessDaemon, type InProcessDaemon } from '../support/in-process-daemon.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

// The daily tasks of a support person, done in the console as one would: by labels, roles
// and the text on the screen, in Debian's Chromium against a real `serve` on each engine.
forEachEngine('the console: a support person\'s day', (fixture) => {
  let work: string;
  let serve: ServeProcess;
  let browser: Browser;
  let page: Page;
  let dialogs: string[];
  let demo: ConsoleDemo;
  const DAY = 86_400_000;
  const read = async (route: string) => {
    const answer = await api(serve.url, 'GET', route, { token: serve.token });
    assert.equal(answer.status, 200, answer.text);
    return answer.body;
  };

  before(async function () {
    this.timeout(120_000);
    browser = await launchChromium(this);
    work = mkdtempSync(path.join(tmpdir(), 'license-console-'));
    serve = await startServe({ LICENSE_DATABASE_URL: await fixture.freshUrl(), LICENSE_BACKUP_PATH: path.join(work, 'backups') });
    demo = await seedConsoleDemo(serve.url, serve.token!, work);
    ({ page, dialogs } = await consolePage(browser));
    await signIn(page, serve.url, serve.token!);
  });
  after(async () => {
    await browser?.close();
    await serve?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });
  afterEach(() => assert.deepEqual(dialogs, [], 'no alert, confirm or prompt from the page'));

  it('finds a license by a key prefix typed without dashes, in lower case', async () => {
    const typed = demo.licenseKey.replace(/-/g, '').slice(0, 7).toLowerCase();
    await page.getByRole('searchbox', { name: 'Search' }).fill(typed);
    const result = page.getByRole('list', { name: 'Search results' }).getByRole('link', { name: new RegExp(demo.keyPrefix) });
    await result.click();
    await page.getByRole('heading', { level: 1, name: `License ${demo.keyPrefix}…` }).waitFor();
    assert.equal(new URL(page.url()).pathname, `/admin/licenses/${demo.licenseId}`);
  });

  it('finds a customer by a part of their email, in another case', async () => {
    await page.getByRole('searchbox', { name: 'Search' }).fill('LICENSING@ACME');
    await page.getByRole('list', { name: 'Search results' }).getByRole('link', { name: /Acme Corporation/ }).click();
    await page.getByRole('heading', { level: 1, name: 'Acme Corporation' }).waitFor();
    assert.equal(new URL(page.url()).pathname, `/admin/customers/${demo.customerId}`);
  });

  it('extends a license by 30 days', async () => {
    const before = await read(`/api/licenses/${demo.licenseId}`);
    await page.goto(`${serve.url}/admin/licenses/${demo.licenseId}`);
    await page.getByRole('button', { name: 'Extend' }).click();
    await page.getByLabel('Days to add').fill('30');
    await page.getByRole('dialog', { name: 'Extend the license' }).getByRole('button', { name: 'Extend' }).click();
    await page.getByText(new RegExp(`^License ${demo.keyPrefix} extended by 30 days`)).waitFor();
    const after = await read(`/api/licenses/${demo.licenseId}`);
    assert.equal(Date.parse(after.valid_until) - Date.parse(before.valid_until), 30 * DAY);
    const entries = await read(`/api/audit?entity_type=license&entity_id=${demo.licenseId}&action=license.renewed`);
    assert.equal(entries.length, 1);
    assert.equal(entries[0].actor, 'token:bootstrap', 'audited under the token\'s name');
  });

  it('frees the seat of a machine that died with its offline file', async () => {
    const [machine] = (await read(`/api/machines?license_id=${demo.licenseId}`)).filter((m: { hardware_id: string }) => m.hardware_id === 'ACME-AIRGAP-9');
    assert.equal(machine.holds_seat, true);
    const seatsBefore = (await read(`/api/licenses/${demo.licenseId}`)).machines_in_use;
    await page.goto(`${serve.url}/admin/licenses/${demo.licenseId}`);
    const row = page.getByRole('row', { name: /ACME-AIRGAP-9/ });
    await row.getByRole('button', { name: 'Free seat' }).click();
    await page.getByRole('dialog', { name: /Free the seat of ACME-AIRGAP-9/ }).getByRole('button', { name: 'Free seat' }).click();
    await page.getByText('The seat of ACME-AIRGAP-9 is free.').waitFor();
    assert.equal((await read(`/api/machines/${machine.id}`)).holds_seat, false);
    assert.equal((await read(`/api/licenses/${demo.licenseId}`)).machines_in_use, seatsBefore - 1);
    await row.getByRole('button', { name: 'Activate' }).waitFor();
  });

  it('says until when a deactivated machine\'s grace token keeps its seat', async () => {
    await page.goto(`${serve.url}/admin/licenses/${demo.licenseId}`);
    const row = page.getByRole('row', { name: /ACME-WS-0002/ });
    await row.getByRole('button', { name: 'Deactivate' }).click();
    await page.getByRole('dialog', { name: /Deactivate machine ACME-WS-0002/ }).getByRole('button', { name: 'Deactivate' }).click();
    await page.getByText(/^Machine ACME-WS-0002 deactivated\. its seat stays taken until .*grace token/).waitFor();
    await row.getByRole('button', { name: 'Activate' }).waitFor();
  });

  it('creates a customer and a license, and downloads its .lic', async () => {
    await page.goto(`${serve.url}/admin/customers`);
    await page.getByRole('link', { name: 'New customer' }).click();
    await page.getByLabel('Name').fill('Wayne Enterprises');
    await page.getByLabel(/^Email/).fill('bruce@wayne.example');
    await page.getByRole('button', { name: 'Create customer' }).click();
    await page.getByRole('heading', { level: 1, name: 'Wayne Enterprises' }).waitFor();
    await page.getByRole('link', { name: 'New license' }).click();
    await page.getByLabel('Last day included (UTC)').fill('2031-06-30');
    await page.getByLabel(/^Maximum machines/).fill('2');
    await page.getByLabel(/^Entitlements/).fill('PRO, API_CALLS:500');
    await page.getByRole('button', { name: 'Create license' }).click();
    await page.getByText(/^Created license /).waitFor();
    const id = new URL(page.url()).pathname.split('/').at(-1)!;
    const license = await read(`/api/licenses/${id}`);
    assert.equal(license.customer_name, 'Wayne Enterprises');
    assert.equal(license.valid_until, '2031-07-01T00:00:00.000Z', 'the last day typed is included');
    assert.deepEqual(license.entitlements.map((e: { code: string; usage_limit: number | null }) => [e.code, e.usage_limit]), [['API_CALLS', 500], ['PRO', null]]);

    await page.getByRole('button', { name: 'Check out .lic' }).click();
    await page.getByLabel(/^Hardware ID/).fill('WAYNE-CAVE-01');
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download .lic' }).click()]);
    const publicKey = (await read('/api/signing-key')).public_key_pem;
    const verified = verifyLicenseFile(readFileSync((await download.path())!), { publicKey, hardwareId: 'WAYNE-CAVE-01' });
    assert.equal(verified.payload.license_id, id);
  });

  it('answers an activation request file, and the client installs the answer', async () => {
    const publicKey = (await read('/api/signing-key')).public_key_pem;
    const client = new LicenseClient({
      licenseKey: demo.licenseKey,
      version: '4.2.0',
      hardwareId: 'ACME-AIRGAP-22',
      offline: { enabled: true, licenseFile: path.join(work, 'airgap.lic'), publicKey, cacheDir: path.join(work, 'client-cache') },
    });
    const { text, request } = await client.createActivationRequest({ machineName: 'lab bench' });
    const requestFile = path.join(work, 'activation-request.txt');
    writeFileSync(requestFile, text);
    await page.goto(`${serve.url}/admin/licenses/${demo.licenseId}`);
    await page.getByRole('button', { name: 'Check out .lic' }).click();
    await page.getByLabel('An activation request file').check();
    await page.getByLabel('Activation request file', { exact: true }).setInputFiles(requestFile);
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download .lic' }).click()]).catch(async (error) => {
      throw new Error(`${error}; the page said: ${await page.locator('#status').textContent()}`);
    });
    const installed = await client.installLicenseFile(readFileSync((await download.path())!));
    assert.equal(installed.requestNonce, request.nonce);
    assert.equal(installed.hardwareId, 'ACME-AIRGAP-22');
  });

  /** Every row of an API list, following its Link headers. */
  const everyRow = async (route: string) => {
    const rows: Array<Record<string, unknown>> = [];
    for (let next: string | null = route; next;) {
      const answer = await api(serve.url, 'GET', next, { token: serve.token });
      assert.equal(answer.status, 200, answer.text);
      rows.push(...answer.body);
      next = /^<([^>]+)>/.exec(answer.headers.get('link') ?? '')?.[1] ?? null;
    }
    return rows;
  };

  it('exports a filtered list to CSV: the API\'s rows, cell for cell', async () => {
    await page.goto(`${serve.url}/admin/licenses?status=expiring&within=30d`);
    await page.getByRole('row', { name: /Initech/ }).waitFor();
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export CSV' }).click()]);
    const [header, ...records] = parseCsv(readFileSync((await download.path())!, 'utf8'));
    const rows = await everyRow('/api/licenses?status=expiring&within=30d&limit=1000');
    assert.ok(rows.length >= 2, `${rows.length} licenses end within 30 days`);
    const columns = header!.fields;
    assert.ok(columns.includes('key') && columns.includes('status'));
    assert.deepEqual(records.map((record) => record.fields), rows.map((row) => columns.map((column) => cellText(row[column]))));
  });

  it('bulk-extends every license of a filter by 30 days after its preview', async () => {
    const route = '/api/licenses?status=expiring&within=30d&limit=1000';
    const before = await everyRow(route);
    await page.goto(`${serve.url}/admin/licenses?status=expiring&within=30d`);
    await page.getByRole('button', { name: 'Bulk action…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Bulk action' });
    await dialog.getByLabel('Action').selectOption('extend');
    await dialog.getByLabel('Days to add').fill('30');
    assert.equal(await dialog.getByRole('button', { name: /^Run/ }).isDisabled(), true, 'nothing runs before its preview');
    await dialog.getByRole('button', { name: 'Preview' }).click();
    await dialog.getByText(`This would extend by 30 days ${before.length} licenses.`).waitFor();
    await dialog.getByRole('button', { name: `Run on ${before.length} licenses` }).click();
    await page.getByText(new RegExp(`^Bulk job done: ${before.length} changed, 0 unchanged, 0 refused\\.`)).waitFor({ timeout: 30_000 });
    for (const license of before) {
      const after = await read(`/api/licenses/${license.id}`);
      assert.equal(Date.parse(after.valid_until) - Date.parse(String(license.valid_until)), 30 * DAY, `license ${license.id}`);
      const renewals = await read(`/api/audit?entity_type=license&entity_id=${license.id}&action=license.renewed&since=${encodeURIComponent(new Date(Date.now() - 120_000).toISOString())}`);
      assert.equal(renewals.length, 1, 'one audit entry per license');
    }
    await dialog.getByRole('button', { name: 'Close' }).click();
  });

  it('imports licenses from CSV after a dry run that reported a bad row by its line', async () => {
    const bad = path.join(work, 'licenses-bad.csv');
    const good = path.join(work, 'licenses-good.csv');
    const rows = (third: string) => `customer_email,type,valid_until,max_machines\r\nit@globex.example,time_based,2030-01-31,2\r\nlicensing@acme.example,hybrid,2030-06-30,\r\n${third}\r\n`;
    writeFileSync(bad, rows('peter@initech.example,perpetual,2030-12-31,1'));
    writeFileSync(good, rows('peter@initech.example,hybrid,2030-12-31,1'));
    const count = async () => (await read('/api/licenses/count')).count;
    const before = await count();
    await page.goto(`${serve.url}/admin/licenses`);
    await page.getByRole('button', { name: 'Import CSV…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Import licenses from CSV' });
    await dialog.getByLabel('CSV file').setInputFiles(bad);
    await dialog.getByRole('button', { name: 'Check file' }).click();
    await dialog.getByText('1 problem in 3 rows: nothing can be imported until they are fixed.').waitFor();
    const problem = dialog.getByRole('table', { name: 'Problems by line' }).getByRole('row').nth(1);
    assert.deepEqual(await problem.getByRole('cell').allInnerTexts().then((cells) => cells.slice(0, 2)), ['4', 'type']);
    assert.equal(await dialog.getByRole('button', { name: /^Import/ }).isDisabled(), true);
    assert.equal(await count(), before, 'nothing written');
    await dialog.getByLabel('CSV file').setInputFiles(good);
    await dialog.getByRole('button', { name: 'Check file' }).click();
    await dialog.getByText('3 rows, all valid.').waitFor();
    await dialog.getByRole('button', { name: 'Import 3 licenses' }).click();
    await page.getByText('Imported 3 licenses.').waitFor();
    assert.equal(await count(), before + 3);
  });
});

// `serve` keeps the real time; a daemon in this process runs on a clock the test moves, and
// the console on it shows the counts of that clock.
forEachEngine('the console\'s attention page on a clock that moves', (fixture) => {
  let daemon: InProcessDaemon;
  let browser: Browser;
  const DAY = 86_400_000;
  const clock = new FakeClock(Date.parse('2026-05-01T12:00:00.000Z'));

  before(async function () {
    this.timeout(60_000);
    browser = await launchChromium(this);
    daemon = await startInProcessDaemon(await fixture.freshUrl(), () => clock.now());
  });
  after(async () => {
    await browser?.close();
    await daemon?.stop();
  });

  it('shows "ending within 7 days" grow by one when the clock reaches a week before a license\'s end', async function () {
    this.timeout(60_000);
    const call = async (route: string, body: unknown) => (await api(daemon.url, 'POST', route, { token: IN_PROCESS_ADMIN_TOKEN, body })).body;
    const customer = await call('/api/customers', { name: 'Soylent' });
    await call('/api/licenses', { customer_id: customer.id, type: 'time_based', valid_until: '2026-05-20T12:00:00Z' });
    const { page } = await consolePage(browser);
    await signIn(page, daemon.url, IN_PROCESS_ADMIN_TOKEN);
    const card = page.getByRole('link', { name: /ending within 7 days/ });
    await card.waitFor();
    assert.match(await card.innerText(), /^0\s/);
    clock.set(new Date(Date.parse('2026-05-20T12:00:00Z') - 7 * DAY));
    await page.getByRole('button', { name: 'Refresh' }).click();
    await page.getByText('Counts refreshed.').waitFor();
    assert.match(await card.innerText(), /^1\s/);
    await card.click();
    await page.getByRole('heading', { level: 1, name: 'Licenses' }).waitFor();
    assert.equal(new URL(page.url()).search, '?status=expiring&within=7d');
    await page.getByRole('row', { name: /Soylent/ }).waitFor();
  });
});
