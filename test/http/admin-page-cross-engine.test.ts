import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { ok, runCli } from '../support/cli.js';
import { createTestDatabase, dropTestDatabase, requirePostgres } from '../support/postgres.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const KEY = '3c'.repeat(32);
// The restored data brings its own admin tokens; a token from the environment outlives it.
const TOKEN = 'admin-page-cross-engine-token-0123456789';

describe('the admin console restoring a backup of the other engine', function () {
  this.timeout(120_000);
  let work: string;
  let url: string | undefined;
  let serve: ServeProcess | undefined;
  let browser: Browser | undefined;

  before(async function () {
    if (!existsSync(CHROMIUM)) {
      if (process.env.CI === 'true') throw new Error(`Chromium is required under CI=true and ${CHROMIUM} is missing (.ci/run installs it)`);
      console.warn(`    (skipping: no Chromium at ${CHROMIUM})`);
      this.skip();
    }
    await requirePostgres(this);
    work = mkdtempSync(path.join(tmpdir(), 'license-admin-cross-'));
  });
  after(async () => {
    await browser?.close();
    await serve?.stop();
    if (url) await dropTestDatabase(url);
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('restores a SQLite backup into a daemon on PostgreSQL and says it moved the data', async () => {
    const source = { LICENSE_DATA_DIR: path.join(work, 'source', 'data'), LICENSE_DATABASE_URL: path.join(work, 'source', 'data', 'license-server.db'), LICENSE_BACKUP_PATH: path.join(work, 'source', 'backups'), LICENSE_BACKUP_ENCRYPTION_KEY: KEY };
    ok(await runCli(['init'], { env: source }));
    ok(await runCli(['customer', 'create', '--name', 'Made on SQLite'], { env: source }));
    const backup = ok(await runCli(['backup', 'create', '--json'], { env: source })).json();

    url = await createTestDatabase();
    const backups = path.join(work, 'daemon-backups');
    serve = await startServe({ LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: backups, LICENSE_BACKUP_ENCRYPTION_KEY: KEY, LICENSE_ADMIN_TOKEN: TOKEN });
    assert.equal((await api(serve.url, 'POST', '/api/customers', { token: TOKEN, body: { name: 'Made on PostgreSQL' } })).status, 201);
    mkdirSync(backups, { recursive: true, mode: 0o700 });
    for (const name of [backup.file, `${backup.backup_id}.backup.json`]) copyFileSync(path.join(source.LICENSE_BACKUP_PATH, name), path.join(backups, name));

    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    const page = await (await browser.newContext({ viewport: { width: 1200, height: 800 } })).newPage();
    await page.goto(`${serve.url}/admin/backups`);
    await page.getByLabel('Admin token').fill(TOKEN);
    await page.keyboard.press('Enter');
    const row = page.locator(`#backup-list tr[data-backup-id="${backup.backup_id}"]`);
    await row.waitFor();
    await row.getByRole('button', { name: 'Restore…' }).click();
    const dialog = page.getByRole('dialog', { name: `Restore ${backup.backup_id}` });
    // Another server's backup (issue 23, item 5): the dialog says what it replaces before the restore.
    await dialog.getByText("This backup is another server's (it shares no signing key with this one): its signing keys and admin tokens would replace this server's.").waitFor();
    await dialog.getByLabel('Type the backup id to confirm').fill(backup.backup_id);
    // The id typed confirms the restore, never the replacement of this server's keys and tokens (issue 35, item 1).
    await dialog.getByRole('button', { name: 'Restore', exact: true }).click();
    await dialog.getByRole('alert').getByText(/\(RESTORE_KEYS_NOT_CONFIRMED\)/).waitFor();
    const replaceKeys = dialog.getByLabel("Let the backup's signing keys and tokens replace this server's");
    assert.equal(await replaceKeys.isChecked(), false, 'off by default');
    await replaceKeys.check();
    await dialog.getByRole('button', { name: 'Restore', exact: true }).click();
    const message = page.locator('#status').getByText(new RegExp(`^Restored backup ${backup.backup_id}; the previous state is backup \\S+\\. Moved from SQLite to PostgreSQL: \\d+ rows\\.`));
    await message.waitFor();

    const [audit] = (await api(serve.url, 'GET', '/api/audit?action=backup.restored&limit=1', { token: TOKEN })).body;
    assert.deepEqual([audit.details.moved.from, audit.details.moved.to], ['sqlite', 'postgres']);
    const rows = Object.values(audit.details.moved.rows as Record<string, number>).reduce((sum, n) => sum + n, 0);
    assert.match((await message.textContent())!, new RegExp(`Moved from SQLite to PostgreSQL: ${rows} rows\\.`));
    assert.match((await message.textContent())!, new RegExp(`the previous state is backup ${audit.details.pre_restore_backup_id}\\.`));
    assert.match((await message.textContent())!, /This backup is another server's \(it shares no signing key with this one\): its signing keys and admin tokens replaced this server's\./);
    const customers = (await api(serve.url, 'GET', '/api/customers', { token: TOKEN })).body.map((c: { name: string }) => c.name);
    assert.deepEqual(customers, ['Made on SQLite']);
  });
});
