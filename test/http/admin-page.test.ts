import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';
import { raiseEvent } from '../../src/lib/notifications/outbox.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import { runCli } from '../support/cli.js';
import { eventually } from '../support/fake-clock.js';
import { startReceiver } from '../support/receiver.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
// Pictures for looking at a failure; docs/console/ has its own script (scripts/console-screenshots.ts).
const screenshot = (work: string, name: string) => path.join(work, name);

/** The texts of a table row's cells, as a person reads them. */
const cells = (row: Locator) => row.locator('td').allInnerTexts().then((texts) => texts.map((text) => text.trim()));
/** The rows of a console list (its data rows: the "nothing here" row has no data attribute). */
const rowsOf = (page: Page, list: string, attribute: string) => page.locator(`#${list} tbody tr[data-${attribute}]`);
const idsOf = (page: Page, list: string, attribute: string) =>
  rowsOf(page, list, attribute).evaluateAll((rows, name) => rows.map((row) => (row as unknown as { getAttribute(n: string): string }).getAttribute(name)), `data-${attribute}`);

describe('the admin console in headless Chromium', function () {
  this.timeout(180_000);
  let work: string;
  let serve: ServeProcess;
  let browser: Browser;
  let page: Page;
  let license: { id: string; key: string; key_prefix: string };
  let customerId: string;
  let machineId: string;
  const dialogs: string[] = [];
  const hostile = '<img src=x onerror=alert(1)>';

  /** Goes to a view as a person does: by its link in the navigation, then waits for its heading. */
  const open = async (link: string, heading: string | RegExp = link) => {
    await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: link, exact: true }).click();
    await page.getByRole('heading', { level: 1, name: heading }).waitFor();
  };
  /** A page by its address (a link pasted from a ticket). */
  const visit = async (route: string, heading: string | RegExp) => {
    await page.goto(`${serve.url}${route}`);
    await page.getByRole('heading', { level: 1, name: heading }).waitFor();
  };
  const status = () => page.getByRole('status').and(page.locator('#status'));

  before(async function () {
    if (!existsSync(CHROMIUM)) {
      if (process.env.CI === 'true') throw new Error(`Chromium is required under CI=true and ${CHROMIUM} is missing (.ci/run installs it)`);
      console.warn(`    (skipping: no Chromium at ${CHROMIUM})`);
      this.skip();
    }
    work = mkdtempSync(path.join(tmpdir(), 'license-admin-page-'));
    serve = await startServe({
      LICENSE_DATABASE_URL: path.join(work, 'data', 'db.sqlite'),
      LICENSE_BACKUP_PATH: path.join(work, 'backups'),
      LICENSE_BACKUP_ENCRYPTION_KEY: '12'.repeat(32),
    });
    const token = serve.token!;
    const customer = (await api(serve.url, 'POST', '/api/customers', { token, body: { name: hostile } })).body;
    customerId = customer.id;
    license = (await api(serve.url, 'POST', '/api/licenses', { token, body: { customer_id: customer.id, type: 'hybrid', valid_from: '2025-01-01', valid_until: '2099-01-01' } })).body;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1200, height: 800 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: serve.url });
    page = await context.newPage();
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
  });
  after(async () => {
    await browser?.close();
    await serve?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('shows no navigation and no Sign out button before anyone signs in', async () => {
    await page.goto(`${serve.url}/admin/`);
    await page.getByLabel('Admin token').waitFor();
    assert.equal(await page.getByRole('button', { name: 'Sign out' }).count(), 0);
    assert.equal(await page.getByRole('navigation', { name: 'Views' }).count(), 0);
  });

  it('is served with a same-origin Content-Security-Policy at every view\'s address and signs in with the token', async () => {
    const response = await page.goto(`${serve.url}/`);
    const policy = response!.headers()['content-security-policy']!;
    assert.match(policy, /default-src 'self'/);
    assert.match(policy, /script-src 'self'(;|$)/, 'no inline script');
    assert.equal(new URL(page.url()).pathname, '/admin/');
    for (const view of ['licenses', 'backups', 'deliveries/some-id', 'tokens']) {
      const answer = await fetch(`${serve.url}/admin/${view}`);
      assert.equal(answer.status, 200, view);
      assert.equal(answer.headers.get('content-security-policy'), policy, view);
      assert.doesNotMatch(await answer.text(), /<script(?![^>]*\bsrc=)/, `${view}: every script is a file`);
    }
    await page.getByLabel('Admin token').fill('lsat_wrong');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('The token was not accepted.').waitFor();
    await page.getByLabel('Admin token').fill(serve.token!);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Attention' }).waitFor();
    await status().getByText('Signed in.').waitFor();
    assert.equal(await page.evaluate(() => (globalThis as unknown as { document: { cookie: string } }).document.cookie), '', 'no cookie');
    assert.ok(!page.url().includes('lsat_'), 'the token is not in the URL');
  });

  it('renders a hostile customer name as text, in the lists and as a page title', async () => {
    await open('Licenses');
    await page.locator('#license-list td', { hasText: hostile }).waitFor();
    await open('Customers');
    await page.locator('#customer-list').getByRole('link', { name: hostile }).click();
    await page.getByRole('heading', { level: 1, name: hostile }).waitFor();
    await visit('/admin/audit?entity_type=customer', 'Audit log');
    await page.locator('#audit-list dd', { hasText: hostile }).waitFor();
    assert.equal(await page.locator('main img').count(), 0);
    assert.deepEqual(dialogs, []);
  });

  it('creates a backup, lists it, downloads its exact bytes and validates it', async () => {
    await open('Backups');
    await page.getByRole('button', { name: 'Create backup' }).click();
    await status().getByText(/^Created backup /).waitFor();
    const row = rowsOf(page, 'backup-list', 'backup-id').first();
    await row.waitFor();
    const id = await row.getAttribute('data-backup-id');
    assert.match(id!, /^\d{8}T\d{9}Z-[0-9a-f]{6}$/);
    await page.locator('#place-table tr[data-place="local"]').getByText(id!).waitFor();
    await page.screenshot({ path: screenshot(work, 'admin-backups.png') });
    const [download] = await Promise.all([page.waitForEvent('download'), row.getByRole('button', { name: 'Download', exact: true }).click()]);
    const listed = (await api(serve.url, 'GET', '/api/backups', { token: serve.token })).body.backups[0];
    assert.equal(download.suggestedFilename(), listed.file);
    assert.deepEqual(readFileSync((await download.path())!), readFileSync(path.join(work, 'backups', listed.file)));
    await status().getByText(`Downloaded ${listed.file}.`).waitFor();
    await row.getByRole('button', { name: 'Validate' }).click();
    await status().getByText(new RegExp(`^Backup ${id} is valid`)).waitFor();
  });

  it('restores after the id is typed, keeping a license deactivated since the backup deactivated unless the box is unticked', async () => {
    const id = await rowsOf(page, 'backup-list', 'backup-id').first().getAttribute('data-backup-id');
    await api(serve.url, 'POST', `/api/licenses/${license.id}/deactivate`, { token: serve.token });
    const row = page.locator(`#backup-list tr[data-backup-id="${id}"]`);
    await row.getByRole('button', { name: 'Restore…' }).click();
    const dialog = page.getByRole('dialog', { name: `Restore ${id}` });
    // The dry run's word before anything is typed: this server's own backup changes no key.
    await dialog.getByText("The checks pass; this server's signing keys would stay as they are.").waitFor();
    await dialog.getByLabel('Type the backup id to confirm').fill('not the id');
    await dialog.getByRole('button', { name: 'Restore', exact: true }).click();
    await dialog.getByText('The id typed does not match the backup to restore.').waitFor();
    assert.equal((await api(serve.url, 'GET', `/api/licenses/${license.id}`, { token: serve.token })).body.active, false, 'nothing restored');
    await dialog.getByLabel('Type the backup id to confirm').fill(id!);
    assert.equal(await dialog.getByLabel(/Keep licenses and customers deactivated/).isChecked(), true, 'revocations are kept unless unticked');
    assert.equal(await dialog.getByLabel(/signing keys and tokens replace this server's/).count(), 0, 'this server\'s own backup: nothing to replace');
    await dialog.getByRole('button', { name: 'Restore', exact: true }).click();
    await status().getByText(new RegExp(`^Restored backup ${id}.*Kept deactivated: license ${license.key_prefix}`)).waitFor();
    assert.equal(await dialog.isVisible(), false, 'the dialog closes once restored');
    assert.equal((await api(serve.url, 'GET', `/api/licenses/${license.id}`, { token: serve.token })).body.active, false, 'deactivated after the backup: stays so');
    await row.getByRole('button', { name: 'Restore…' }).click();
    await dialog.getByLabel('Type the backup id to confirm').fill(id!);
    await dialog.getByLabel(/Keep licenses and customers deactivated/).uncheck();
    await dialog.getByRole('button', { name: 'Restore', exact: true }).click();
    await status().getByText(new RegExp(`^Restored backup ${id}.*Active again, as in the backup: license ${license.key_prefix}`)).waitFor();
    assert.equal((await api(serve.url, 'GET', `/api/licenses/${license.id}`, { token: serve.token })).body.active, true);
  });

  it('shows the signing keys and their key set, and copies the public key', async () => {
    await open('Signing keys');
    const pem = (await api(serve.url, 'GET', '/api/signing-key', { token: serve.token })).body.public_key_pem;
    const { keys } = (await api(serve.url, 'GET', '/api/signing-keys', { token: serve.token })).body;
    await page.getByLabel('Active public key (PEM)').getByText('BEGIN PUBLIC KEY').waitFor();
    assert.equal(await page.getByLabel('Active public key (PEM)').textContent(), pem);
    const rows = page.locator('#key-table tbody tr');
    await rows.first().waitFor();
    const shown = await rows.evaluateAll((trs) => trs.map((tr) => {
      const tds = [...(tr as unknown as { querySelectorAll(s: string): Array<{ textContent: string }> }).querySelectorAll('td')];
      return [tds[0]!.textContent, tds[1]!.textContent, (tr as unknown as { querySelector(s: string): { getAttribute(n: string): string } }).querySelector('time').getAttribute('datetime'), tds[3]!.textContent];
    }));
    assert.deepEqual(shown, keys.map((k: any) => [k.key_id, k.state, k.created_at, k.fingerprint]));
    const keySet = keys.map((k: any) => `# key_id ${k.key_id} ${k.state}\n${k.public_key_pem}`).join('');
    assert.equal(await page.getByLabel('Key set (PEM)').textContent(), keySet);
    await page.getByRole('button', { name: 'Copy public key' }).click();
    await status().getByText('Public key copied.').waitFor();
    assert.equal(await page.evaluate(() => (globalThis as unknown as { navigator: { clipboard: { readText(): Promise<string> } } }).navigator.clipboard.readText()), pem);
    await page.getByRole('button', { name: 'Copy key set' }).click();
    await status().getByText('Key set copied.').waitFor();
    assert.equal(await page.evaluate(() => (globalThis as unknown as { navigator: { clipboard: { readText(): Promise<string> } } }).navigator.clipboard.readText()), keySet);
  });

  it('checks a license out to a .lic file from its page', async () => {
    const pem = (await api(serve.url, 'GET', '/api/signing-key', { token: serve.token })).body.public_key_pem;
    await visit(`/admin/licenses/${license.id}`, `License ${license.key_prefix}…`);
    await page.getByRole('button', { name: 'Check out .lic' }).click();
    const dialog = page.getByRole('dialog', { name: 'Check out an offline license file' });
    await dialog.getByLabel('Days the file is valid (1-365)').fill('10');
    await dialog.getByLabel(/^Hardware ID/).fill('browser-machine');
    const [download] = await Promise.all([page.waitForEvent('download'), dialog.getByRole('button', { name: 'Download .lic' }).click()]);
    assert.match(download.suggestedFilename(), /^license-.+\.lic$/);
    const { verifyLicenseFile } = await import('../../src/lib/offline/verify.js');
    const verified = verifyLicenseFile(readFileSync((await download.path())!), { publicKey: pem, hardwareId: 'browser-machine' });
    assert.equal(verified.payload.license_id, license.id);
    await page.locator('#license-machines tr', { hasText: 'browser-machine' }).waitFor();
  });

  it('lists machines with their seats and deactivates one after a confirmation', async () => {
    await open('Machines');
    const row = page.locator('#machine-list tbody tr', { hasText: 'browser-machine' });
    await row.waitFor();
    machineId = (await row.getAttribute('data-machine-id'))!;
    await row.getByRole('button', { name: 'Deactivate' }).click();
    const dialog = page.getByRole('dialog', { name: 'Deactivate machine browser-machine?' });
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    assert.equal((await api(serve.url, 'GET', `/api/machines/${machineId}`, { token: serve.token })).body.active, true, 'cancelled: still active');
    await row.getByRole('button', { name: 'Deactivate' }).click();
    await dialog.getByRole('button', { name: 'Deactivate' }).click();
    await status().getByText(/^Machine browser-machine deactivated\./).waitFor();
    assert.equal((await api(serve.url, 'GET', `/api/machines/${machineId}`, { token: serve.token })).body.active, false);
    await row.getByRole('button', { name: 'Activate' }).waitFor();
  });

  it('shows a failed delivery and a retrying one, filters by status, and redelivers the failed one under the same id', async () => {
    const receiver = await startReceiver();
    try {
      const env = { LICENSE_DATABASE_URL: path.join(work, 'data', 'db.sqlite') };
      writeFileSync(path.join(work, 'n.yaml'), `webhooks:\n  - name: ops\n    url: ${receiver.url}\n    secret: a-secret-of-the-webhook\nrules:\n  - event: backup.failed\n    webhook: ops\n`);
      const set = await runCli(['notifications', 'set', '--file', path.join(work, 'n.yaml')], { env });
      assert.equal(set.code, 0, set.stderr);
      // A delivery the deliverer gave up on, written as it records one: failed in the same transaction;
      // and one it is still retrying, its next attempt a day away.
      const db = await openDatabase(env.LICENSE_DATABASE_URL);
      let id: string;
      let retrying: string;
      try {
        [id, retrying] = await db.transaction(async (tx) => {
          const [raised] = await raiseEvent(tx, 'backup.failed', { error: 'disk full' });
          await tx.execute(`UPDATE notification_deliveries SET status = 'failed', attempts = 9, last_status = 500, last_error = 'HTTP 500', last_attempt_at = created_at WHERE id = ?`, [raised!]);
          const [again] = await raiseEvent(tx, 'backup.failed', { error: 'disk still full' });
          await tx.execute(`UPDATE notification_deliveries SET attempts = 3, last_status = 503, last_attempt_at = created_at, next_attempt_at = ? WHERE id = ?`, [new Date(Date.now() + 86_400_000).toISOString(), again!]);
          return [raised!, again!];
        });
      } finally {
        await db.close();
      }
      await open('Deliveries');
      const row = page.locator(`#delivery-list tr[data-delivery-id="${id}"]`);
      await row.waitFor();
      assert.deepEqual((await cells(row)).slice(0, 5), ['backup.failed', 'webhook ops', 'failed', '9', 'HTTP 500']);
      const pending = page.locator(`#delivery-list tr[data-delivery-id="${retrying}"]`);
      assert.match((await cells(pending))[2]!, /^pending\s+next in 2[34] h/, 'a retrying delivery says when it is tried next');

      await page.getByLabel('Status').selectOption('failed');
      await page.waitForURL(/\/admin\/deliveries\?status=failed$/);
      await pending.waitFor({ state: 'detached' });
      await row.waitFor();
      assert.deepEqual(await idsOf(page, 'delivery-list', 'delivery-id'), [id]);
      await page.getByLabel('Status').selectOption('pending');
      await row.waitFor({ state: 'detached' });
      await pending.waitFor();
      assert.deepEqual(await idsOf(page, 'delivery-list', 'delivery-id'), [retrying]);
      await page.goBack();
      await row.waitFor();
      assert.equal(await page.getByLabel('Status').inputValue(), 'failed', 'back: the filter of the page before');

      await row.getByRole('button', { name: 'Redeliver' }).click();
      await status().getByText(`Delivery ${id} is pending again: the server sends it to webhook ops within a few seconds.`).waitFor();
      await page.getByText('No failed deliveries.').waitFor();
      await eventually(() => receiver.received.some((request) => request.headers['x-license-server-delivery'] === id), 'the daemon sent it', 15_000);
      await eventually(async () => (await api(serve.url, 'GET', `/api/notifications/deliveries/${id}`, { token: serve.token })).body.status === 'delivered', 'it is recorded as delivered');
      await page.getByLabel('Status').selectOption('');
      await row.waitFor();
      assert.deepEqual((await cells(row)).slice(2, 4), ['delivered', '10']);

      await row.getByRole('link', { name: 'backup.failed' }).click();
      await page.getByRole('heading', { level: 1, name: 'Delivery of backup.failed' }).waitFor();
      await page.getByText('disk full', { exact: true }).waitFor();
      await page.locator('#audit-title ~ .scroll tr', { hasText: 'notification.redelivered' }).waitFor();
      assert.equal(new URL(page.url()).pathname, `/admin/deliveries/${id}`);
    } finally {
      await receiver.close();
    }
  });

  it('shows deliveries a page at a time: Next and Previous page, never more than one page of rows', async () => {
    const db = await openDatabase(path.join(work, 'data', 'db.sqlite'));
    try {
      // Delivered as the deliverer records it, in the raising transaction: nothing for the daemon to send.
      await db.transaction(async (tx) => {
        for (let i = 0; i < 104; i += 1) {
          const [id] = await raiseEvent(tx, 'backup.failed', { error: `failure ${i}` });
          await tx.execute(`UPDATE notification_deliveries SET status = 'delivered', attempts = 1, last_status = 200, delivered_at = created_at WHERE id = ?`, [id!]);
        }
      });
    } finally {
      await db.close();
    }
    const all = await everyId('/api/notifications/deliveries?limit=1000', (d: { id: string }) => d.id);
    assert.equal(all.length, 106);
    await open('Deliveries');
    await pageThrough('delivery-list', 'delivery-id', 'deliveries', all);
  });

  it('creates an entitlement and shows it on its own page', async () => {
    await open('Entitlements');
    await page.getByRole('button', { name: 'New entitlement' }).click();
    const dialog = page.getByRole('dialog', { name: 'New entitlement' });
    await dialog.getByLabel(/^Code/).fill('PRO');
    await dialog.getByLabel('Name', { exact: true }).fill('Professional features');
    await dialog.getByRole('button', { name: 'Create entitlement' }).click();
    await status().getByText('Created entitlement PRO.').waitFor();
    const row = page.locator('#entitlement-list tbody tr', { hasText: 'Professional features' });
    await row.getByRole('link', { name: 'PRO' }).click();
    await page.getByRole('heading', { level: 1, name: 'Entitlement PRO' }).waitFor();
    await page.locator('#audit-title ~ .scroll tr', { hasText: 'entitlement.created' }).waitFor();
    await page.getByRole('link', { name: 'Licenses granting PRO' }).waitFor();
    await open('Entitlements');
    await page.getByRole('button', { name: 'New entitlement' }).click();
    await dialog.getByLabel(/^Code/).fill('PRO');
    await dialog.getByLabel('Name', { exact: true }).fill('Again');
    await dialog.getByRole('button', { name: 'Create entitlement' }).click();
    await dialog.getByRole('alert').getByText(/\(ENTITLEMENT_CODE_EXISTS\)$/).waitFor();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    assert.deepEqual(await idsOf(page, 'entitlement-list', 'entitlement-id'), [(await api(serve.url, 'GET', '/api/entitlements', { token: serve.token })).body[0].id]);
  });

  it('filters the audit log and links each entry to its record', async () => {
    await open('Audit log');
    await page.getByLabel('Action').fill('machine.deactivated');
    await page.getByLabel('Action').press('Enter');
    await page.waitForURL(/\/admin\/audit\?action=machine.deactivated$/);
    const row = page.locator('#audit-list tbody tr[data-audit-id]');
    await eventually(async () => (await row.count()) === 1, 'one entry');
    const [, who, what, record, details] = await cells(row);
    assert.deepEqual([who, what], ['token:bootstrap', 'machine.deactivated']);
    assert.match(record!, /^machine /);
    assert.match(details!, /hardware_id\s*browser-machine/);
    await page.getByLabel('Record kind').selectOption('license');
    await page.getByText('No audit entry matches.').waitFor();
    assert.match(page.url(), /entity_type=license/);
    await page.getByRole('link', { name: 'Clear' }).click();
    await page.getByLabel('Record id').fill(license.id);
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.waitForURL(new RegExp(`entity_id=${license.id}`));
    const checkout = page.locator('#audit-list tbody tr', { hasText: 'license.checked_out' });
    await checkout.getByRole('link', { name: /^license / }).click();
    await page.getByRole('heading', { level: 1, name: `License ${license.key_prefix}…` }).waitFor();
    await page.goBack();
    await checkout.waitFor();
    await visit('/admin/audit?action=machine.activated', 'Audit log');
    await page.locator('#audit-list tbody tr', { hasText: 'browser-machine' }).getByRole('link', { name: /^machine / }).click();
    await page.getByRole('heading', { level: 1, name: 'Machine browser-machine' }).waitFor();
    assert.equal(new URL(page.url()).pathname, `/admin/machines/${machineId}`);
    await visit(`/admin/audit?entity_type=customer&entity_id=${customerId}`, 'Audit log');
    await page.locator('#audit-list').getByRole('link', { name: /^customer / }).click();
    await page.getByRole('heading', { level: 1, name: hostile }).waitFor();
  });

  it('makes a token whose secret it shows once, and revokes it after a confirmation', async () => {
    await open('Tokens');
    if ((await api(serve.url, 'GET', '/api/tokens', { token: serve.token })).status === 404) {
      // A daemon of an older release: the page says so rather than failing.
      await page.getByText(/This server has no token API/).waitFor();
      return;
    }
    await page.getByRole('button', { name: 'New token' }).click();
    const form = page.getByRole('dialog', { name: 'New token' });
    await form.getByLabel(/^Name/).fill('support-desk');
    assert.equal(await form.getByRole('checkbox', { name: /^read:/ }).isChecked(), true, 'read by default');
    await form.getByRole('checkbox', { name: /^licenses:/ }).check();
    await form.getByLabel('Expires after').selectOption('30d');
    await form.getByRole('button', { name: 'Create token' }).click();
    const shown = page.getByRole('dialog', { name: 'Token support-desk created' });
    await shown.getByText('Copy the token now: you will not see it again.').waitFor();
    const secret = await shown.getByLabel(/^Token \(read, licenses, expires \d{4}-\d{2}-\d{2}\)$/).inputValue();
    assert.match(secret, /^lsat_/);
    await shown.getByRole('button', { name: 'Copy token' }).click();
    await status().getByText('Token copied.').waitFor();
    assert.equal(await page.evaluate(() => (globalThis as unknown as { navigator: { clipboard: { readText(): Promise<string> } } }).navigator.clipboard.readText()), secret);
    await shown.getByRole('button', { name: 'Done' }).click();
    await shown.waitFor({ state: 'detached' });
    assert.ok(!(await page.content()).includes(secret), 'the secret is gone from the page');
    const whoami = await api(serve.url, 'GET', '/api/whoami', { token: secret });
    assert.deepEqual([whoami.body.actor, whoami.body.scopes], ['token:support-desk', ['read', 'licenses']]);

    const row = page.locator('#token-list tbody tr', { hasText: 'support-desk' });
    assert.deepEqual((await cells(row)).slice(0, 4), ['support-desk', `${secret.slice(0, 11)}…`, 'read, licenses', 'live']);
    await row.getByRole('button', { name: 'Revoke' }).click();
    await page.getByRole('dialog', { name: 'Revoke token support-desk?' }).getByRole('button', { name: 'Revoke' }).click();
    await status().getByText('Token support-desk revoked.').waitFor();
    await row.waitFor({ state: 'detached' });
    assert.equal((await api(serve.url, 'GET', '/api/whoami', { token: secret })).status, 401);
    await page.getByLabel('Show').selectOption('true');
    await row.getByText('revoked').waitFor();

    // Its own token: the dialog says so, and the page signs out once it is revoked.
    const own = await runCli(['token', 'create', '--name', 'leaving', '--scope', 'admin', '--json'], { env: { LICENSE_DATABASE_URL: path.join(work, 'data', 'db.sqlite') } });
    assert.equal(own.code, 0, own.stderr);
    const context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
    try {
      const other = await context.newPage();
      await other.goto(`${serve.url}/admin/tokens`);
      await other.getByLabel('Admin token').fill(own.json().token);
      await other.keyboard.press('Enter');
      const mine = other.locator('#token-list tbody tr', { hasText: 'leaving' });
      await mine.getByRole('button', { name: 'Revoke' }).click();
      const confirm = other.getByRole('dialog', { name: 'Revoke token leaving?' });
      await confirm.getByText('This is the token you are signed in with:').waitFor();
      await confirm.getByRole('button', { name: 'Revoke' }).click();
      await other.getByLabel('Admin token').waitFor();
      await other.getByText('The token was not accepted.').waitFor();
      assert.equal((await api(serve.url, 'GET', '/api/whoami', { token: own.json().token })).status, 401);
    } finally {
      await context.close();
    }
  });

  it('has no horizontal scroll at 1,024 px on any view, values on one line, and a keyboard order', async () => {
    await page.setViewportSize({ width: 1024, height: 800 });
    const deliveryId = (await api(serve.url, 'GET', '/api/notifications/deliveries?limit=1', { token: serve.token })).body[0].id;
    const entitlementId = (await api(serve.url, 'GET', '/api/entitlements', { token: serve.token })).body[0].id;
    const views: Array<[string, string | RegExp]> = [
      ['/admin/', 'Attention'],
      ['/admin/licenses', 'Licenses'],
      [`/admin/licenses/${license.id}`, `License ${license.key_prefix}…`],
      ['/admin/customers', 'Customers'],
      [`/admin/customers/${customerId}`, hostile],
      ['/admin/machines', 'Machines'],
      [`/admin/machines/${machineId}`, 'Machine browser-machine'],
      ['/admin/entitlements', 'Entitlements'],
      [`/admin/entitlements/${entitlementId}`, 'Entitlement PRO'],
      ['/admin/audit', 'Audit log'],
      ['/admin/deliveries', 'Deliveries'],
      [`/admin/deliveries/${deliveryId}`, /^Delivery of /],
      ['/admin/backups', 'Backups'],
      ['/admin/signing-keys', 'Signing keys'],
      ['/admin/tokens', 'Tokens'],
    ];
    const wide: string[] = [];
    let values = 0;
    for (const [route, heading] of views) {
      await visit(route, heading);
      await page.waitForFunction(() => {
        const doc = (globalThis as unknown as { document: any }).document;
        return !doc.querySelector('[aria-busy="true"]') && !doc.body.textContent.includes('Loading…');
      });
      const measured = await page.evaluate(() => {
        const doc = (globalThis as unknown as { document: any }).document;
        const root = doc.documentElement;
        const boxes = [...doc.querySelectorAll('main .scroll, main table')].filter((box: any) => box.scrollWidth - box.clientWidth > 1).map((box: any) => `${box.id || box.tagName} ${box.scrollWidth} > ${box.clientWidth}`);
        // Timestamps, sizes and counts are never broken: each piece of text of such a cell lies on
        // one line (a dense list may put a time's local form on a line of its own, whole).
        const wrapped = [...doc.querySelectorAll('main td.value')].filter((cell: any) => {
          const walker = doc.createTreeWalker(cell, 4);
          for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            if (!node.textContent.trim()) continue;
            const range = doc.createRange();
            range.selectNodeContents(node);
            if (new Set([...range.getClientRects()].map((rect: any) => Math.round(rect.top))).size > 1) return true;
          }
          return false;
        }).map((cell: any) => cell.textContent);
        return { page: root.scrollWidth - root.clientWidth, boxes, wrapped, values: doc.querySelectorAll('main td.value').length };
      });
      if (measured.page > 1) wide.push(`${route}: the page scrolls sideways by ${measured.page}px`);
      for (const box of measured.boxes) wide.push(`${route}: ${box}`);
      for (const text of measured.wrapped) wide.push(`${route}: a value wraps: ${text}`);
      values += measured.values;
    }
    assert.deepEqual(wide, []);
    assert.ok(values >= 30, `${values} value cells measured`);
    await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Backups' }).focus();
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => (globalThis as unknown as { document: { activeElement: { textContent: string } | null } }).document.activeElement?.textContent), 'Signing keys');
    await page.screenshot({ path: screenshot(work, 'admin-narrow.png') });
    await page.setViewportSize({ width: 1200, height: 800 });
  });

  it('shows a read-only token no backups, no tokens, no keys and no actions', async () => {
    const created = await runCli(['token', 'create', '--name', 'auditor', '--scope', 'read', '--json'], { env: { LICENSE_DATABASE_URL: path.join(work, 'data', 'db.sqlite') } });
    assert.equal(created.code, 0, created.stderr);
    await visit('/admin/signing-keys', 'Signing keys');
    await page.getByLabel('Active public key (PEM)').getByText('BEGIN PUBLIC KEY').waitFor();
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Admin token').waitFor();
    // Signed out, the page keeps nothing of the last token's: no rows (and so no buttons of its
    // scopes for the next token to see before its own lists arrive), no keys, no navigation.
    const left = await page.evaluate(() => {
      const doc = (globalThis as unknown as { document: any }).document;
      return { rows: doc.querySelectorAll('table tbody tr').length, pre: doc.querySelectorAll('pre').length, nav: doc.querySelectorAll('nav').length };
    });
    assert.deepEqual(left, { rows: 0, pre: 0, nav: 0 });
    await page.getByLabel('Admin token').fill(created.json().token);
    await page.keyboard.press('Enter');
    await status().getByText('Signed in.').waitFor();
    const nav = page.getByRole('navigation', { name: 'Views' });
    await nav.getByRole('link', { name: 'Licenses' }).waitFor();
    for (const hidden of ['Backups', 'Tokens']) assert.equal(await nav.getByRole('link', { name: hidden }).count(), 0, `no ${hidden} link`);
    await visit('/admin/backups', 'Backups');
    await page.getByText(/do not allow GET \/api\/backups, which this page shows/).waitFor();
    await visit('/admin/tokens', 'Tokens');
    await page.getByText(/do not allow GET \/api\/tokens, which this page shows/).waitFor();

    await visit('/admin/licenses', 'Licenses');
    await page.locator('#license-list tr', { hasText: `${license.key_prefix}…` }).waitFor();
    assert.equal(await page.getByRole('link', { name: 'New license' }).count(), 0);
    assert.ok(!(await page.content()).includes(license.key), 'no whole key');
    await visit(`/admin/licenses/${license.id}`, `License ${license.key_prefix}…`);
    await page.locator('#license-machines tr', { hasText: 'browser-machine' }).waitFor();
    assert.deepEqual(await page.locator('main button').allInnerTexts(), [], 'no action on the license page, no Copy of a key');
    assert.ok(!(await page.content()).includes(license.key), 'no whole key');
    await visit('/admin/machines', 'Machines');
    await page.locator('#machine-list tr', { hasText: 'browser-machine' }).waitFor();
    assert.deepEqual(await page.locator('#machine-list tbody button').count(), 0, 'no machine actions');
    await visit('/admin/deliveries', 'Deliveries');
    await rowsOf(page, 'delivery-list', 'delivery-id').first().waitFor();
    assert.equal(await page.getByRole('button', { name: 'Redeliver' }).count(), 0, 'deliveries shown, but no redelivery: that needs admin');
    await visit('/admin/entitlements', 'Entitlements');
    await rowsOf(page, 'entitlement-list', 'entitlement-id').first().waitFor();
    assert.equal(await page.getByRole('button', { name: 'New entitlement' }).count(), 0);
    await visit('/admin/customers', 'Customers');
    await rowsOf(page, 'customer-list', 'customer-id').first().waitFor();
    assert.equal(await page.getByRole('link', { name: 'New customer' }).count(), 0);
    await visit('/admin/signing-keys', 'Signing keys');
    await page.getByLabel('Active public key (PEM)').getByText('BEGIN PUBLIC KEY').waitFor();
    assert.equal(await page.getByLabel('Active public key (PEM)').textContent(), (await api(serve.url, 'GET', '/api/signing-key', { token: serve.token })).body.public_key_pem);
    await visit('/admin/audit', 'Audit log');
    await rowsOf(page, 'audit-list', 'audit-id').first().waitFor();
    assert.equal(await page.locator('#audit-list').getByRole('link', { name: /^admin token / }).count(), 0, 'tokens have no page for a read token');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Admin token').fill(serve.token!);
    await page.keyboard.press('Enter');
    await status().getByText('Signed in.').waitFor();
  });

  it('shows licenses a page at a time: Next and Previous page, never more than one page of rows', async () => {
    const token = serve.token!;
    const customer = (await api(serve.url, 'POST', '/api/customers', { token, body: { name: 'Many licenses' } })).body;
    for (let i = 0; i < 104; i += 1) {
      const created = await api(serve.url, 'POST', '/api/licenses', { token, body: { customer_id: customer.id, type: 'time_based', valid_until: '2099-01-01' } });
      assert.equal(created.status, 201, created.text);
    }
    const all = await everyId('/api/licenses?limit=1000', (l: { id: string }) => l.id);
    assert.equal(all.length, 105);
    await open('Licenses');
    await pageThrough('license-list', 'license-id', 'licenses', all);
  });

  /** Every id of an API list, following its Link header to the end. */
  async function everyId<T>(first: string, idOf: (item: T) => string): Promise<string[]> {
    const all: string[] = [];
    for (let route: string | null = first; route;) {
      const answer = await api(serve.url, 'GET', route, { token: serve.token });
      all.push(...(answer.body as T[]).map(idOf));
      route = /^<([^>]+)>/.exec(answer.headers.get('link') ?? '')?.[1] ?? null;
    }
    return all;
  }

  /**
   * Walks a list to its end with Next page and back with Previous page (and the browser's Back):
   * each page holds at most one page (50) of rows, and together they hold every row once, in the
   * API's order.
   */
  async function pageThrough(list: string, attribute: string, noun: string, all: readonly string[]): Promise<void> {
    const pager = page.getByRole('navigation', { name: `Pages of ${noun}` });
    const next = pager.getByRole('button', { name: 'Next page' });
    const previous = pager.getByRole('button', { name: 'Previous page' });
    const pages: string[][] = [];
    for (;;) {
      await pager.getByText(`Page ${pages.length + 1}`, { exact: true }).waitFor();
      await rowsOf(page, list, attribute).first().waitFor();
      const ids = await idsOf(page, list, attribute);
      assert.ok(ids.length <= 50, `page ${pages.length + 1} holds ${ids.length} rows`);
      assert.equal(await page.locator(`#${list} tbody tr`).count(), ids.length, 'only this page\'s rows');
      pages.push(ids as string[]);
      if (await next.isDisabled()) break;
      const before = ids[0];
      await next.click();
      await page.locator(`#${list} tbody tr[data-${attribute}="${before}"]`).waitFor({ state: 'detached' });
    }
    assert.equal(pages.length, Math.ceil(all.length / 50));
    assert.deepEqual(pages.flat(), all, `every row once, in the API's order`);
    await previous.click();
    await pager.getByText(`Page ${pages.length - 1}`, { exact: true }).waitFor();
    await page.locator(`#${list} tbody tr[data-${attribute}="${pages.at(-2)![0]}"]`).waitFor();
    assert.deepEqual(await idsOf(page, list, attribute), pages.at(-2));
    await page.goBack();
    await pager.getByText(`Page ${pages.length}`, { exact: true }).waitFor();
    await page.locator(`#${list} tbody tr[data-${attribute}="${pages.at(-1)![0]}"]`).waitFor();
    assert.deepEqual(await idsOf(page, list, attribute), pages.at(-1), 'Back returns to the page after');
  }
});
