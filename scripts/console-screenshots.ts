// Regenerates the pictures of every console view in docs/console/ (shown in docs/console.md):
//
//   npm run build && npx tsx scripts/console-screenshots.ts [--out DIR] [--width PX]
//
// It starts a real `serve` on a fresh SQLite store, fills it through the API as a small
// license business would look (customers, entitlements, licenses ending soon, expired and
// suspended, machines that validated, an offline checkout, a webhook failing against a dead
// URL, a backup copied to an off-site target), signs in to the console in Debian's Chromium and
// photographs each view at 1,280 x 900 (--width 1024: as the narrowest window the console is
// made for).
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { runCli } from '../test/support/cli.js';
import { api, startServe } from '../test/support/serve.js';
import { seedConsoleDemo } from '../test/support/console-demo.js';

const out = process.argv.includes('--out') ? process.argv[process.argv.indexOf('--out') + 1]! : fileURLToPath(new URL('../docs/console/', import.meta.url));
const width = process.argv.includes('--width') ? Number(process.argv[process.argv.indexOf('--width') + 1]) : 1280;
mkdirSync(out, { recursive: true });
const work = mkdtempSync(path.join(tmpdir(), 'license-console-shots-'));
mkdirSync(path.join(work, 'nas'));
const databaseUrl = path.join(work, 'data', 'db.sqlite');
const serveEnv = {
  LICENSE_DATABASE_URL: databaseUrl,
  LICENSE_BACKUP_PATH: path.join(work, 'backups'),
  LICENSE_BACKUP_ENCRYPTION_KEY: '34'.repeat(32),
  LICENSE_BACKUP_TARGETS: JSON.stringify([{ name: 'nas', kind: 'file', path: path.join(work, 'nas') }]),
  LICENSE_BACKUP_REPLICATION_TARGETS: 'nas',
  LICENSE_BACKUP_DRILL_ENABLED: 'false',
};
const serve = await startServe(serveEnv);
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu'] });
try {
  // A webhook whose receiver is gone: its deliveries stay pending, retrying, with the last error.
  writeFileSync(path.join(work, 'notifications.yaml'), 'webhooks:\n  - name: crm\n    url: http://127.0.0.1:9/hook\n    secret: a-secret-of-the-crm-webhook\nrules:\n  - event: license.*\n    webhook: crm\n');
  const set = await runCli(['notifications', 'set', '--file', path.join(work, 'notifications.yaml')], { env: { LICENSE_DATABASE_URL: databaseUrl } });
  if (set.code !== 0) throw new Error(`notifications set: ${set.stderr}`);
  const demo = await seedConsoleDemo(serve.url, serve.token!, work);
  await api(serve.url, 'POST', '/api/backups', { token: serve.token });
  const drill = await runCli(['backup', 'drill'], { env: serveEnv });
  if (drill.code !== 0) throw new Error(`backup drill: ${drill.stderr}`);
  const support = await runCli(['token', 'create', '--name', 'support-desk', '--scope', 'read', '--scope', 'licenses', '--expires-in', '90d', '--json'], { env: { LICENSE_DATABASE_URL: databaseUrl } });
  if (support.code !== 0) throw new Error(`token create: ${support.stderr}`);
  const tokenId = support.json().id as string;
  const entitlementId = (await api(serve.url, 'GET', '/api/entitlements?limit=1', { token: serve.token })).body[0].id as string;
  const deliveryId = (await api(serve.url, 'GET', '/api/notifications/deliveries?limit=1', { token: serve.token })).body[0]?.id as string | undefined;
  const page = await (await browser.newContext({ viewport: { width, height: 900 }, colorScheme: 'light' })).newPage();
  await page.goto(`${serve.url}/admin/`);
  await page.screenshot({ path: path.join(out, 'sign-in.png') });
  await page.getByLabel('Admin token').fill(serve.token!);
  await page.keyboard.press('Enter');
  const shots: Array<[string, string, string | RegExp]> = [
    ['attention.png', '/admin/', 'Attention'],
    ['licenses.png', '/admin/licenses', 'Licenses'],
    ['licenses-expiring.png', '/admin/licenses?status=expiring&within=30d', 'Licenses'],
    ['license.png', `/admin/licenses/${demo.licenseId}`, `License ${demo.keyPrefix}…`],
    ['customers.png', '/admin/customers', 'Customers'],
    ['customer.png', `/admin/customers/${demo.customerId}`, demo.customerName],
    ['machines.png', '/admin/machines', 'Machines'],
    ['machine.png', `/admin/machines/${demo.machineId}`, `Machine ${demo.hardwareId}`],
    ['entitlements.png', '/admin/entitlements', 'Entitlements'],
    ['entitlement.png', `/admin/entitlements/${entitlementId}`, /^Entitlement /],
    ['audit.png', '/admin/audit', 'Audit log'],
    ['deliveries.png', '/admin/deliveries', 'Deliveries'],
    ...(deliveryId ? [['delivery.png', `/admin/deliveries/${deliveryId}`, /^Delivery of /] as [string, string, RegExp]] : []),
    ['backups.png', '/admin/backups', 'Backups'],
    ['backups-target.png', '/admin/backups?target=nas', 'Backups'],
    ['signing-keys.png', '/admin/signing-keys', 'Signing keys'],
    ['tokens.png', '/admin/tokens', 'Tokens'],
    ['token.png', `/admin/tokens/${tokenId}`, /^Token/],
  ];
  for (const [file, route, heading] of shots) {
    await page.goto(`${serve.url}${route}`);
    await page.getByRole('heading', { level: 1, name: heading }).waitFor();
    // Lists load after their heading: wait until no table says it is still loading.
    await page.waitForFunction(() => !document.querySelector('[aria-busy="true"]') && !document.body.textContent?.includes('Loading…'), undefined, { timeout: 5000 }).catch(async () => {
      console.error(`console-screenshots: ${route} still loading: ${await page.locator('main').innerText()}`);
    });
    await page.screenshot({ path: path.join(out, file), fullPage: true });
  }
  // The restore's confirmation, with its dry run's word on the signing keys.
  await page.goto(`${serve.url}/admin/backups`);
  await page.locator('#backup-list tbody tr[data-backup-id]').first().getByRole('button', { name: 'Restore…' }).click();
  await page.getByRole('dialog', { name: /^Restore / }).waitFor();
  await page.waitForFunction(() => !document.querySelector('#restore-preview')?.textContent?.startsWith('Checking'));
  await page.screenshot({ path: path.join(out, 'backup-restore.png') });
  await page.keyboard.press('Escape');
  await page.goto(`${serve.url}/admin/licenses`);
  await page.getByRole('searchbox', { name: 'Search' }).fill(demo.keyPrefix.replace(/-/g, '').toLowerCase().slice(0, 6));
  await page.getByRole('list', { name: 'Search results' }).waitFor();
  await page.screenshot({ path: path.join(out, 'search.png') });
  console.log(`console-screenshots: ${shots.length + 3} pictures in ${out}`);
} finally {
  await browser.close();
  await serve.stop();
  rmSync(work, { recursive: true, force: true });
}
