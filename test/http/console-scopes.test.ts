import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { ACTIONS, type Page as ConsolePage } from '../../src/console/actions.js';
import { SCOPES } from '../../src/lib/admin-tokens.js';
import { consolePage, launchChromium, signIn } from '../support/browser.js';
import { seedConsoleDemo, type ConsoleDemo } from '../support/console-demo.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';
import { ok, runCli } from '../support/cli.js';

const LISTS: ReadonlySet<ConsolePage> = new Set(['licenses', 'customers', 'machines', 'backups', 'deliveries', 'entitlements', 'tokens']);

// The console follows the token's scopes: for a token of each scope, every action of the
// console's table (src/console/actions.ts) is on each page that offers it exactly when the
// route table lets that token call the action's route (GET /api/whoami), and nothing more.
describe('the console for a token of each scope', function () {
  this.timeout(300_000);
  let work: string;
  let serve: ServeProcess;
  let browser: Browser;
  let demo: ConsoleDemo;

  before(async function () {
    browser = await launchChromium(this);
    work = mkdtempSync(path.join(tmpdir(), 'license-console-scopes-'));
    const databaseUrl = path.join(work, 'data', 'db.sqlite');
    serve = await startServe({ LICENSE_DATABASE_URL: databaseUrl, LICENSE_BACKUP_PATH: path.join(work, 'backups'), LICENSE_BACKUP_ENCRYPTION_KEY: '78'.repeat(32) });
    // A webhook whose receiver is gone, so that there are deliveries to redeliver.
    writeFileSync(path.join(work, 'notifications.yaml'), 'webhooks:\n  - name: crm\n    url: http://127.0.0.1:9/hook\n    secret: a-secret-of-the-crm-webhook\nrules:\n  - event: license.*\n    webhook: crm\n');
    ok(await runCli(['notifications', 'set', '--file', path.join(work, 'notifications.yaml')], { env: { LICENSE_DATABASE_URL: databaseUrl } }));
    demo = await seedConsoleDemo(serve.url, serve.token!, work);
    assert.equal((await api(serve.url, 'POST', '/api/backups', { token: serve.token })).status, 201);
  });
  after(async () => {
    await browser?.close();
    await serve?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  // Each scope alone, and read with licenses: a support person's token.
  for (const scopes of [...SCOPES.map((scope) => [scope]), ['read', 'licenses']]) {
    const scope = scopes.join('+');
    it(`offers a "${scope}" token exactly the actions its routes allow on the pages it may read, and the whole key only with licenses or admin`, async () => {
      const created = await api(serve.url, 'POST', '/api/tokens', { token: serve.token, body: { name: `console-${scope.replace('+', '-')}`, scopes } });
      assert.equal(created.status, 201, created.text);
      const whoami = await api(serve.url, 'GET', '/api/whoami', { token: created.body.token });
      const routes = new Set<string>(whoami.body.routes);
      const { context, page } = await consolePage(browser);
      try {
        await signIn(page, serve.url, created.body.token);
        // Each page, and the route whose answer it shows: no action on a page the token cannot read.
        const pages: Record<ConsolePage, readonly [string, string]> = {
          licenses: ['/admin/licenses', 'GET /api/licenses'],
          license: [`/admin/licenses/${demo.licenseId}`, 'GET /api/licenses/{id}'],
          customers: ['/admin/customers', 'GET /api/customers'],
          customer: [`/admin/customers/${demo.customerId}`, 'GET /api/customers/{id}'],
          machines: ['/admin/machines', 'GET /api/machines'],
          machine: [`/admin/machines/${demo.machineId}`, 'GET /api/machines/{id}'],
          backups: ['/admin/backups', 'GET /api/backups'],
          deliveries: ['/admin/deliveries', 'GET /api/notifications/deliveries'],
          entitlements: ['/admin/entitlements', 'GET /api/entitlements'],
          tokens: ['/admin/tokens', 'GET /api/tokens'],
        };
        const wrong: string[] = [];
        for (const [kind, [address, shows]] of Object.entries(pages) as Array<[ConsolePage, readonly [string, string]]>) {
          await page.goto(`${serve.url}${address}`);
          await page.getByRole('heading', { level: 1 }).waitFor();
          await page.waitForFunction(() => !(globalThis as unknown as { document: { body: { textContent: string } } }).document.body.textContent.includes('Loading…'));
          await page.locator('tbody[aria-busy="true"]').waitFor({ state: 'detached' }).catch(() => undefined);
          // Every list of the demo has rows, and row actions show with them: on a loaded machine
          // (CI) the backups page was counted before its rows came.
          if (LISTS.has(kind) && routes.has(shows)) await page.getByRole('main').locator('tbody tr').first().waitFor();
          for (const [name, action] of Object.entries(ACTIONS)) {
            if (!(action.pages as readonly string[]).includes(kind)) continue;
            const shown = (await page.getByRole('main').getByRole('button', { name: action.label, exact: true }).or(page.getByRole('main').getByRole('link', { name: action.label, exact: true })).count()) > 0;
            if (shown !== (routes.has(shows) && routes.has(action.route))) wrong.push(`${kind}: ${name} (${action.route}) ${shown ? 'shown' : 'missing'}`);
          }
          if (kind === 'license' && routes.has(shows)) {
            const keyShown = (await page.getByText(demo.licenseKey, { exact: true }).count()) > 0;
            const full = scopes.includes('admin') || scopes.includes('licenses');
            if (keyShown !== full) wrong.push(`license: the whole key ${keyShown ? 'shown' : 'missing'}`);
          }
        }
        for (const [title, route] of [['Licenses', 'GET /api/licenses'], ['Backups', 'GET /api/backups'], ['Tokens', 'GET /api/tokens']] as const) {
          const shown = (await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: title, exact: true }).count()) > 0;
          if (shown !== routes.has(route)) wrong.push(`navigation: ${title} ${shown ? 'shown' : 'missing'}`);
        }
        assert.deepEqual(wrong, []);
      } finally {
        await context.close();
      }
    });
  }
});
