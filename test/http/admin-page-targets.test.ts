import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { ok, runCli } from '../support/cli.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const KEY = '5d'.repeat(32);
const TOKEN = 'admin-page-targets-token-0123456789abcdef';

/**
 * Issue 26: the console shows where each place's newest backup stands, lists what an
 * off-site target holds, and restores from the target on a host that has lost its own backups.
 */
describe('the admin console and off-site targets', function () {
  this.timeout(120_000);
  let work: string;
  let serve: ServeProcess | undefined;
  let browser: Browser | undefined;

  before(async function () {
    if (!existsSync(CHROMIUM)) {
      if (process.env.CI === 'true') throw new Error(`Chromium is required under CI=true and ${CHROMIUM} is missing (.ci/run installs it)`);
      console.warn(`    (skipping: no Chromium at ${CHROMIUM})`);
      this.skip();
    }
    work = mkdtempSync(path.join(tmpdir(), 'license-admin-targets-'));
  });
  after(async () => {
    await browser?.close();
    await serve?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('shows each place, lists a target\'s backups, and restores from the target when the local copy is gone', async () => {
    const nas = path.join(work, 'nas');
    mkdirSync(nas);
    const backups = path.join(work, 'backups');
    const env = {
      LICENSE_DATA_DIR: path.join(work, 'data'),
      LICENSE_BACKUP_PATH: backups,
      LICENSE_BACKUP_ENCRYPTION_KEY: KEY,
      LICENSE_ADMIN_TOKEN: TOKEN,
      LICENSE_BACKUP_TARGETS: JSON.stringify([{ name: 'nas', kind: 'file', path: nas }]),
      LICENSE_BACKUP_REPLICATION_TARGETS: 'nas',
      LICENSE_BACKUP_DRILL_ENABLED: 'false',
    };
    ok(await runCli(['init'], { env }));
    serve = await startServe(env);
    const made = await api(serve.url, 'POST', '/api/backups', { token: TOKEN });
    assert.equal(made.status, 201, made.text);
    assert.equal(made.body.copies, 'pending');
    const id = made.body.id as string;
    // The daemon copies it off the request.
    for (let i = 0; i < 100; i += 1) {
      const status = await api(serve.url, 'GET', '/api/backups/status?place=nas', { token: TOKEN });
      if (status.body.places[0].newest_backup_id === id) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.ok(readdirSync(nas).includes(`${id}.backup.json`), `nas holds ${readdirSync(nas).join(', ')}`);
    // Customers made after the backup disappear with the restore: it did come from the target.
    assert.equal((await api(serve.url, 'POST', '/api/customers', { token: TOKEN, body: { name: 'After the backup' } })).status, 201);
    // This host's own backups are lost.
    for (const name of readdirSync(backups)) rmSync(path.join(backups, name), { recursive: true, force: true });

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
    const page = await (await browser.newContext({ viewport: { width: 1200, height: 800 } })).newPage();
    await page.goto(`${serve.url}/`);
    await page.getByLabel('Admin token').fill(TOKEN);
    await page.keyboard.press('Enter');
    await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Backups' }).click();
    const place = page.locator('#place-table tr[data-place="nas"]');
    await place.getByText(id).waitFor();
    await page.locator('#place-table tr[data-place="local"]').getByText('none').waitFor();
    await page.getByText('No backups yet.').waitFor();
    // The same target holds the replica: its lag, then the restore drill that proves it.
    const replica = page.locator('#replica-table tr[data-replica="nas"]');
    await replica.getByRole('cell', { name: /^\d+(\.\d+)? s$/ }).waitFor();
    assert.equal(await page.locator('[data-drill]').count(), 0, 'no drill has run');
    const drill = await runCli(['backup', 'drill'], { env });
    assert.equal(drill.code, 0, drill.stderr);
    await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Licenses' }).click();
    await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Backups' }).click();
    await page.locator('[data-drill="passed"]').getByText(/^passed, /).waitFor();
    await place.getByRole('link', { name: 'Show backups on nas' }).click();
    await page.getByRole('heading', { name: 'Backups on target nas' }).waitFor();
    assert.equal(new URL(page.url()).search, '?target=nas', 'the target\'s list has its own address');
    const row = page.locator(`#target-backup-list tr[data-backup-id="${id}"]`);
    await row.getByRole('button', { name: 'Validate' }).click();
    await page.locator('#status').getByText(new RegExp(`^Backup ${id} is valid`)).waitFor();
    await row.getByRole('button', { name: 'Restore from target…' }).click();
    const dialog = page.getByRole('dialog', { name: `Restore ${id} from target nas` });
    await dialog.getByLabel('Type the backup id to confirm').fill(id);
    await dialog.getByRole('button', { name: 'Restore', exact: true }).click();
    await page.locator('#status').getByText(new RegExp(`^Restored backup ${id}`)).waitFor();
    const customers = (await api(serve.url, 'GET', '/api/customers', { token: TOKEN })).body as Array<{ name: string }>;
    assert.deepEqual(customers.map((customer) => customer.name), []);
    // The backup came back into this host's backup directory on its way.
    assert.ok(readdirSync(backups).includes(`${id}.backup.json`));
  });
});
