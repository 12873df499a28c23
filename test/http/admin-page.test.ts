import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { raiseEvent } from '../../src/lib/notifications/outbox.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import { runCli } from '../support/cli.js';
import { eventually } from '../support/fake-clock.js';
import { startReceiver } from '../support/receiver.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
// The README's picture of the page is refreshed with UPDATE_SCREENSHOTS=1; otherwise it goes to the temp dir.
const screenshot = (work: string, name: string) =>
  process.env.UPDATE_SCREENSHOTS === '1' && name === 'admin-backups.png' ? new URL(`../../docs/${name}`, import.meta.url).pathname : path.join(work, name);

describe('the admin page in headless Chromium', function () {
  this.timeout(120_000);
  let work: string;
  let serve: ServeProcess;
  let browser: Browser;
  let page: Page;
  let license: { id: string; key: string; key_prefix: string };
  const dialogs: string[] = [];

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
    const customer = (await api(serve.url, 'POST', '/api/customers', { token, body: { name: '<img src=x onerror=alert(1)>' } })).body;
    license = (await api(serve.url, 'POST', '/api/licenses', { token, body: { customer_id: customer.id, type: 'hybrid', valid_from: '2025-01-01', valid_until: '2099-01-01' } })).body;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1200, height: 800 } });
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
    assert.equal(await page.getByRole('button', { name: 'Sign out' }).isVisible(), false);
    assert.equal(await page.locator('#nav').isVisible(), false);
  });

  it('is served with a same-origin Content-Security-Policy and signs in with the token', async () => {
    const response = await page.goto(`${serve.url}/`);
    assert.match(response!.headers()['content-security-policy']!, /default-src 'self'/);
    assert.equal(new URL(page.url()).pathname, '/admin/');
    await page.getByLabel('Admin token').fill('lsat_wrong');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('The token was not accepted.').waitFor();
    await page.getByLabel('Admin token').fill(serve.token!);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Backups' }).waitFor();
    assert.equal(await page.evaluate(() => (globalThis as unknown as { document: { cookie: string } }).document.cookie), '', 'no cookie');
    assert.ok(!page.url().includes('lsat_'), 'the token is not in the URL');
  });

  it('renders a hostile customer name as text', async () => {
    const cell = page.locator('#license-table td', { hasText: '<img src=x onerror=alert(1)>' });
    await cell.waitFor();
    assert.equal(await page.locator('#license-table img').count(), 0);
    assert.deepEqual(dialogs, []);
  });

  it('creates a backup, lists it, downloads its exact bytes and validates it', async () => {
    await page.getByRole('button', { name: 'Create backup' }).click();
    await page.getByText(/^Created backup /).waitFor();
    const id = await page.locator('#backup-table tbody tr').first().getAttribute('data-backup-id');
    assert.match(id!, /^\d{8}T\d{9}Z-[0-9a-f]{6}$/);
    await page.screenshot({ path: screenshot(work, 'admin-backups.png') });
    const row = page.locator(`#backup-table tr[data-backup-id="${id}"]`);
    const [download] = await Promise.all([page.waitForEvent('download'), row.getByRole('button', { name: 'Download' }).click()]);
    const listed = (await api(serve.url, 'GET', '/api/backups', { token: serve.token })).body.backups[0];
    assert.equal(download.suggestedFilename(), listed.file);
    assert.deepEqual(readFileSync((await download.path())!), readFileSync(path.join(work, 'backups', listed.file)));
    await row.getByRole('button', { name: 'Validate' }).click();
    await page.getByText(new RegExp(`^Backup ${id} is valid`)).waitFor();
  });

  it('restores after the id is typed, keeping a license deactivated since the backup deactivated unless the box is unticked', async () => {
    const id = await page.locator('#backup-table tbody tr').first().getAttribute('data-backup-id');
    await api(serve.url, 'POST', `/api/licenses/${license.id}/deactivate`, { token: serve.token });
    const row = page.locator(`#backup-table tr[data-backup-id="${id}"]`);
    await row.getByRole('button', { name: 'Restore…' }).click();
    await page.getByLabel('Type the backup id to confirm').fill('not the id');
    await page.getByRole('button', { name: 'Restore', exact: true }).click();
    await page.getByText('The id typed does not match the backup to restore.').waitFor();
    assert.equal((await api(serve.url, 'GET', `/api/licenses/${license.id}`, { token: serve.token })).body.active, false, 'nothing restored');
    await page.getByLabel('Type the backup id to confirm').fill(id!);
    assert.equal(await page.getByLabel(/Keep licenses and customers deactivated/).isChecked(), true, 'revocations are kept unless unticked');
    await page.getByRole('button', { name: 'Restore', exact: true }).click();
    await page.getByText(new RegExp(`^Restored backup ${id}.*Kept deactivated: license ${license.key_prefix}`)).waitFor();
    assert.equal((await api(serve.url, 'GET', `/api/licenses/${license.id}`, { token: serve.token })).body.active, false, 'deactivated after the backup: stays so');
    await row.getByRole('button', { name: 'Restore…' }).click();
    await page.getByLabel('Type the backup id to confirm').fill(id!);
    await page.getByLabel(/Keep licenses and customers deactivated/).uncheck();
    await page.getByRole('button', { name: 'Restore', exact: true }).click();
    await page.getByText(new RegExp(`^Restored backup ${id}.*Active again, as in the backup: license ${license.key_prefix}`)).waitFor();
    assert.equal((await api(serve.url, 'GET', `/api/licenses/${license.id}`, { token: serve.token })).body.active, true);
  });

  it('shows the signing key and checks a license out to a .lic file', async () => {
    const pem = (await api(serve.url, 'GET', '/api/signing-key', { token: serve.token })).body.public_key_pem;
    assert.equal(await page.locator('#pem').textContent(), pem);
    const { keys } = (await api(serve.url, 'GET', '/api/signing-keys', { token: serve.token })).body;
    assert.deepEqual(await page.locator('#key-table tbody tr').evaluateAll((rows) => rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent))),
      keys.map((k: any) => [k.key_id, k.state, k.created_at, k.fingerprint]));
    assert.equal(await page.locator('#key-set').textContent(), keys.map((k: any) => `# key_id ${k.key_id} ${k.state}\n${k.public_key_pem}`).join(''));
    const row = page.locator(`#license-table tr[data-license-id="${license.id}"]`);
    await row.getByLabel('TTL (days)').fill('10');
    await row.getByLabel('Hardware ID').fill('browser-machine');
    const [download] = await Promise.all([page.waitForEvent('download'), row.getByRole('button', { name: 'Download .lic' }).click()]);
    assert.match(download.suggestedFilename(), /^license-.+\.lic$/);
    const { verifyLicenseFile } = await import('../../src/lib/offline/verify.js');
    const verified = verifyLicenseFile(readFileSync((await download.path())!), { publicKey: pem, hardwareId: 'browser-machine' });
    assert.equal(verified.payload.license_id, license.id);
  });

  it('lists machines with their seats and deactivates one', async () => {
    const row = page.locator('#machine-table tr', { hasText: 'browser-machine' });
    await row.waitFor();
    await row.getByRole('button', { name: 'Deactivate' }).click();
    await page.getByText(/^Machine browser-machine deactivated\./).waitFor();
    const [machine] = (await api(serve.url, 'GET', `/api/machines?license_id=${license.id}`, { token: serve.token })).body;
    assert.equal(machine.active, false);
    await page.locator('#machine-table tr', { hasText: 'browser-machine' }).getByRole('button', { name: 'Activate' }).waitFor();
  });

  it('shows a failed notification delivery, filters to failed ones, and redelivers it under the same id', async () => {
    const receiver = await startReceiver();
    try {
      const env = { LICENSE_DATABASE_URL: path.join(work, 'data', 'db.sqlite') };
      writeFileSync(path.join(work, 'n.yaml'), `webhooks:\n  - name: ops\n    url: ${receiver.url}\n    secret: a-secret-of-the-webhook\nrules:\n  - event: backup.failed\n    webhook: ops\n`);
      const set = await runCli(['notifications', 'set', '--file', path.join(work, 'n.yaml')], { env });
      assert.equal(set.code, 0, set.stderr);
      // A delivery the deliverer gave up on, written as it records one: failed in the same transaction.
      const db = await openDatabase(env.LICENSE_DATABASE_URL);
      let id: string;
      try {
        id = await db.transaction(async (tx) => {
          const [raised] = await raiseEvent(tx, 'backup.failed', { error: 'disk full' });
          await tx.execute(`UPDATE notification_deliveries SET status = 'failed', attempts = 9, last_status = 500, last_error = 'HTTP 500', last_attempt_at = created_at WHERE id = ?`, [raised!]);
          return raised!;
        });
      } finally {
        await db.close();
      }
      await page.reload();
      const row = page.locator(`#delivery-table tr[data-delivery-id="${id}"]`);
      await row.waitFor();
      assert.deepEqual(await row.locator('td').evaluateAll((cells) => cells.slice(0, 6).map((td) => td.textContent)), [id, 'backup.failed', 'webhook ops', 'failed', '9', 'HTTP 500']);
      await page.getByLabel('Only failed deliveries').check();
      await page.getByText('Showing failed deliveries.').waitFor();
      assert.deepEqual(await page.locator('#delivery-table tbody tr').evaluateAll((rows) => rows.map((r: any) => r.dataset.deliveryId)), [id]);

      await row.getByRole('button', { name: 'Redeliver' }).click();
      await page.getByText(`Delivery ${id} is pending again: the server sends it to webhook ops within a few seconds.`).waitFor();
      await page.getByText('No failed deliveries.').waitFor();
      await eventually(() => receiver.received.some((request) => request.headers['x-license-server-delivery'] === id), 'the daemon sent it', 15_000);
      await eventually(async () => (await api(serve.url, 'GET', `/api/notifications/deliveries/${id}`, { token: serve.token })).body.status === 'delivered', 'it is recorded as delivered');
      await page.getByLabel('Only failed deliveries').uncheck();
      await page.getByText('Showing all deliveries.').waitFor();
      assert.equal(await row.locator('td').nth(3).textContent(), 'delivered');
      assert.equal(await row.locator('td').nth(4).textContent(), '10');
    } finally {
      await receiver.close();
    }
  });

  it('shows deliveries a page at a time, "More deliveries" following the Link header to the end', async () => {
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
    const all: string[] = [];
    for (let route: string | null = '/api/notifications/deliveries?limit=1000'; route;) {
      const answer = await api(serve.url, 'GET', route, { token: serve.token });
      all.push(...answer.body.map((d: { id: string }) => d.id));
      route = /^<([^>]+)>/.exec(answer.headers.get('link') ?? '')?.[1] ?? null;
    }
    assert.equal(all.length, 105);
    await page.reload();
    const rows = page.locator('#delivery-table tbody tr');
    const more = page.getByRole('button', { name: 'More deliveries' });
    await more.waitFor();
    assert.equal(await rows.count(), 100, 'the first page: the default limit');
    await more.click();
    await page.getByText('Loaded more deliveries.').waitFor();
    assert.equal(await rows.count(), 105);
    assert.equal(await more.isHidden(), true, 'no More on the last page');
    assert.deepEqual(await rows.evaluateAll((trs) => trs.map((tr: any) => tr.dataset.deliveryId)), all, 'every delivery once, newest first');
  });

  it('is usable on a narrow window and by keyboard', async () => {
    await page.setViewportSize({ width: 380, height: 800 });
    // Timestamps and sizes stay on one line (the table scrolls sideways instead): the text of
    // each such cell lies on one line box, however narrow the window.
    const lineBoxes = await page.evaluate(() => {
      const doc = (globalThis as unknown as { document: any }).document;
      const cells = [
        ...[...doc.querySelectorAll('#backup-table tbody tr')].flatMap((row: any) => [row.cells[1], row.cells[2]]),
        ...[...doc.querySelectorAll('#license-table tbody tr')].map((row: any) => row.cells[4]),
        ...[...doc.querySelectorAll('#machine-table tbody tr')].flatMap((row: any) => [row.cells[5], row.cells[6]]),
        ...[...doc.querySelectorAll('#key-table tbody tr')].map((row: any) => row.cells[2]),
      ];
      return cells.map((cell: any) => {
        const range = doc.createRange();
        range.selectNodeContents(cell);
        return [cell.textContent, new Set([...range.getClientRects()].map((rect: any) => Math.round(rect.top))).size];
      });
    });
    assert.ok(lineBoxes.length >= 8, `${lineBoxes.length} cells`);
    assert.deepEqual(lineBoxes.filter(([, lines]) => lines !== 1), [], 'cells whose value wraps');
    const overflow = await page.evaluate(() => {
      const root = (globalThis as unknown as { document: { documentElement: { scrollWidth: number; clientWidth: number } } }).document.documentElement;
      return root.scrollWidth - root.clientWidth;
    });
    assert.ok(overflow <= 1, `the page itself does not scroll sideways (${overflow}px)`);
    await page.getByRole('link', { name: 'Backups' }).focus();
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => (globalThis as unknown as { document: { activeElement: { textContent: string } | null } }).document.activeElement?.textContent), 'Licenses');
    await page.screenshot({ path: screenshot(work, 'admin-narrow.png') });
  });

  it('shows a read-only token no backups, no checkout and no machine actions', async () => {
    await page.setViewportSize({ width: 1200, height: 800 });
    const created = await runCli(['token', 'create', '--name', 'auditor', '--scope', 'read', '--json'], { env: { LICENSE_DATABASE_URL: path.join(work, 'data', 'db.sqlite') } });
    assert.equal(created.code, 0, created.stderr);
    await page.getByRole('button', { name: 'Sign out' }).click();
    // Signed out, the page keeps nothing of the last token's: no rows (and so no buttons of its
    // scopes for the next token to see before its own lists arrive), no key set.
    const left = await page.evaluate(() => {
      const doc = (globalThis as unknown as { document: any }).document;
      return { rows: doc.querySelectorAll('table tbody tr').length, pem: doc.querySelector('#pem').textContent, more: [...doc.querySelectorAll('[id^="more-"]')].filter((button: any) => !button.hidden).length };
    });
    assert.deepEqual(left, { rows: 0, pem: '', more: 0 });
    await page.getByLabel('Admin token').fill(created.json().token);
    await page.keyboard.press('Enter');
    await page.locator('#machine-table tr', { hasText: 'browser-machine' }).waitFor();
    assert.equal(await page.locator('#backups').isHidden(), true, 'no backups section');
    assert.equal(await page.getByRole('link', { name: 'Backups' }).isHidden(), true);
    assert.equal(await page.locator('#licenses').isVisible(), true);
    assert.equal(await page.getByRole('button', { name: 'Download .lic' }).count(), 0, 'no checkout form');
    assert.equal(await page.locator('#machine-table button').count(), 0, 'no machine actions');
    await page.locator('#delivery-table tbody tr[data-delivery-id]').first().waitFor();
    assert.equal(await page.getByRole('button', { name: 'Redeliver' }).count(), 0, 'deliveries shown, but no redelivery: that needs admin');
    assert.equal(await page.locator('#pem').textContent(), (await api(serve.url, 'GET', '/api/signing-key', { token: serve.token })).body.public_key_pem);
  });

  it('shows licenses a page at a time, "More licenses" following the Link header to the end', async () => {
    const token = serve.token!;
    const customer = (await api(serve.url, 'POST', '/api/customers', { token, body: { name: 'Many licenses' } })).body;
    for (let i = 0; i < 104; i += 1) {
      const created = await api(serve.url, 'POST', '/api/licenses', { token, body: { customer_id: customer.id, type: 'time_based', valid_until: '2099-01-01' } });
      assert.equal(created.status, 201, created.text);
    }
    const all: string[] = [];
    for (let route: string | null = '/api/licenses?limit=1000'; route;) {
      const answer = await api(serve.url, 'GET', route, { token });
      all.push(...answer.body.map((l: { key_prefix: string }) => l.key_prefix));
      route = /^<([^>]+)>/.exec(answer.headers.get('link') ?? '')?.[1] ?? null;
    }
    assert.equal(all.length, 105);
    await page.reload();
    const rows = page.locator('#license-table tbody tr');
    const more = page.getByRole('button', { name: 'More licenses' });
    await more.waitFor();
    assert.equal(await rows.count(), 100, 'the first page: the default limit');
    await more.click();
    await page.getByText('Loaded more licenses.').waitFor();
    assert.equal(await rows.count(), 105);
    assert.equal(await more.isHidden(), true, 'no More on the last page');
    const shown = await rows.evaluateAll((trs) => trs.map((tr: any) => String(tr.cells[0].textContent).replace('…', '')));
    assert.deepEqual(shown, all, 'every license once, in the list order');
  });
});
